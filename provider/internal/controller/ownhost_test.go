package controller

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// liveReads counts the live lists; it answers none, as an API server that is not reached.
type liveReads struct {
	client.Reader
	lists int
}

func (l *liveReads) List(context.Context, client.ObjectList, ...client.ListOption) error {
	l.lists++
	return errors.New("live list")
}

func TestOwnHostReadsTheClaimedHostFromTheCacheAndLiveOtherwise(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := agentv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const key = "ns.m1"
	claimed := host("h1", "198.18.0.11", nil, map[string]string{infrav1.ClaimedByLabel: key})
	other := host("h2", "198.18.0.12", nil, map[string]string{infrav1.ClaimedByLabel: "ns.m2"})
	cached := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&claimed, &other).Build()

	for name, tc := range map[string]struct {
		hostRef   string
		wantHost  string
		wantLists int
	}{
		"status names the claimed Host: from the cache, no live list": {hostRef: "h1", wantHost: "h1", wantLists: 0},
		"no claim in status yet: the live list":                       {hostRef: "", wantLists: 1},
		"status names a Host without this claim: the live list":       {hostRef: "h2", wantLists: 1},
		"status names a Host the cache does not have: the live list":  {hostRef: "gone", wantLists: 1},
	} {
		t.Run(name, func(t *testing.T) {
			reader := &liveReads{}
			r := &HostMachineReconciler{Client: cached, Reader: reader}
			hm := &infrav1.HostMachine{}
			hm.Namespace, hm.Name = "ns", "m1"
			if tc.hostRef != "" {
				hm.Status.HostRef = &infrav1.HostReference{Name: tc.hostRef}
			}
			got, err := r.ownHost(context.Background(), hm, key)
			if reader.lists != tc.wantLists {
				t.Errorf("live lists: got %d, want %d", reader.lists, tc.wantLists)
			}
			if tc.wantHost == "" {
				if err == nil {
					t.Errorf("got host %v, want the live list's error", got)
				}
				return
			}
			if err != nil || got == nil || got.Name != tc.wantHost {
				t.Errorf("got %v, %v; want host %s", got, err, tc.wantHost)
			}
		})
	}
}
