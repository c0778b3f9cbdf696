package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/agent"
)

func TestRegistrationUsesTheTokenOnceAndNeverRegistersAgain(t *testing.T) {
	ctx := context.Background()
	token := newToken(t, "tok-reg", time.Hour)
	dataDir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	r := runAgent(t, "register", "--server", cfg.Host, "--ca-checksum", "sha256:"+caChecksum, "--token-file", tokenFile,
		"--host-name", "reg-host", "--roles", "worker,etcd", "--labels", "zone=a,rack=r1", "--data-dir", dataDir)
	if r.code != 0 {
		t.Fatalf("register: %s", r)
	}

	// The credential is on disk, 0600; the bootstrap token is not, anywhere.
	for _, name := range []string{"credential.json", "token"} {
		info, err := os.Stat(filepath.Join(dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %o, want 600", name, info.Mode().Perm())
		}
	}
	for _, gone := range []string{tokenFile, filepath.Join(dataDir, "bootstrap.json")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s still exists after registration (err %v)", gone, err)
		}
	}
	var cred agent.Credential
	raw, _ := os.ReadFile(filepath.Join(dataDir, "credential.json"))
	if err := json.Unmarshal(raw, &cred); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), token) {
		t.Error("credential.json contains the import token")
	}

	// The Host exists as asked, and its agent's credential reaches its plans and nothing else.
	var host agentv1.Host
	if err := admin.Get(ctx, client.ObjectKey{Name: "reg-host"}, &host); err != nil {
		t.Fatal(err)
	}
	if host.Labels["zone"] != "a" || host.Labels["rack"] != "r1" || !slices.Equal(host.Spec.Roles, []string{"worker", "etcd"}) {
		t.Errorf("host labels %v roles %v", host.Labels, host.Spec.Roles)
	}
	if host.Status.PlanNamespace != "host-reg-host" || cred.Namespace != "host-reg-host" {
		t.Errorf("plan namespace %q / credential %q", host.Status.PlanNamespace, cred.Namespace)
	}
	agentToken, _ := os.ReadFile(filepath.Join(dataDir, "token"))
	asAgent := clientWithToken(t, string(agentToken))
	var plans agentv1.NodePlanList
	if err := asAgent.List(ctx, &plans, client.InNamespace("host-reg-host")); err != nil {
		t.Errorf("the agent cannot list its own plans: %v", err)
	}
	if err := asAgent.List(ctx, &plans, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("the agent listing another namespace's plans: %v, want Forbidden", err)
	}
	var other agentv1.Host
	if err := asAgent.Get(ctx, client.ObjectKey{Name: "someone-else"}, &other); !apierrors.IsForbidden(err) {
		t.Errorf("the agent reading another Host: %v, want Forbidden", err)
	}

	// The token is spent, and the import credential is cleaned up once the agent is done with it.
	var tok agentv1.RegistrationToken
	if err := admin.Get(ctx, client.ObjectKey{Namespace: agentv1.DefaultRegistrationNamespace, Name: "tok-reg"}, &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Status.Phase != agentv1.TokenUsed || tok.Status.Host != "reg-host" {
		t.Errorf("token status %+v, want Used by reg-host", tok.Status)
	}
	eventually(t, 10*time.Second, "import serviceaccount and credential copy deleted", func() (bool, string) {
		for _, obj := range []client.Object{&corev1.ServiceAccount{}, &corev1.Secret{}} {
			name := "tok-reg"
			if _, ok := obj.(*corev1.Secret); ok {
				name = agentv1.CredentialSecretName("tok-reg")
			}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: agentv1.DefaultRegistrationNamespace, Name: name}, obj); !apierrors.IsNotFound(err) {
				return false, name + " still exists"
			}
		}
		return true, ""
	})

	// A restart with the same command line (token included) registers nothing.
	r = runAgent(t, "register", "--server", cfg.Host, "--ca-checksum", caChecksum, "--token", token, "--host-name", "reg-host", "--data-dir", dataDir)
	if r.code != 0 || !strings.Contains(r.stdout, "already registered as host reg-host") {
		t.Fatalf("second register: %s", r)
	}
	var regs agentv1.HostRegistrationList
	if err := admin.List(ctx, &regs, client.InNamespace(agentv1.DefaultRegistrationNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, reg := range regs.Items {
		if reg.Name == "tok-reg" {
			t.Errorf("a registration %s exists after the restart", reg.Name)
		}
	}

	// The same token on another machine (a fresh data directory) is refused.
	r = runAgent(t, "register", "--server", cfg.Host, "--ca-checksum", caChecksum, "--token", token, "--host-name", "thief", "--data-dir", t.TempDir())
	if r.code != agent.ExitCredentialRefused {
		t.Fatalf("reused token: %s; want exit %d", r, agent.ExitCredentialRefused)
	}
	if err := admin.Get(ctx, client.ObjectKey{Name: "thief"}, &other); !apierrors.IsNotFound(err) {
		t.Errorf("a Host was created with a reused token: %v", err)
	}
}

func TestInterruptedRegistrationResumesFromTheBootstrapFile(t *testing.T) {
	token := newToken(t, "tok-resume", time.Hour)
	dataDir := t.TempDir()
	// What register writes before its first request, as a crash would leave it.
	b := agent.Bootstrap{Server: cfg.Host, CAChecksum: caChecksum, Token: token, RegistrationNamespace: agentv1.DefaultRegistrationNamespace, HostName: "resumed-host"}
	if err := agent.DataDir(dataDir).SaveBootstrap(&b); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, "register", "--data-dir", dataDir)
	if r.code != 0 || !strings.Contains(r.stdout, "resuming the registration of host resumed-host") || !strings.Contains(r.stdout, "registered as host resumed-host") {
		t.Fatalf("resumed register: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "bootstrap.json")); !os.IsNotExist(err) {
		t.Errorf("bootstrap.json left behind: %v", err)
	}
	// With neither a token nor a bootstrap file, register says what it needs.
	r = runAgent(t, "register", "--data-dir", t.TempDir())
	if r.code != agent.ExitUsage || !strings.Contains(r.stderr, "no registration token") {
		t.Errorf("register without a token: %s", r)
	}
}

func TestOnlyAnImportTokenCanCreateARegistration(t *testing.T) {
	newToken(t, "tok-admin", time.Hour)
	reg := &agentv1.HostRegistration{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.DefaultRegistrationNamespace, Name: "tok-admin"},
		Spec:       agentv1.HostRegistrationSpec{HostName: "admin-made"},
	}
	err := admin.Create(context.Background(), reg)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:provisioner-registration:tok-admin") {
		t.Fatalf("a registration by the admin: %v, want Forbidden naming the import ServiceAccount", err)
	}
}

func TestExpiredTokenIsRefused(t *testing.T) {
	// 3 s, not 1: the expiry counts from creationTimestamp, which has whole seconds, so a
	// 1 s token could expire (and its Secret go) before newToken read it on a loaded machine.
	token := newToken(t, "tok-expired", 3*time.Second)
	ctx := context.Background()
	eventually(t, 15*time.Second, "token expired", func() (bool, string) {
		var tok agentv1.RegistrationToken
		if err := admin.Get(ctx, client.ObjectKey{Namespace: agentv1.DefaultRegistrationNamespace, Name: "tok-expired"}, &tok); err != nil {
			return false, err.Error()
		}
		return tok.Status.Phase == agentv1.TokenExpired, string(tok.Status.Phase)
	})
	r := runAgent(t, "register", "--server", cfg.Host, "--ca-checksum", caChecksum, "--token", token, "--host-name", "late-host", "--data-dir", t.TempDir())
	if r.code != agent.ExitCredentialRefused || !strings.Contains(r.stderr, "refused") {
		t.Fatalf("expired token: %s; want exit %d", r, agent.ExitCredentialRefused)
	}
}

func TestWrongCAChecksumIsNotTrusted(t *testing.T) {
	token := newToken(t, "tok-mitm", time.Hour)
	wrong := strings.Repeat("ab", 32)
	r := runAgent(t, "register", "--server", cfg.Host, "--ca-checksum", wrong, "--token", token, "--host-name", "mitm-host", "--data-dir", t.TempDir())
	if r.code != agent.ExitCredentialRefused || !strings.Contains(r.stderr, "not trusting it") {
		t.Fatalf("wrong checksum: %s", r)
	}
	// Nothing was sent with the token: it is still unused.
	var tok agentv1.RegistrationToken
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: agentv1.DefaultRegistrationNamespace, Name: "tok-mitm"}, &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Status.Phase != agentv1.TokenReady {
		t.Errorf("token phase %s after a refused CA, want Ready", tok.Status.Phase)
	}
}

func TestDeletedHostLosesItsCredential(t *testing.T) {
	ctx := context.Background()
	dataDir := registerHost(t, "doomed-host")
	agentProc := startAgent(t, dataDir, filepath.Join(t.TempDir(), "plan.lock"))
	eventually(t, 10*time.Second, "first heartbeat", func() (bool, string) {
		var host agentv1.Host
		if err := admin.Get(ctx, client.ObjectKey{Name: "doomed-host"}, &host); err != nil {
			return false, err.Error()
		}
		return host.Status.LastHeartbeatTime != nil && host.Status.AgentVersion != "", "no heartbeat"
	})

	if err := admin.Delete(ctx, &agentv1.Host{ObjectMeta: metav1ObjectMeta("doomed-host")}); err != nil {
		t.Fatal(err)
	}
	if code := agentProc.exitCode(t, 20*time.Second); code != agent.ExitCredentialRefused {
		t.Fatalf("agent exit %d after its Host was deleted, want %d\n%s", code, agent.ExitCredentialRefused, agentProc.stderr)
	}
	if !strings.Contains(agentProc.stderr.String(), "credential revoked") {
		t.Errorf("the agent did not say its credential was revoked:\n%s", agentProc.stderr)
	}
	// The token itself is dead, not just the agent (once the API server's 10 s cache of
	// authenticated tokens has forgotten it).
	agentToken, _ := os.ReadFile(filepath.Join(dataDir, "token"))
	asAgent := clientWithToken(t, string(agentToken))
	eventually(t, 20*time.Second, "the deleted host's token is refused", func() (bool, string) {
		var plans agentv1.NodePlanList
		err := asAgent.List(ctx, &plans, client.InNamespace("host-doomed-host"))
		return apierrors.IsUnauthorized(err), fmt.Sprint(err)
	})
	// And a restart says so too, without trying to register.
	r := runAgent(t, "run", "--data-dir", dataDir, "--lock-file", filepath.Join(t.TempDir(), "plan.lock"))
	if r.code != agent.ExitCredentialRefused || !strings.Contains(r.stderr, "credential revoked") {
		t.Errorf("restart after revocation: %s", r)
	}
}

func clientWithToken(t *testing.T, token string) client.Client {
	t.Helper()
	c, err := client.New(&rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}}, client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A registered agent may GET through the API server's proxy to the node-artifacts Service
// and to nothing else; the grant goes with its Host.
func TestAgentMayProxyOnlyToTheNodeArtifactsService(t *testing.T) {
	ctx := context.Background()
	ns := agentv1.NodeArtifactsNamespace
	for _, name := range []string{agentv1.NodeArtifactsService, "other-service"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if err := admin.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dataDir := registerHost(t, "artifacts-host")
	agentToken, _ := os.ReadFile(filepath.Join(dataDir, "token"))
	httpClient, err := rest.HTTPClientFor(&rest.Config{Host: cfg.Host, BearerToken: string(agentToken), TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	status := func(path string) int {
		resp, err := httpClient.Get(cfg.Host + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	artifact := "/api/v1/namespaces/" + ns + "/services/" + agentv1.NodeArtifactsService + "/proxy/node/bin/kubelet"
	// Authorized: the proxy itself answers (no pods behind the Service here: 503), not RBAC (403).
	if got := status(artifact); got == http.StatusForbidden || got == http.StatusUnauthorized {
		t.Errorf("GET %s as the agent: HTTP %d, want past authorization", artifact, got)
	}
	for _, path := range []string{
		"/api/v1/namespaces/" + ns + "/services/other-service/proxy/",
		"/api/v1/namespaces/" + ns + "/services/" + agentv1.NodeArtifactsService + ":80/proxy/node/bin/kubelet",
		"/api/v1/namespaces/" + ns + "/services/" + agentv1.NodeArtifactsService,
		"/api/v1/namespaces/" + ns + "/configmaps",
		"/api/v1/namespaces/default/services/kubernetes/proxy/",
	} {
		if got := status(path); got != http.StatusForbidden {
			t.Errorf("GET %s as the agent: HTTP %d, want 403", path, got)
		}
	}

	if err := admin.Delete(ctx, &agentv1.Host{ObjectMeta: metav1ObjectMeta("artifacts-host")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the deleted host's node-artifacts Role and RoleBinding removed", func() (bool, string) {
		key := client.ObjectKey{Namespace: ns, Name: agentv1.NodeArtifactsRoleName("artifacts-host")}
		if err := admin.Get(ctx, key, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprint("rolebinding: ", err)
		}
		if err := admin.Get(ctx, key, &rbacv1.Role{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprint("role: ", err)
		}
		return true, ""
	})
}
