// Package integration tests the manager and the agent against a real etcd and
// kube-apiserver (envtest, with provisioner's bundled binaries: KUBEBUILDER_ASSETS, see
// hack/envtest-assets.sh). The manager runs in the test process; the agent runs as the
// real binary, built once per run.
package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
	"provisioner.dev/provider/internal/controller"
	"provisioner.dev/provider/internal/webhooks"
)

// testResetTimeout is the manager's --host-reset-timeout in these tests (short, so the
// forced release of a host whose agent is gone is seen in seconds).
const testResetTimeout = 12 * time.Second

var (
	// admin is a cluster-admin client of the test API server.
	admin client.Client
	// cfg is the admin rest config (its Host and CA are what agents are given).
	cfg *rest.Config
	// agentBin is the provisioner-agent binary under test.
	agentBin string
	// caChecksum pins the test API server's CA.
	caChecksum string
	// testEnv is the envtest environment (for its users and webhook serving certs).
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapLevel()))))
	tmp, err := os.MkdirTemp("", "agent-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	agentBin = filepath.Join(tmp, "provisioner-agent")
	build := exec.Command("go", "build", "-o", agentBin, "../../cmd/agent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the agent:", err)
		return 1
	}

	capiCRDs, err := clusterAPICRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{"../../config/crd"}, capiCRDs...),
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{"../../config/webhook"}},
	}
	testEnv = env
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer env.Stop() //nolint:errcheck

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = agentv1.AddToScheme(scheme)
	_ = infrav1.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	_ = ipamv1.AddToScheme(scheme)
	_ = poolv1.AddToScheme(scheme)
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	block, _ := pem.Decode(cfg.CAData)
	sum := sha256.Sum256(block.Bytes)
	caChecksum = hex.EncodeToString(sum[:])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startManager(ctx, env, cfg, admin, scheme); err != nil {
		fmt.Fprintln(os.Stderr, "start the manager:", err)
		return 1
	}
	return m.Run()
}

// clusterAPICRDs are the Cluster, Machine, IPAddressClaim and IPAddress CRDs of the Cluster
// API module this provider builds against (the module cache's copy), for the HostCluster,
// HostMachine and AddressPool tests.
func clusterAPICRDs() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		return nil, fmt.Errorf("locate sigs.k8s.io/cluster-api: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "core", "config", "crd", "bases")
	return []string{filepath.Join(dir, "cluster.x-k8s.io_clusters.yaml"), filepath.Join(dir, "cluster.x-k8s.io_machines.yaml"),
		filepath.Join(dir, "ipam.cluster.x-k8s.io_ipaddressclaims.yaml"), filepath.Join(dir, "ipam.cluster.x-k8s.io_ipaddresses.yaml")}, nil
}

func zapLevel() int8 {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -1
	}
	return 2 // errors only: the agent's and manager's info logs drown the test output
}

// startManager runs the agent manager's controllers and webhooks against env's API
// server (cfg, admin: its admin config and client), in this process.
func startManager(ctx context.Context, env *envtest.Environment, cfg *rest.Config, admin client.Client, scheme *runtime.Scheme) error {
	wh := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// A second manager in this process (the hand-over test's target) names its
		// controllers alike.
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
	})
	if err != nil {
		return err
	}
	for _, setup := range []func(ctrl.Manager) error{
		(&controller.RegistrationTokenReconciler{Client: mgr.GetClient()}).SetupWithManager,
		(&controller.HostRegistrationReconciler{Client: mgr.GetClient()}).SetupWithManager,
		(&controller.HostReconciler{Client: mgr.GetClient()}).SetupWithManager,
		(&controller.HostClusterReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager,
		(&controller.HostMachineReconciler{WatchMachines: true, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("hostmachine-controller"), ResetTimeout: testResetTimeout, Concurrency: 10}).SetupWithManager,
		(&webhooks.NodePlan{Client: mgr.GetAPIReader()}).SetupWebhookWithManager,
		(&webhooks.HostRegistration{Client: mgr.GetAPIReader()}).SetupWebhookWithManager,
		(&webhooks.HostCluster{}).SetupWebhookWithManager,
		(&webhooks.HostClusterTemplate{}).SetupWebhookWithManager,
		(&webhooks.HostMachine{}).SetupWebhookWithManager,
		(&webhooks.HostMachineTemplate{}).SetupWebhookWithManager,
		(&controller.IPAddressClaimReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), OwnerCheckInterval: 2 * time.Second}).SetupWithManager,
		(&webhooks.AddressPool{}).SetupWebhookWithManager,
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	if err := controller.PublishServerCA(ctx, admin, agentv1.DefaultRegistrationNamespace, cfg.CAData); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	// Ready when the webhook answers: a create that only the webhook refuses.
	deadline := time.Now().Add(30 * time.Second)
	for {
		plan := &agentv1.NodePlan{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe-webhook"},
			Spec: agentv1.NodePlanSpec{Probes: []agentv1.NamedProbe{{Name: "p", Probe: agentv1.Probe{FileExists: &agentv1.FileExistsProbe{Path: "/"}}}}}}
		err := admin.Create(ctx, plan, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), agentv1.HostLabel) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook did not answer within 30s (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventually polls cond until it holds or timeout passes, then fails with its last word.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newToken creates a RegistrationToken and returns its import token once it is Ready.
func newToken(t *testing.T, name string, ttl time.Duration) string {
	t.Helper()
	ctx := context.Background()
	tok := &agentv1.RegistrationToken{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.DefaultRegistrationNamespace, Name: name},
		Spec:       agentv1.RegistrationTokenSpec{TTL: &metav1.Duration{Duration: ttl}},
	}
	if err := admin.Create(ctx, tok); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "token "+name+" ready", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(tok), tok); err != nil {
			return false, err.Error()
		}
		return tok.Status.Phase == agentv1.TokenReady || tok.Status.Phase == agentv1.TokenExpired, string(tok.Status.Phase)
	})
	var secret corev1.Secret
	if err := admin.Get(ctx, client.ObjectKey{Namespace: tok.Namespace, Name: tok.Status.SecretName}, &secret); err != nil {
		t.Fatal(err)
	}
	return string(secret.Data["token"])
}

// result of one agent command.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func runAgent(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(agentBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// registerHost registers a host with a fresh token and returns its data directory.
func registerHost(t *testing.T, host string) string {
	t.Helper()
	dataDir := t.TempDir()
	token := newToken(t, "tok-"+host, time.Hour)
	r := runAgent(t, "register", "--server", cfg.Host, "--ca-checksum", caChecksum, "--token", token, "--host-name", host, "--data-dir", dataDir)
	if r.code != 0 {
		t.Fatalf("register %s: %s", host, r)
	}
	return dataDir
}

// agentProcess is a running `provisioner-agent run`.
type agentProcess struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

func startAgent(t *testing.T, dataDir, lockFile string, extra ...string) *agentProcess {
	t.Helper()
	args := append([]string{"run", "--data-dir", dataDir, "--lock-file", lockFile, "--heartbeat-interval", "500ms"}, extra...)
	cmd := exec.Command(agentBin, args...)
	p := &agentProcess{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *agentProcess) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the agent and reaps it (a zombie would still look alive to the lock).
func (p *agentProcess) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

func (p *agentProcess) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("the agent did not exit within %s", timeout)
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) {
		return exitErr.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

func metav1ObjectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
