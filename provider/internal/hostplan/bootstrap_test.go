package hostplan

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/cluster-api/util/secret"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

var testHost = Host{Name: "h1", Address: "198.18.0.10"}

// initCloudConfig is what CAPI v1.14.2's kubeadm bootstrap provider emits for the first
// control-plane Machine: its own cloudinit package, real generated certificates, a
// jinja node name, a pre-command, and an extra file in each encoding it supports.
func initCloudConfig(t *testing.T) []byte {
	t.Helper()
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	data, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{
		BaseUserData: cloudinit.BaseUserData{
			PreKubeadmCommands:  []string{"ctr --address /run/containerd/containerd.sock -n k8s.io images import /var/lib/provisioner/images/kube-apiserver.tar"},
			PostKubeadmCommands: []string{"echo done"},
			AdditionalFiles: []bootstrapv1.File{
				{Path: "/etc/provisioner/plain.conf", Owner: "root:root", Permissions: "0600", Content: "plain\n"},
				{Path: "/etc/provisioner/b64.conf", Encoding: bootstrapv1.Base64, Content: base64.StdEncoding.EncodeToString([]byte("from base64\n"))},
				{Path: "/etc/provisioner/gz.conf", Encoding: bootstrapv1.GzipBase64, Content: gzipBase64(t, "from gzip\n")},
			},
			KubernetesVersion: semver.MustParse("1.36.3"),
		},
		Certificates:         certs,
		ClusterConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n",
		InitConfiguration:    "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: '{{ ds.meta_data.hostname }}'\n  kubeletExtraArgs:\n  - name: provider-id\n    value: provisioner-host://{{ ds.meta_data.hostname }}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func gzipBase64(t *testing.T, s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func fileByPath(t *testing.T, p *Plan, path string) (agentv1.PlanFile, []byte) {
	t.Helper()
	for _, f := range p.Spec.Files {
		if f.Path == path {
			if f.ContentRef == nil || f.ContentRef.SecretKeyRef == nil {
				return f, nil
			}
			content := p.SecretData[f.ContentRef.SecretKeyRef.Key]
			if agentv1.Digest(content) != f.ContentRef.Digest {
				t.Fatalf("%s: digest %s does not match its content's %s", path, f.ContentRef.Digest, agentv1.Digest(content))
			}
			return f, content
		}
	}
	t.Fatalf("no file %s in the plan", path)
	return agentv1.PlanFile{}, nil
}

func TestBootstrapFromKubeadmInitCloudConfig(t *testing.T) {
	data := initCloudConfig(t)
	plan, err := Bootstrap(data, testHost, "m1-files")
	if err != nil {
		t.Fatalf("%v\ncloud-config:\n%s", err, data)
	}
	// No artifact: the prepare plan downloaded them.
	for _, f := range plan.Spec.Files {
		if f.ContentRef != nil && f.ContentRef.URL != "" {
			t.Errorf("the bootstrap plan downloads %s", f.Path)
		}
	}

	// kubeadm.yaml: the jinja variables became the host's name; permissions and owner kept.
	f, content := fileByPath(t, plan, "/run/kubeadm/kubeadm.yaml")
	if f.Mode != "0640" || f.Owner != "root:root" || f.ContentRef.SecretKeyRef.Name != "m1-files" {
		t.Errorf("kubeadm.yaml: %+v", f)
	}
	if !strings.Contains(string(content), "name: 'h1'") || !strings.Contains(string(content), "provisioner-host://h1") || strings.Contains(string(content), "{{") {
		t.Errorf("kubeadm.yaml not rendered:\n%s", content)
	}
	if !strings.Contains(string(content), "kind: ClusterConfiguration") || !strings.Contains(string(content), "kind: InitConfiguration") {
		t.Errorf("kubeadm.yaml lost a document:\n%s", content)
	}
	// The CA key the bootstrap provider generated lands byte for byte.
	caKey := certsOf(t, data)
	_, gotKey := fileByPath(t, plan, "/etc/kubernetes/pki/ca.key")
	if caKey == "" || string(gotKey) != caKey {
		t.Errorf("ca.key differs from the cloud-config's")
	}
	if f, _ := fileByPath(t, plan, "/etc/kubernetes/pki/ca.key"); f.Mode != "0600" {
		t.Errorf("ca.key mode %q, want 0600", f.Mode)
	}
	// Encodings are decoded.
	for path, want := range map[string]string{"/etc/provisioner/plain.conf": "plain\n", "/etc/provisioner/b64.conf": "from base64\n", "/etc/provisioner/gz.conf": "from gzip\n"} {
		if _, got := fileByPath(t, plan, path); string(got) != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	// No file content is inline in the plan: bootstrap data holds private keys.
	for _, f := range plan.Spec.Files {
		if f.Content != nil {
			t.Errorf("%s is inline", f.Path)
		}
	}

	// Instructions: runcmd in order through /bin/sh -c (the ip_forward check is the prepare plan's).
	var names []string
	for _, ins := range plan.Spec.Instructions {
		names = append(names, ins.Name)
	}
	want := []string{"cmd-1-ctr", "cmd-2-kubeadm-init", "cmd-3-echo-done"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("instructions %v, want %v", names, want)
	}
	init := plan.Spec.Instructions[1]
	if init.Command != "/bin/sh" || init.Args[0] != "-c" || !strings.Contains(init.Args[1], "\nkubeadm init --config /run/kubeadm/kubeadm.yaml") || !strings.Contains(init.Args[1], "bootstrap-success.complete") {
		t.Errorf("kubeadm init instruction: %+v", init)
	}
	if init.SaveOutput {
		t.Error("kubeadm init's output (a join token) is saved in the plan's status")
	}
	if !plan.Spec.Instructions[0].SaveOutput {
		t.Error("a pre-command's output is not saved")
	}

	// Preflight checks name the prerequisites.
	var checks []string
	for _, c := range plan.Spec.PreflightChecks {
		if !c.Required || c.Probe.FileExists == nil {
			t.Errorf("check %s: %+v", c.Name, c)
		}
		checks = append(checks, c.Name)
	}
	if strings.Join(checks, ",") != "containerd-socket,runc,cni-bridge,cni-host-local,cni-loopback,cni-portmap" {
		t.Errorf("checks: %v", checks)
	}
}

// certsOf reads ca.key's content from the cloud-config the way cloud-init would.
func certsOf(t *testing.T, data []byte) string {
	t.Helper()
	var cc cloudConfig
	if err := yamlUnmarshal(data, &cc); err != nil {
		t.Fatal(err)
	}
	for _, f := range cc.WriteFiles {
		if f.Path == "/etc/kubernetes/pki/ca.key" {
			return f.Content
		}
	}
	return ""
}

func TestBootstrapFromKubeadmJoinCloudConfig(t *testing.T) {
	data, err := cloudinit.NewNode(&cloudinit.NodeInput{
		BaseUserData: cloudinit.BaseUserData{
			PreKubeadmCommands: []string{"kubeadm reset -f || true"},
			KubernetesVersion:  semver.MustParse("1.36.3"),
			KubeadmVerbosity:   "--v=2",
		},
		JoinConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Bootstrap(data, testHost, "w1-files")
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if _, content := fileByPath(t, plan, "/run/kubeadm/kubeadm-join-config.yaml"); !strings.Contains(string(content), "kind: JoinConfiguration") {
		t.Errorf("join config: %s", content)
	}
	last := plan.Spec.Instructions[len(plan.Spec.Instructions)-1]
	if last.Name != "cmd-2-kubeadm-join" || !strings.Contains(last.Args[1], "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml --v=2") || !last.SaveOutput {
		t.Errorf("join instruction: %+v", last)
	}

	// The join line runs kubeadm once per plan: run for real (sh, sha256sum, a kubeadm that
	// logs its runs) with the plan's /run paths moved to a scratch directory.
	root := t.TempDir()
	script := strings.NewReplacer("/run/", root+"/run/").Replace(last.Args[1])
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(root, "runs")
	if err := os.WriteFile(filepath.Join(bin, "kubeadm"), []byte("#!/bin/sh\necho \"$*\" >> "+runs+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "run/kubeadm/kubeadm-join-config.yaml")
	if err := os.MkdirAll(filepath.Dir(config), 0o755); err != nil {
		t.Fatal(err)
	}
	attempt := func(configContent string) string {
		t.Helper()
		if err := os.WriteFile(config, []byte(configContent), 0o600); err != nil { // write_files, each attempt
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		raw, _ := os.ReadFile(runs)
		return fmt.Sprintf("%d runs, %s", strings.Count(string(raw), "join --config"), strings.TrimSpace(string(out)))
	}
	if got := attempt("token: a"); !strings.HasPrefix(got, "1 runs") {
		t.Fatalf("first attempt: %s", got)
	}
	if got := attempt("token: a"); got != "1 runs, kubeadm join succeeded in an earlier attempt of this plan (Cluster API's success marker, the same config): not run again" {
		t.Fatalf("a retry after the join succeeded: %s", got)
	}
	// Another plan's marker (another config): kubeadm runs.
	if got := attempt("token: b"); !strings.HasPrefix(got, "2 runs") {
		t.Fatalf("another config: %s", got)
	}
	// No marker (the join did not succeed): kubeadm runs again.
	if err := os.Remove(filepath.Join(root, "run/cluster-api/bootstrap-success.complete")); err != nil {
		t.Fatal(err)
	}
	if got := attempt("token: b"); !strings.HasPrefix(got, "3 runs") {
		t.Fatalf("no marker: %s", got)
	}
}

func TestBootstrapRefusesWhatAPlanCannotExpress(t *testing.T) {
	for name, tc := range map[string]struct{ data, want string }{
		"users":         {"#cloud-config\nusers:\n- name: a\nruncmd: [\"true\"]\n", "users"},
		"append":        {"#cloud-config\nwrite_files:\n- path: /a\n  append: true\n  content: x\n", "append"},
		"jinja unknown": {"## template: jinja\n#cloud-config\nruncmd: ['echo {{ ds.meta_data.region }}']\n", "ds.meta_data.region"},
		"relative path": {"#cloud-config\nwrite_files:\n- path: a\n  content: x\n", "not absolute"},
		"bad mode":      {"#cloud-config\nwrite_files:\n- path: /a\n  permissions: '4755'\n  content: x\n", "4755"},
		"bad encoding":  {"#cloud-config\nwrite_files:\n- path: /a\n  encoding: rot13\n  content: x\n", "rot13"},
		"not yaml":      {"#cloud-config\n: [\n", "YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Bootstrap([]byte(tc.data), testHost, "s")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestRunCmdListIsArgv(t *testing.T) {
	plan, err := Bootstrap([]byte("#cloud-config\nruncmd:\n- [/usr/bin/touch, /tmp/x y]\n"), testHost, "s")
	if err != nil {
		t.Fatal(err)
	}
	ins := plan.Spec.Instructions[0]
	if ins.Command != "/usr/bin/touch" || len(ins.Args) != 1 || ins.Args[0] != "/tmp/x y" || ins.Name != "cmd-1-touch-x" {
		t.Errorf("%+v", ins)
	}
}

func TestResetStopsKubeletFirst(t *testing.T) {
	spec := Reset()
	first := spec.Instructions[0]
	if first.Name != "stop-kubelet" || !strings.Contains(first.Args[1], `"${PROVISIONER_AGENT:-provisioner-agent}" supervise stop --name kubelet`) {
		t.Errorf("first reset step: %+v", first)
	}
	var all []string
	for _, ins := range spec.Instructions {
		all = append(all, strings.Join(ins.Args, " "))
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"kubeadm reset -f", "containers rm", "/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd", "/etc/cni/net.d", "$cmd-restore", "ip route del", "images rm", "/opt/cni/bin/flannel"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the reset plan does not do %q", want)
		}
	}
}
