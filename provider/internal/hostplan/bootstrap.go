// Package hostplan turns what Cluster API gives a Machine into NodePlans for its Host:
// the prepare plan (prerequisites checked, artifacts downloaded, the HostMachine's
// prepareCommands), written as soon as the Host is claimed; the bootstrap plan from the
// kubeadm bootstrap provider's cloud-config (write_files, runcmd); and the reset plan that
// undoes both when the machine is deleted.
package hostplan

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// Host is what the bootstrap plan needs to know about its Host.
type Host struct {
	// Name of the Host object (the node's name and providerID use it).
	Name string
	// Address the Host registered with.
	Address string
}

// Plan is a NodePlan spec and the data of the Secret its files reference.
type Plan struct {
	Spec agentv1.NodePlanSpec
	// SecretData holds the cloud-config files' contents, keyed as the plan's
	// contentRef.secretKeyRef keys name them (bootstrap data holds keys and tokens, so it
	// lives in a Secret, not in the plan).
	SecretData map[string][]byte
}

// Timeouts of the bootstrap plan: kubeadm init waits up to 4 minutes for the control
// plane and pulls nothing (images are imported), join waits for the API server; image
// imports of a few hundred MB take a minute or two on a busy machine.
var (
	instructionTimeout = 20 * time.Minute
	executionTimeout   = 45 * time.Minute
)

// PreflightChecks are the host prerequisites the bootstrap plan checks before it writes
// anything; a missing one fails the plan with the check's name. Paths are those of
// Debian's containerd, runc and containernetworking-plugins (the plugins seen at
// /opt/cni/bin, where kubelet's CNI looks).
var PreflightChecks = []agentv1.PreflightCheck{
	fileCheck("containerd-socket", "/run/containerd/containerd.sock"),
	fileCheck("runc", "/usr/sbin/runc"),
	fileCheck("cni-bridge", "/opt/cni/bin/bridge"),
	fileCheck("cni-host-local", "/opt/cni/bin/host-local"),
	fileCheck("cni-loopback", "/opt/cni/bin/loopback"),
	fileCheck("cni-portmap", "/opt/cni/bin/portmap"),
}

func fileCheck(name, p string) agentv1.PreflightCheck {
	return agentv1.PreflightCheck{Name: name, Required: true, Probe: agentv1.Probe{FileExists: &agentv1.FileExistsProbe{Path: p}}}
}

// supportedKeys are the cloud-config modules the plan can express. Anything else in the
// bootstrap data (users, ntp, disk_setup, mounts, bootcmd...) fails the conversion by
// name rather than being silently dropped.
var supportedKeys = map[string]bool{"write_files": true, "runcmd": true}

type cloudConfig struct {
	WriteFiles []writeFile       `json:"write_files"`
	RunCmd     []json.RawMessage `json:"runcmd"`
}

type writeFile struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Encoding    string `json:"encoding"`
	Owner       string `json:"owner"`
	Permissions string `json:"permissions"`
	Append      bool   `json:"append"`
	Defer       bool   `json:"defer"`
}

// Bootstrap converts a cloud-config into the bootstrap plan of host: write_files, then
// runcmd (the artifacts and the ip_forward check are the prepare plan's, which ran before).
// secretName is the Secret (in the plan's namespace) that will hold SecretData.
func Bootstrap(cloudConfigData []byte, host Host, secretName string) (*Plan, error) {
	rendered, err := renderJinja(cloudConfigData, host)
	if err != nil {
		return nil, err
	}
	var keys map[string]json.RawMessage
	if err := yaml.Unmarshal(rendered, &keys); err != nil {
		return nil, fmt.Errorf("the bootstrap data is not a cloud-config (YAML): %w", err)
	}
	var unsupported []string
	for k, v := range keys {
		if !supportedKeys[k] && string(v) != "null" && string(v) != "[]" && string(v) != "{}" {
			unsupported = append(unsupported, k)
		}
	}
	if len(unsupported) > 0 {
		sort.Strings(unsupported)
		return nil, fmt.Errorf("the cloud-config uses %s, which a host plan cannot express (only write_files and runcmd)", strings.Join(unsupported, ", "))
	}
	var cc cloudConfig
	if err := yaml.Unmarshal(rendered, &cc); err != nil {
		return nil, fmt.Errorf("the cloud-config: %w", err)
	}

	plan := &Plan{SecretData: map[string][]byte{}}
	spec := &plan.Spec
	spec.PreflightChecks = append([]agentv1.PreflightCheck(nil), PreflightChecks...)
	spec.ExecutionTimeout = &metav1.Duration{Duration: executionTimeout}
	// A retry is what lets a machine survive its agent being killed mid-plan (the agent
	// counts the interrupted attempt); kubeadm's commands are idempotent enough for the
	// bootstrap data's own pre-commands to clean up a half-done attempt.
	spec.RetryStrategy = &agentv1.RetryStrategy{MaxAttempts: 3, InitialBackoff: &metav1.Duration{Duration: 5 * time.Second}}

	for i, f := range cc.WriteFiles {
		file, content, err := planFile(f)
		if err != nil {
			return nil, fmt.Errorf("write_files[%d] (%s): %w", i, f.Path, err)
		}
		key := fmt.Sprintf("file-%d", i)
		plan.SecretData[key] = content
		file.ContentRef = &agentv1.ContentRef{
			SecretKeyRef: &agentv1.KeyReference{Name: secretName, Key: key},
			Digest:       agentv1.Digest(content),
		}
		spec.Files = append(spec.Files, file)
	}

	for i, raw := range cc.RunCmd {
		ins, err := instruction(i, raw)
		if err != nil {
			return nil, fmt.Errorf("runcmd[%d]: %w", i, err)
		}
		spec.Instructions = append(spec.Instructions, ins)
	}
	return plan, nil
}

// jinjaVar matches a bare variable reference, `{{ ds.meta_data.hostname }}`.
var jinjaVar = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}`)

// renderJinja substitutes the instance-data variables Cluster API users put in kubeadm
// configs (`## template: jinja` cloud-configs) with the Host's name and address. There is
// no cloud-init on a host, so an unknown variable is an error, not an empty string.
func renderJinja(data []byte, host Host) ([]byte, error) {
	firstLine, _, _ := bytes.Cut(data, []byte("\n"))
	if !bytes.Contains(firstLine, []byte("template: jinja")) {
		return data, nil
	}
	values := map[string]string{
		"ds.meta_data.hostname":       host.Name,
		"ds.meta_data.local_hostname": host.Name,
		"v1.local_hostname":           host.Name,
		"local_hostname":              host.Name,
		"ds.meta_data.instance_id":    host.Name,
		"v1.instance_id":              host.Name,
		"ds.meta_data.local_ipv4":     host.Address,
		"v1.local_ipv4":               host.Address,
	}
	var unknown []string
	out := jinjaVar.ReplaceAllFunc(data, func(m []byte) []byte {
		name := string(jinjaVar.FindSubmatch(m)[1])
		if v, ok := values[name]; ok {
			return []byte(v)
		}
		unknown = append(unknown, name)
		return m
	})
	if len(unknown) > 0 {
		return nil, fmt.Errorf("the cloud-config uses jinja variables a host does not have: %s (known: ds.meta_data.hostname, ds.meta_data.local_hostname, ds.meta_data.local_ipv4, ds.meta_data.instance_id, v1.*)", strings.Join(unknown, ", "))
	}
	return out, nil
}

var ownerRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(:[A-Za-z0-9._-]+)?$`)

func planFile(f writeFile) (agentv1.PlanFile, []byte, error) {
	if !strings.HasPrefix(f.Path, "/") {
		return agentv1.PlanFile{}, nil, fmt.Errorf("path is not absolute")
	}
	if f.Append {
		return agentv1.PlanFile{}, nil, fmt.Errorf("append: true is not supported (a plan writes whole files)")
	}
	content, err := decode(f.Content, f.Encoding)
	if err != nil {
		return agentv1.PlanFile{}, nil, err
	}
	file := agentv1.PlanFile{Path: f.Path}
	if f.Permissions != "" {
		if file.Mode, err = mode(f.Permissions); err != nil {
			return agentv1.PlanFile{}, nil, err
		}
	}
	if f.Owner != "" {
		if !ownerRE.MatchString(f.Owner) {
			return agentv1.PlanFile{}, nil, fmt.Errorf("owner %q is not user[:group]", f.Owner)
		}
		file.Owner = f.Owner
	}
	return file, content, nil
}

// decode handles cloud-init's encodings: text, base64 (b64) and gzip, alone or together.
func decode(content, encoding string) ([]byte, error) {
	raw := []byte(content)
	switch strings.ToLower(encoding) {
	case "", "text/plain":
		return raw, nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(strings.TrimSpace(content))
	case "gz", "gzip":
		return gunzip(raw)
	case "gz+base64", "gzip+base64", "gz+b64", "gzip+b64":
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(content))
		if err != nil {
			return nil, err
		}
		return gunzip(b)
	default:
		return nil, fmt.Errorf("encoding %q is not one cloud-init knows", encoding)
	}
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// mode turns cloud-init's permissions ('0640', '0o640', '640') into the plan's octal mode.
func mode(p string) (string, error) {
	s := strings.TrimPrefix(strings.TrimPrefix(strings.Trim(p, `'"`), "0o"), "0")
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return "", fmt.Errorf("permissions %q: want an octal mode up to 0777", p)
	}
	return fmt.Sprintf("0%03o", v), nil
}

// instruction makes runcmd[i] an instruction: a string runs with /bin/sh -c (as
// cloud-init runs it), a list is argv.
func instruction(i int, raw json.RawMessage) (agentv1.Instruction, error) {
	var line string
	var argv []string
	if err := json.Unmarshal(raw, &line); err == nil {
		argv = []string{"/bin/sh", "-c", line}
		if once, ok := kubeadmOnce(line); ok {
			argv[2] = once
		}
	} else if err := json.Unmarshal(raw, &argv); err != nil || len(argv) == 0 {
		return agentv1.Instruction{}, fmt.Errorf("neither a string nor a list of strings: %s", raw)
	} else {
		line = strings.Join(argv, " ")
	}
	return agentv1.Instruction{
		Name:    instructionName(i, line),
		Command: argv[0],
		Args:    argv[1:],
		Timeout: &metav1.Duration{Duration: instructionTimeout},
		// kubeadm init prints a join command with a bootstrap token: keep its output out
		// of the plan's status; every other command's tail says why it failed.
		SaveOutput: !strings.Contains(line, "kubeadm init"),
	}, nil
}

// SuccessMarker is Cluster API's: its kubeadm runcmd line ends `&& echo success > SuccessMarker`.
const SuccessMarker = "/run/cluster-api/bootstrap-success.complete"

// KubeadmRecord is where the bootstrap plan records, before kubeadm runs, the sha256 of the
// kubeadm config it runs kubeadm with (sha256sum's format): the marker together with a
// matching record means an earlier attempt of this very plan (the config holds the
// Machine's bootstrap token) succeeded. The hosts platform's worker plans read it too,
// to tell their own interrupted join from another cluster's leftovers. The reset plan
// empties its directory.
const KubeadmRecord = "/run/cluster-api/provisioner-kubeadm.sha256"

var kubeadmConfigLine = regexp.MustCompile(`^\s*kubeadm (init|join)\s.*--config[ =](\S+)`)

// kubeadmOnce wraps Cluster API's kubeadm line so that a retried plan does not run kubeadm
// again once it succeeded (a second init or join refuses the files of the first): the
// agent may have died after kubeadm and before the plan ended, or a worker plan's first
// instruction may have found its interrupted join complete and written the marker.
func kubeadmOnce(line string) (string, bool) {
	m := kubeadmConfigLine.FindStringSubmatch(line)
	if m == nil || !strings.Contains(line, SuccessMarker) {
		return "", false
	}
	return fmt.Sprintf(`if [ -f %[1]s ] && sha256sum -c --status %[2]s 2>/dev/null; then
  echo "kubeadm %[3]s succeeded in an earlier attempt of this plan (Cluster API's success marker, the same config): not run again"; exit 0
fi
mkdir -p %[4]s && sha256sum %[5]s > %[2]s || exit 1
%[6]s`, SuccessMarker, KubeadmRecord, m[1], path.Dir(KubeadmRecord), m[2], line), true
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// instructionName: "cmd-<n>-<first two words>", e.g. cmd-3-kubeadm-init, so a failure
// message says what failed.
func instructionName(i int, line string) string {
	var words []string
	for _, w := range strings.Fields(line) {
		if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "=<>|&;'\"$") {
			break
		}
		words = append(words, nonSlug.ReplaceAllString(strings.ToLower(path.Base(w)), "-"))
		if len(words) == 2 {
			break
		}
	}
	name := strings.Trim(fmt.Sprintf("cmd-%d-%s", i+1, strings.Join(words, "-")), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

// yamlUnmarshal is yaml.Unmarshal (tests read cloud-configs the way Bootstrap does).
func yamlUnmarshal(data []byte, v any) error { return yaml.Unmarshal(data, v) }
