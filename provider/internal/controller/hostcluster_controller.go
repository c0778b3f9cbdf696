package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// waitForHostsInterval: how often a HostCluster or HostMachine that waits for a free Host
// looks again (Hosts register at any time; a poll is simpler than mapping every Host
// event to every waiting object, and hosts take seconds to register anyway).
const waitForHostsInterval = 5 * time.Second

// HostClusterReconciler gives a HostCluster its control-plane endpoint: the one in its
// spec, or the address of a free control-plane Host it reserves (KubeadmControlPlane
// creates no Machine before the Cluster has an endpoint, so the endpoint's Host is chosen
// before any HostMachine exists). Provisioned once the endpoint is known.
type HostClusterReconciler struct {
	Client client.Client
	// Reader reads Hosts uncached (the manager's API reader), so a reservation made in
	// the previous reconcile is found. Default: Client.
	Reader client.Reader
}

// +kubebuilder:rbac:groups=infrastructure.provisioner.dev,resources=hostclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.provisioner.dev,resources=hostclusters/status;hostclusters/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=agent.provisioner.dev,resources=hosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch

func (r *HostClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = r.Client
	}
	return ctrl.NewControllerManagedBy(mgr).For(&infrav1.HostCluster{}).Named("hostcluster").Complete(r)
}

func (r *HostClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	hc := &infrav1.HostCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := infrav1.ClaimKey(hc.Namespace, hc.Name)
	patchHelper, err := patch.NewHelper(hc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := patchHelper.Patch(ctx, hc); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !hc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, hc, key)
	}
	if paused, err := isPaused(ctx, r.Client, hc); err != nil || paused {
		return ctrl.Result{}, err
	}
	if finalizerAdded, err := finalizers.EnsureFinalizer(ctx, r.Client, hc, infrav1.HostClusterFinalizer); err != nil || finalizerAdded {
		return ctrl.Result{}, err
	}
	return r.reconcileNormal(ctx, hc, key)
}

// reconcileNormal sets the endpoint (reserving a Host for it when none is given) and,
// once it is set, reports the cluster provisioned.
func (r *HostClusterReconciler) reconcileNormal(ctx context.Context, hc *infrav1.HostCluster, key string) (ctrl.Result, error) {
	var result ctrl.Result
	if !hc.Spec.ControlPlaneEndpoint.IsValid() {
		host, err := r.reserveEndpointHost(ctx, hc, key)
		if err != nil {
			return ctrl.Result{}, err
		}
		if host == nil {
			setCondition(&hc.Status.Conditions, hc.Generation, infrav1.ConditionReady, false, infrav1.ReasonWaitingForHost,
				"no registered, unclaimed Host allows the control-plane role and matches spec.controlPlaneHostSelector yet")
			result.RequeueAfter = waitForHostsInterval
		} else {
			hc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: host.Spec.Address, Port: infrav1.DefaultAPIServerPort}
			hc.Status.EndpointHost = host.Name
		}
	}
	if hc.Spec.ControlPlaneEndpoint.IsValid() {
		hc.Status.Initialization.Provisioned = ptr.To(true)
		setCondition(&hc.Status.Conditions, hc.Generation, infrav1.ConditionReady, true, infrav1.ReasonReady,
			fmt.Sprintf("control-plane endpoint %s:%d", hc.Spec.ControlPlaneEndpoint.Host, hc.Spec.ControlPlaneEndpoint.Port))
	}
	return result, nil
}

// reserveEndpointHost returns the Host reserved for the cluster's endpoint, reserving the
// first free one (by name) when none is yet. The reservation is a label written with the
// Host's resourceVersion (race-safe against machines claiming it), and found again by the
// label after a crash between the reservation and the spec's update.
func (r *HostClusterReconciler) reserveEndpointHost(ctx context.Context, hc *infrav1.HostCluster, key string) (*agentv1.Host, error) {
	reserved, err := hostsLabelled(ctx, r.Reader, infrav1.EndpointOfLabel, key)
	if err != nil || len(reserved) > 0 {
		if len(reserved) > 0 {
			return &reserved[0], nil
		}
		return nil, err
	}
	sel, err := selectorOf(hc.Spec.ControlPlaneHostSelector)
	if err != nil {
		return nil, err
	}
	var hosts agentv1.HostList
	if err := r.Reader.List(ctx, &hosts); err != nil {
		return nil, err
	}
	req := claimRequest{selector: sel, role: infrav1.RoleControlPlane, clusterKey: key}
	for _, h := range claimable(hosts.Items, req) {
		if h.Spec.Address == "" {
			continue
		}
		reserved, err := labelFreeHost(ctx, r.Client, r.Reader, h, req, map[string]string{infrav1.EndpointOfLabel: key})
		if err != nil || reserved != nil {
			return reserved, err
		}
	}
	return nil, nil
}

// reconcileDelete removes the endpoint reservation from the Host, then the finalizer.
func (r *HostClusterReconciler) reconcileDelete(ctx context.Context, hc *infrav1.HostCluster, key string) error {
	if !controllerutil.ContainsFinalizer(hc, infrav1.HostClusterFinalizer) {
		return nil
	}
	reserved, err := hostsLabelled(ctx, r.Reader, infrav1.EndpointOfLabel, key)
	if err != nil {
		return err
	}
	for i := range reserved {
		if err := removeLabels(ctx, r.Client, &reserved[i], infrav1.EndpointOfLabel); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(hc, infrav1.HostClusterFinalizer)
	return nil
}

// isPaused: Cluster API's pause (the cluster.x-k8s.io/paused annotation on the object, or
// spec.paused of the owning Cluster, as clusterctl move and provisioner's pivot set it):
// nothing is changed while an object is being moved.
func isPaused(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	if annotations.HasPaused(obj) {
		return true, nil
	}
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return false, nil
	}
	cluster, err := util.GetClusterByName(ctx, c, obj.GetNamespace(), name)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return annotations.IsPaused(cluster, obj), nil
}

// setCondition sets a condition with the object's generation.
func setCondition(conds *[]metav1.Condition, generation int64, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation})
}

func isConflictOrGone(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}
