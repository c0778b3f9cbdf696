package controller

import (
	"context"
	"sync"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// staleList serves List from a snapshot taken before any claim (what two managers' caches,
// or one cache lagging behind a write, would show) and everything else from the API server.
type staleList struct {
	client.Client
	snapshot agentv1.HostList
}

func (s staleList) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	s.snapshot.DeepCopyInto(list.(*agentv1.HostList))
	return nil
}

// claimEnv starts an API server with the agent kinds, registers hosts there (created, then
// their status as the registration grants it), and returns a client and a list of them taken
// now: what a claimant that listed before any later write holds.
func claimEnv(t *testing.T, hosts ...*agentv1.Host) (client.Client, agentv1.HostList) {
	t.Helper()
	_, cfg := startEnv(t)
	scheme := runtime.NewScheme()
	_ = agentv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, h := range hosts {
		if err := c.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		h.Status.PlanNamespace = agentv1.PlanNamespace(h.Name)
		apimeta.SetStatusCondition(&h.Status.Conditions, metav1.Condition{Type: agentv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Granted"})
		if err := c.Status().Update(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	var snapshot agentv1.HostList
	if err := c.List(ctx, &snapshot); err != nil {
		t.Fatal(err)
	}
	return c, snapshot
}

// TestClaimRaceOneHostTwoClaimants: two claimants that both see the only Host free, at
// once; the API server's resourceVersion check lets exactly one claim it.
func TestClaimRaceOneHostTwoClaimants(t *testing.T) {
	h := &agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: "only"}, Spec: agentv1.HostSpec{Address: "198.18.0.10"}}
	c, snapshot := claimEnv(t, h)
	ctx := context.Background()

	for round := 0; round < 5; round++ {
		if round > 0 { // free the host again, and take a fresh snapshot
			if err := c.Get(ctx, client.ObjectKey{Name: "only"}, h); err != nil {
				t.Fatal(err)
			}
			if err := removeLabels(ctx, c, h, infrav1.ClaimedByLabel, infrav1.ClusterNameLabel); err != nil {
				t.Fatal(err)
			}
			if err := c.List(ctx, &snapshot); err != nil {
				t.Fatal(err)
			}
		}
		stale := staleList{Client: c, snapshot: snapshot}
		req := claimRequest{selector: labels.Everything(), role: infrav1.RoleWorker}
		var wg sync.WaitGroup
		results := make([]*agentv1.Host, 2)
		errs := make([]error, 2)
		for i, key := range []string{"ns.a", "ns.b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = claimHost(ctx, stale, stale, req, key, "c")
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: errors %v %v", round, errs[0], errs[1])
		}
		if (results[0] == nil) == (results[1] == nil) {
			t.Fatalf("round %d: want exactly one claim, got %v and %v", round, results[0] != nil, results[1] != nil)
		}
		winner := "ns.a"
		if results[1] != nil {
			winner = "ns.b"
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "only"}, h); err != nil {
			t.Fatal(err)
		}
		if h.Labels[infrav1.ClaimedByLabel] != winner {
			t.Fatalf("round %d: host claimed by %q, the winner was %s", round, h.Labels[infrav1.ClaimedByLabel], winner)
		}
	}
}

// TestClaimKeepsTheEndpointHostThroughAHeartbeat: the Host a first control plane must take
// (its address is the cluster's endpoint) changed after the claimant listed it, by its
// agent's heartbeat; the claim's Update conflicts, and the claim reads the Host again and
// takes it, where moving on would have put the control plane on a Host the endpoint does not
// name.
func TestClaimKeepsTheEndpointHostThroughAHeartbeat(t *testing.T) {
	c, snapshot := claimEnv(t,
		&agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: "a-endpoint"}, Spec: agentv1.HostSpec{Address: "198.18.0.20", Roles: []string{infrav1.RoleControlPlane}}},
		&agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: "b-other"}, Spec: agentv1.HostSpec{Address: "198.18.0.21", Roles: []string{infrav1.RoleControlPlane}}})
	ctx := context.Background()
	// The heartbeat, after the claimant's list.
	beat := &agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: "a-endpoint"}}
	if err := c.Status().Patch(ctx, beat, client.RawPatch(types.MergePatchType, []byte(`{"status":{"hostname":"a"}}`))); err != nil {
		t.Fatal(err)
	}

	stale := staleList{Client: c, snapshot: snapshot}
	req := claimRequest{selector: labels.Everything(), role: infrav1.RoleControlPlane, endpointHost: "198.18.0.20"}
	claimed, err := claimHost(ctx, stale, stale, req, "ns.cp0", "c")
	if err != nil || claimed == nil {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	if claimed.Name != "a-endpoint" {
		t.Fatalf("the first control plane claimed %s, not the endpoint's Host", claimed.Name)
	}
}
