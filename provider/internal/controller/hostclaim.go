package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// claimRequest is what a claim needs to choose a Host.
type claimRequest struct {
	// selector from the HostMachine's spec.hostSelector.
	selector labels.Selector
	// role the Host must allow (Host.spec.roles contains it, or is empty).
	role string
	// clusterKey is ClaimKey of the machine's HostCluster: a Host reserved for it
	// (endpoint-of) is open to a control-plane claim.
	clusterKey string
	// endpointHost, the cluster's control-plane endpoint host: a control-plane claim
	// prefers the Host with that address (the first control plane must be the endpoint).
	endpointHost string
}

// hostRegistered: the manager granted the Host's agent its credential and plan namespace.
func hostRegistered(h *agentv1.Host) bool {
	return h.Status.PlanNamespace != "" && apimeta.IsStatusConditionTrue(h.Status.Conditions, agentv1.ConditionRegistered)
}

// roleAllows: a Host with no roles takes any machine.
func roleAllows(h *agentv1.Host, role string) bool {
	return len(h.Spec.Roles) == 0 || slices.Contains(h.Spec.Roles, role)
}

// claimable lists the Hosts free for req, best first: for a control plane, the Host
// reserved for its cluster's endpoint, then the one with the endpoint's address, then by
// name; for a worker, by name. A Host reserved for a cluster's endpoint is never offered
// to a worker or to another cluster.
func claimable(hosts []agentv1.Host, req claimRequest) []*agentv1.Host {
	var out []*agentv1.Host
	for i := range hosts {
		h := &hosts[i]
		if !h.DeletionTimestamp.IsZero() || !hostRegistered(h) || !roleAllows(h, req.role) || !req.selector.Matches(labels.Set(h.Labels)) {
			continue
		}
		if h.Labels[infrav1.ClaimedByLabel] != "" {
			continue
		}
		if reservedFor := h.Labels[infrav1.EndpointOfLabel]; reservedFor != "" && (req.role != infrav1.RoleControlPlane || reservedFor != req.clusterKey) {
			continue
		}
		out = append(out, h)
	}
	rank := func(h *agentv1.Host) int {
		switch {
		case req.role != infrav1.RoleControlPlane:
			return 2
		case h.Labels[infrav1.EndpointOfLabel] == req.clusterKey:
			return 0
		case req.endpointHost != "" && h.Spec.Address == req.endpointHost:
			return 1
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// claimHost labels the first free Host for the claimant. reader should be uncached: a
// cache that has not seen a claim yet offers a Host that is taken (the Update then
// conflicts, so that is only slower, never wrong). The label is written with an
// Update that carries the Host's resourceVersion, so of two machines that chose the same
// Host only one write succeeds; the other, reading the Host again, finds it taken and tries
// the next (a stale cache entry is just another conflict). Returns nil when no Host is free.
func claimHost(ctx context.Context, c client.Client, reader client.Reader, req claimRequest, claimKey, clusterName string) (*agentv1.Host, error) {
	var hosts agentv1.HostList
	if err := reader.List(ctx, &hosts); err != nil {
		return nil, err
	}
	for _, h := range claimable(hosts.Items, req) {
		claimed, err := labelFreeHost(ctx, c, reader, h, req, map[string]string{infrav1.ClaimedByLabel: claimKey, infrav1.ClusterNameLabel: clusterName})
		if err != nil || claimed != nil {
			return claimed, err
		}
	}
	return nil, nil
}

// errHostTaken ends labelFreeHost's retries: the Host read again is no longer free.
var errHostTaken = errors.New("host taken")

// labelFreeHost adds labels to h with an Update carrying its resourceVersion. A conflict
// says only that the Host changed since it was read: its agent's heartbeat (a status patch,
// every 30 s by default), another controller's label, or another claim. So it is read again
// and, while still free for req, written again (client-go's retry.DefaultRetry: five
// attempts); nil when it is taken (or gone). Moving on to the next Host at the first conflict
// let a heartbeat send a first control plane to a Host other than the one its endpoint names,
// where it never comes up.
func labelFreeHost(ctx context.Context, c client.Client, reader client.Reader, h *agentv1.Host, req claimRequest, add map[string]string) (*agentv1.Host, error) {
	var labelled *agentv1.Host
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if labelled != nil { // the write before conflicted
			fresh := &agentv1.Host{}
			if err := reader.Get(ctx, client.ObjectKeyFromObject(h), fresh); err != nil {
				return err
			}
			if len(claimable([]agentv1.Host{*fresh}, req)) == 0 {
				return errHostTaken
			}
			h = fresh
		}
		labelled = h.DeepCopy()
		if labelled.Labels == nil {
			labelled.Labels = map[string]string{}
		}
		maps.Copy(labelled.Labels, add)
		return c.Update(ctx, labelled)
	})
	switch {
	case err == nil:
		return labelled, nil
	case errors.Is(err, errHostTaken) || isConflictOrGone(err):
		return nil, nil
	}
	return nil, err
}

// hostsLabelled lists the Hosts whose label key has value.
func hostsLabelled(ctx context.Context, c client.Reader, key, value string) ([]agentv1.Host, error) {
	var hosts agentv1.HostList
	if err := c.List(ctx, &hosts, client.MatchingLabels{key: value}); err != nil {
		return nil, err
	}
	return hosts.Items, nil
}

// removeLabels removes keys from a Host (an Update with its resourceVersion: a
// concurrent change is a conflict, retried by the caller's requeue).
func removeLabels(ctx context.Context, c client.Client, h *agentv1.Host, keys ...string) error {
	changed := false
	for _, k := range keys {
		if _, ok := h.Labels[k]; ok {
			delete(h.Labels, k)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(c.Update(ctx, h))
}

func selectorOf(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(sel)
}
