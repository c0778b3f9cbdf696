package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
)

func ipamNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

func newClaim(ns, name, pool string) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ipamv1.IPAddressClaimSpec{ClusterName: "c1", PoolRef: ipamv1.IPPoolReference{
			APIGroup: poolv1.GroupVersion.Group, Kind: poolv1.Kind, Name: pool,
		}},
	}
}

// readyOf waits until the claim's Ready condition has reason, and returns the claim.
func readyOf(t *testing.T, ns, name, reason string, timeout time.Duration) *ipamv1.IPAddressClaim {
	t.Helper()
	got := &ipamv1.IPAddressClaim{}
	eventually(t, timeout, fmt.Sprintf("claim %s Ready reason %s", name, reason), func() (bool, string) {
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, clusterv1.ReadyCondition)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason, fmt.Sprintf("%s %s: %s (addressRef %q)", c.Status, c.Reason, c.Message, got.Status.AddressRef.Name)
	})
	return got
}

func addressOf(t *testing.T, claim *ipamv1.IPAddressClaim) *ipamv1.IPAddress {
	t.Helper()
	address := &ipamv1.IPAddress{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: claim.Namespace, Name: claim.Status.AddressRef.Name}, address); err != nil {
		t.Fatalf("claim %s's address %q: %v", claim.Name, claim.Status.AddressRef.Name, err)
	}
	return address
}

func TestAddressPoolIsValidated(t *testing.T) {
	ns := ipamNamespace(t, "ipam-validation")
	for _, tc := range []struct {
		name  string
		spec  poolv1.AddressPoolSpec
		field string
		want  string
	}{
		{"bad-entry", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.5", "10.0.0.300"}, Prefix: 24}, "spec.addresses[1]", "not an IPv4 address"},
		{"backwards", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.9-10.0.0.3"}, Prefix: 24}, "spec.addresses[0]", "ends before it starts"},
		{"host-bits", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.5/28"}, Prefix: 24}, "spec.addresses[0]", "host bits"},
		{"outside", poolv1.AddressPoolSpec{Addresses: []string{"10.0.1.5"}, Prefix: 24, Gateway: "10.0.0.1"}, "spec.addresses[0]", "outside 10.0.0.0/24"},
		{"bad-gateway", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.5"}, Prefix: 24, Gateway: "gw"}, "spec.gateway", "not an IPv4 address"},
		{"only-gateway", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 24, Gateway: "10.0.0.1"}, "spec.addresses", "no address besides the gateway"},
		{"too-big", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.0/8"}, Prefix: 8}, "spec.addresses", "must have at most 65536"},
		{"prefix", poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.5"}, Prefix: 33}, "spec.prefix", "less than or equal to 32"},
	} {
		pool := &poolv1.AddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: tc.spec}
		err := admin.Create(context.Background(), pool)
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal naming %s (%s)", tc.name, err, tc.field, tc.want)
		}
	}
	ok := &poolv1.AddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"},
		Spec: poolv1.AddressPoolSpec{Addresses: []string{"10.0.0.0/29", "10.0.0.20-10.0.0.21", "10.0.0.30"}, Prefix: 24, Gateway: "10.0.0.1"}}
	if err := admin.Create(context.Background(), ok); err != nil {
		t.Fatalf("a valid pool was refused: %v", err)
	}
}

// Two addresses (the gateway is in the range and never handed out), three claims: two get
// an address each, the third reports PoolExhausted until a claim is deleted, whose address
// it then gets; a deleted claim leaves no IPAddress.
func TestAddressPoolAllocatesReleasesAndReportsExhaustion(t *testing.T) {
	ctx := context.Background()
	ns := ipamNamespace(t, "ipam-alloc")
	pool := &poolv1.AddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodes"},
		Spec: poolv1.AddressPoolSpec{Addresses: []string{"192.0.2.1-192.0.2.3"}, Prefix: 24, Gateway: "192.0.2.1"}}
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// A claim of another provider's pool is left alone: no finalizer, no condition.
	foreign := newClaim(ns, "foreign", "nodes")
	foreign.Spec.PoolRef.APIGroup = "ipam.cluster.x-k8s.io"
	foreign.Spec.PoolRef.Kind = "InClusterIPPool"
	for _, c := range []*ipamv1.IPAddressClaim{newClaim(ns, "a", "nodes"), newClaim(ns, "b", "nodes"), foreign} {
		if err := admin.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	a := readyOf(t, ns, "a", poolv1.ReasonAllocated, 20*time.Second)
	b := readyOf(t, ns, "b", poolv1.ReasonAllocated, 20*time.Second)
	got := map[string]string{}
	for _, c := range []*ipamv1.IPAddressClaim{a, b} {
		address := addressOf(t, c)
		got[c.Name] = address.Spec.Address
		if ptr.Deref(address.Spec.Prefix, 0) != 24 || address.Spec.Gateway != "192.0.2.1" || address.Spec.ClaimRef.Name != c.Name ||
			address.Spec.PoolRef.Name != "nodes" || address.Labels[clusterv1.ClusterNameLabel] != "c1" {
			t.Errorf("claim %s's IPAddress: %+v labels %v", c.Name, address.Spec, address.Labels)
		}
		if !strings.Contains(meta.FindStatusCondition(c.Status.Conditions, clusterv1.ReadyCondition).Message, address.Spec.Address+"/24") {
			t.Errorf("claim %s's Ready message does not name its address: %+v", c.Name, c.Status.Conditions)
		}
	}
	if got["a"] == got["b"] || got["a"] == "192.0.2.1" || got["b"] == "192.0.2.1" {
		t.Fatalf("addresses %v: want 192.0.2.2 and 192.0.2.3, distinct, never the gateway", got)
	}

	if err := admin.Create(ctx, newClaim(ns, "c", "nodes")); err != nil {
		t.Fatal(err)
	}
	c := readyOf(t, ns, "c", ipamv1.IPAddressClaimReadyPoolExhaustedReason, 20*time.Second)
	cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ReadyCondition)
	if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "AddressPool ipam-alloc/nodes is exhausted: all 2") || c.Status.AddressRef.Name != "" {
		t.Errorf("exhausted claim: %+v, addressRef %q", cond, c.Status.AddressRef.Name)
	}
	eventually(t, 10*time.Second, "pool status 2 of 2 allocated", func() (bool, string) {
		var p poolv1.AddressPool
		_ = admin.Get(ctx, client.ObjectKeyFromObject(pool), &p)
		return p.Status == poolv1.AddressPoolStatus{Total: 2, Allocated: 2, Free: 0}, fmt.Sprintf("%+v", p.Status)
	})

	// Release: the deleted claim's IPAddress goes with it, and the waiting claim gets the address.
	if err := admin.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "claim a and its IPAddress gone", func() (bool, string) {
		errClaim := admin.Get(ctx, client.ObjectKeyFromObject(a), &ipamv1.IPAddressClaim{})
		errAddr := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &ipamv1.IPAddress{})
		return apierrors.IsNotFound(errClaim) && apierrors.IsNotFound(errAddr), fmt.Sprintf("claim: %v, address: %v", errClaim, errAddr)
	})
	c = readyOf(t, ns, "c", poolv1.ReasonAllocated, poolv1ExhaustedWait)
	if address := addressOf(t, c); address.Spec.Address != got["a"] {
		t.Errorf("claim c got %s, want the released %s", address.Spec.Address, got["a"])
	}

	var f ipamv1.IPAddressClaim
	if err := admin.Get(ctx, client.ObjectKeyFromObject(foreign), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Finalizers) != 0 || len(f.Status.Conditions) != 0 {
		t.Errorf("another provider's claim was touched: finalizers %v, conditions %+v", f.Finalizers, f.Status.Conditions)
	}
}

// poolv1ExhaustedWait: a released address reaches a waiting claim through the pool's
// status change (or, at the latest, the controller's retry).
const poolv1ExhaustedWait = 30 * time.Second

// A claim that names a pool which does not exist yet says so, and gets an address once the pool is created.
func TestAddressClaimWaitsForItsPool(t *testing.T) {
	ctx := context.Background()
	ns := ipamNamespace(t, "ipam-late")
	if err := admin.Create(ctx, newClaim(ns, "early", "later")); err != nil {
		t.Fatal(err)
	}
	readyOf(t, ns, "early", poolv1.ReasonPoolNotFound, 20*time.Second)
	pool := &poolv1.AddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
		Spec: poolv1.AddressPoolSpec{Addresses: []string{"198.51.100.8/30"}, Prefix: 30}}
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	claim := readyOf(t, ns, "early", poolv1.ReasonAllocated, 20*time.Second)
	if address := addressOf(t, claim); address.Spec.Address != "198.51.100.9" {
		t.Errorf("first address of 198.51.100.8/30 (network and broadcast excluded): got %s, want 198.51.100.9", address.Spec.Address)
	}
}

// A claim whose owner is gone is deleted and its address released, as the garbage collector
// would (the local control plane runs none; CAPV removes its finalizer and leaves the claim).
func TestAddressClaimGoesWithItsOwner(t *testing.T) {
	ctx := context.Background()
	ns := ipamNamespace(t, "ipam-owner")
	pool := &poolv1.AddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: poolv1.AddressPoolSpec{Addresses: []string{"203.0.113.5"}, Prefix: 24}}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm"}}
	for _, o := range []client.Object{pool, owner} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	claim := newClaim(ns, "vm-0-0", "p")
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	readyOf(t, ns, "vm-0-0", poolv1.ReasonAllocated, 20*time.Second)
	// The owner still exists: the claim stays through a few owner checks.
	time.Sleep(5 * time.Second)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{}); err != nil {
		t.Fatalf("the claim went while its owner exists: %v", err)
	}
	if err := admin.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the claim and its IPAddress gone with the owner", func() (bool, string) {
		errClaim := admin.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{})
		errAddr := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm-0-0"}, &ipamv1.IPAddress{})
		return apierrors.IsNotFound(errClaim) && apierrors.IsNotFound(errAddr), fmt.Sprintf("claim: %v, address: %v", errClaim, errAddr)
	})
	eventually(t, 10*time.Second, "the address free again", func() (bool, string) {
		var p poolv1.AddressPool
		_ = admin.Get(ctx, client.ObjectKeyFromObject(pool), &p)
		return p.Status.Free == 1, fmt.Sprintf("%+v", p.Status)
	})
}
