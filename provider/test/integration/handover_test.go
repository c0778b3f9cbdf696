package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
	"provisioner.dev/provider/internal/agent"
)

// server is a second API server with its own agent manager: the target of a pivot.
type server struct {
	cfg        *rest.Config
	admin      client.Client
	caChecksum string
}

func startTarget(t *testing.T) *server {
	t.Helper()
	capiCRDs, err := clusterAPICRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{"../../config/crd"}, capiCRDs...),
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{"../../config/webhook"}},
	}
	cfg2, err := env.Start()
	if err != nil {
		t.Fatalf("start the target API server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		time.Sleep(200 * time.Millisecond) // the manager's informers let go first
		_ = env.Stop()
	})
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = agentv1.AddToScheme(scheme)
	_ = infrav1.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	_ = ipamv1.AddToScheme(scheme)
	_ = poolv1.AddToScheme(scheme)
	admin2, err := client.New(cfg2, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := startManager(ctx, env, cfg2, admin2, scheme); err != nil {
		t.Fatalf("start the target's manager: %v", err)
	}
	block, _ := pem.Decode(cfg2.CAData)
	sum := sha256.Sum256(block.Bytes)
	return &server{cfg: cfg2, admin: admin2, caChecksum: hex.EncodeToString(sum[:])}
}

// moveHost copies a Host as the pivot does: labels, spec and status (the agent group's
// status is not rebuilt by a controller, so the move copies it), plan namespace first.
func moveHost(t *testing.T, to client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	var host agentv1.Host
	if err := admin.Get(ctx, client.ObjectKey{Name: name}, &host); err != nil {
		t.Fatal(err)
	}
	if err := to.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentv1.PlanNamespace(name)}}); err != nil {
		t.Fatal(err)
	}
	moved := &agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: host.Labels}, Spec: host.Spec}
	if err := to.Create(ctx, moved); err != nil {
		t.Fatal(err)
	}
	// The target's Host controller adds its finalizer meanwhile.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := to.Get(ctx, client.ObjectKey{Name: name}, moved); err != nil {
			return err
		}
		moved.Status = host.Status
		return to.Status().Update(ctx, moved)
	}); err != nil {
		t.Fatal(err)
	}
}

// hostToken creates, in c's server, a RegistrationToken confined to host and returns
// its name and import token once Ready.
func hostToken(t *testing.T, c client.Client, name, host string) string {
	t.Helper()
	ctx := context.Background()
	tok := &agentv1.RegistrationToken{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.DefaultRegistrationNamespace, Name: name},
		Spec:       agentv1.RegistrationTokenSpec{TTL: &metav1.Duration{Duration: time.Hour}, HostName: host},
	}
	if err := c.Create(ctx, tok); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "token "+name+" ready", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tok), tok); err != nil {
			return false, err.Error()
		}
		return tok.Status.Phase == agentv1.TokenReady, string(tok.Status.Phase)
	})
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: tok.Namespace, Name: tok.Status.SecretName}, &secret); err != nil {
		t.Fatal(err)
	}
	return string(secret.Data["token"])
}

// asToken is a client of cfg's server that authenticates with a bearer token only.
func asToken(t *testing.T, cfg *rest.Config, token string) client.Client {
	t.Helper()
	c, err := client.New(&rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}}, client.Options{Scheme: agent.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readCredential(t *testing.T, dataDir string) (agent.Credential, string) {
	t.Helper()
	var cred agent.Credential
	raw, err := os.ReadFile(filepath.Join(dataDir, "credential.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cred); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return cred, strings.TrimSpace(string(token))
}

// TestAgentFollowsItsHostToAnotherManager is a pivot's hand-over, both sides real: a
// registered host's agent runs against the source; its Host moves to a second API
// server whose manager issues a token confined to that host; the source publishes the
// hand-over to the agent in its plan namespace. The agent registers with the target as
// the same host, switches its credential, reports there, and runs a plan applied there;
// the source's revocation makes its old credential useless.
func TestAgentFollowsItsHostToAnotherManager(t *testing.T) {
	ctx := context.Background()
	target := startTarget(t)
	n := startNode(t, "moving-host")
	_, oldToken := readCredential(t, n.dataDir)
	eventually(t, 20*time.Second, "first heartbeat at the source", func() (bool, string) {
		var h agentv1.Host
		if err := admin.Get(ctx, client.ObjectKey{Name: n.host}, &h); err != nil {
			return false, err.Error()
		}
		return h.Status.LastHeartbeatTime != nil, "no heartbeat"
	})
	if err := admin.Patch(ctx, &agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: n.host}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"infrastructure.provisioner.dev/claimed-by":"default.m-0"}}}`))); err != nil {
		t.Fatal(err)
	}
	moveHost(t, target.admin, n.host)

	// A token of the target confined to another host registers nothing for this one.
	wrong := hostToken(t, target.admin, "follow-wrong", "another-host")
	if r := runAgent(t, "register", "--server", target.cfg.Host, "--ca-checksum", target.caChecksum, "--token", wrong,
		"--host-name", n.host, "--data-dir", t.TempDir()); r.code != agent.ExitCredentialRefused || !strings.Contains(r.stderr, `for host "another-host" only`) {
		t.Fatalf("a token for another host registered %s: %s", n.host, r)
	}

	token := hostToken(t, target.admin, "follow-"+n.host, n.host)
	handover := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(n.host), Name: agentv1.HandoverSecret},
		Data: map[string][]byte{
			"server": []byte(target.cfg.Host), "caChecksum": []byte(target.caChecksum), "token": []byte(token),
			"registrationNamespace": []byte(agentv1.DefaultRegistrationNamespace),
		},
	}
	start := time.Now()
	if err := admin.Create(ctx, handover); err != nil {
		t.Fatal(err)
	}

	var moved agentv1.Host
	eventually(t, 30*time.Second, "the agent reports to the target with its new registration", func() (bool, string) {
		if err := target.admin.Get(ctx, client.ObjectKey{Name: n.host}, &moved); err != nil {
			return false, err.Error()
		}
		s := moved.Status
		// The grant clears the copied heartbeat: one now is the new credential's.
		followed := s.Registration == "follow-"+n.host && s.LastHeartbeatTime != nil
		return followed, fmt.Sprintf("registration %q, registered %v, heartbeat %v", s.Registration, s.RegisteredTime, s.LastHeartbeatTime)
	})
	t.Logf("the agent followed in %s", time.Since(start).Round(time.Millisecond))
	if got := moved.Labels["infrastructure.provisioner.dev/claimed-by"]; got != "default.m-0" {
		t.Errorf("the re-registration changed the Host's claim label: %q", got)
	}
	if c := meta.FindStatusCondition(moved.Status.Conditions, agentv1.ConditionRegistered); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Registered condition at the target: %+v", c)
	}

	cred, newToken := readCredential(t, n.dataDir)
	if cred.Server != target.cfg.Host || cred.Host != n.host || cred.Namespace != agentv1.PlanNamespace(n.host) {
		t.Fatalf("the stored credential is %+v, want host %s at %s", cred, n.host, target.cfg.Host)
	}
	if newToken == oldToken {
		t.Fatal("the token was not replaced")
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, "handover.json")); !os.IsNotExist(err) {
		t.Errorf("the pending hand-over is still on disk: %v", err)
	}
	// The registration at the target is spent: its import credential is gone.
	eventually(t, 10*time.Second, "the target's import ServiceAccount deleted", func() (bool, string) {
		err := target.admin.Get(ctx, client.ObjectKey{Namespace: agentv1.DefaultRegistrationNamespace, Name: "follow-" + n.host}, &corev1.ServiceAccount{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// The new credential is as confined as the first: its own Host, nothing else.
	fresh := asToken(t, target.cfg, newToken)
	if err := fresh.Get(ctx, client.ObjectKey{Name: n.host}, &agentv1.Host{}); err != nil {
		t.Errorf("the new credential cannot read its own Host: %v", err)
	}
	if err := fresh.List(ctx, &agentv1.HostList{}); !apierrors.IsForbidden(err) {
		t.Errorf("the new credential lists Hosts: %v", err)
	}
	if err := fresh.List(ctx, &agentv1.NodePlanList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("the new credential lists plans outside its namespace: %v", err)
	}

	// The source revokes the old credential (what the pivot does once the agent
	// followed): its ServiceAccount goes, and its token is refused.
	old := asToken(t, cfg, oldToken)
	if err := old.Get(ctx, client.ObjectKey{Name: n.host}, &agentv1.Host{}); err != nil {
		t.Fatalf("the old credential already fails before the revocation: %v", err)
	}
	if err := admin.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(n.host), Name: agentv1.AgentServiceAccount}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the old credential refused by the source", func() (bool, string) {
		err := old.Get(ctx, client.ObjectKey{Name: n.host}, &agentv1.Host{})
		return apierrors.IsUnauthorized(err), fmt.Sprint(err)
	})

	// A day-2 plan applied at the target runs on the host.
	out := filepath.Join(t.TempDir(), "day2")
	plan := newPlan(n.host, "day-2", agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{Path: out, Content: ptr.To("after the move\n")}}})
	if err := target.admin.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the day-2 plan Applied at the target", func() (bool, string) {
		got := &agentv1.NodePlan{}
		if err := target.admin.Get(ctx, client.ObjectKeyFromObject(plan), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == agentv1.PhaseApplied, fmt.Sprintf("phase %q: %s", got.Status.Phase, got.Status.Message)
	})
	if b, err := os.ReadFile(out); err != nil || string(b) != "after the move\n" {
		t.Fatalf("the day-2 plan's file: %q, %v", b, err)
	}
	select {
	case <-n.agent.done:
		t.Fatalf("the agent exited: %v\n%s", n.agent.err, n.agent.stderr)
	default:
	}
	if strings.Contains(n.agent.stderr.String(), token) || strings.Contains(n.agent.stderr.String(), newToken) {
		t.Error("the agent logged a token")
	}
}
