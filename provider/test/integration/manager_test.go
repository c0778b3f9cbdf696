package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestManagerBinaryServesOnLoopbackWithTheControlPlaneFlags starts the real manager binary
// with the flags the local control plane passes to every provider.
func TestManagerBinaryServesOnLoopbackWithTheControlPlaneFlags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "provisioner-agent-manager")
	build := exec.Command("go", "build", "-ldflags", "-X provisioner.dev/provider/internal/version.Version=v0.0.0-test", "-o", bin, "../../cmd/manager")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || strings.TrimSpace(string(out)) != "v0.0.0-test" {
		t.Fatalf("--version: %q %v", out, err)
	}
	user, err := testEnv.AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigFile := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	webhookPort, healthPort, metricsPort := freePort(t), freePort(t), freePort(t)
	cmd := exec.Command(bin,
		"--kubeconfig", kubeconfigFile,
		"--webhook-port", strconv.Itoa(webhookPort),
		"--webhook-cert-dir", testEnv.WebhookInstallOptions.LocalServingCertDir,
		"--health-addr", fmt.Sprintf("127.0.0.1:%d", healthPort),
		"--diagnostics-address", fmt.Sprintf("127.0.0.1:%d", metricsPort),
		"--insecure-diagnostics",
		"--leader-elect=false",
	)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("manager log:\n%s", log)
		}
	}()

	for _, url := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort),
		fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
	} {
		eventually(t, 30*time.Second, url, func() (bool, string) {
			resp, err := http.Get(url)
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
	}
	// Every port it listens on is bound to 127.0.0.1, none to every interface.
	listening := listeningAddresses(t)
	for _, port := range []int{webhookPort, healthPort, metricsPort} {
		ip, ok := listening[port]
		if !ok {
			t.Errorf("nothing listens on port %d", port)
		} else if ip != "127.0.0.1" {
			t.Errorf("port %d is bound to %s, want 127.0.0.1", port, ip)
		}
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("the manager did not stop within 20s of SIGTERM")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listeningAddresses maps each listening IPv4 TCP port to its bound address, from /proc/net/tcp.
func listeningAddresses(t *testing.T) map[int]string {
	t.Helper()
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
			continue
		}
		hostHex, portHex, _ := strings.Cut(f[1], ":")
		port, _ := strconv.ParseUint(portHex, 16, 16)
		h, _ := strconv.ParseUint(hostHex, 16, 32)
		out[int(port)] = net.IPv4(byte(h), byte(h>>8), byte(h>>16), byte(h>>24)).String()
	}
	return out
}
