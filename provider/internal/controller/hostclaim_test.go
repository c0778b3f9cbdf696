package controller

import (
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

func host(name, address string, roles []string, lbls map[string]string) agentv1.Host {
	h := agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Spec: agentv1.HostSpec{Address: address, Roles: roles}}
	h.Status.PlanNamespace = agentv1.PlanNamespace(name)
	apimeta.SetStatusCondition(&h.Status.Conditions, metav1.Condition{Type: agentv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Granted"})
	return h
}

func names(hosts []*agentv1.Host) string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return strings.Join(out, ",")
}

func TestClaimableOrderAndFilters(t *testing.T) {
	unregistered := host("u", "10.0.0.9", nil, nil)
	unregistered.Status.Conditions = nil
	hosts := []agentv1.Host{
		host("e", "10.0.0.5", nil, nil),
		host("d", "10.0.0.4", []string{"worker"}, nil),
		host("c", "10.0.0.3", []string{"control-plane"}, map[string]string{infrav1.ClaimedByLabel: "ns.other"}),
		host("b", "10.0.0.2", []string{"control-plane"}, map[string]string{"zone": "x"}),
		host("a", "10.0.0.1", nil, map[string]string{infrav1.EndpointOfLabel: "ns.c1"}),
		unregistered,
	}
	all := labels.Everything()
	for name, tc := range map[string]struct {
		req  claimRequest
		want string
	}{
		"worker: by name, no reserved, claimed, control-plane-only or unregistered host": {claimRequest{selector: all, role: "worker", clusterKey: "ns.c1"}, "d,e"},
		"control plane of the reserving cluster: its reserved host first":                {claimRequest{selector: all, role: "control-plane", clusterKey: "ns.c1"}, "a,b,e"},
		"control plane of another cluster: not the reserved host":                        {claimRequest{selector: all, role: "control-plane", clusterKey: "ns.c2"}, "b,e"},
		"control plane: the endpoint's address first":                                    {claimRequest{selector: all, role: "control-plane", clusterKey: "ns.c2", endpointHost: "10.0.0.5"}, "e,b"},
		"selector": {claimRequest{selector: labels.SelectorFromSet(labels.Set{"zone": "x"}), role: "control-plane"}, "b"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := names(claimable(hosts, tc.req)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestClaimKeyFitsALabelValue(t *testing.T) {
	if k := infrav1.ClaimKey("default", "m1"); k != "default.m1" {
		t.Errorf("short key %q", k)
	}
	long := infrav1.ClaimKey("a-namespace-with-a-long-name", "cluster-md-0-abcde-fghij-0123456789-klmno")
	other := infrav1.ClaimKey("a-namespace-with-a-long-name", "cluster-md-0-abcde-fghij-0123456789-klmnp")
	if len(long) > 63 || long == other || !strings.HasPrefix(long, "a-namespace-with-a-long-name.cluster") {
		t.Errorf("long keys %q %q", long, other)
	}
}
