package controller

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
)

// +kubebuilder:rbac:groups=ipam.provisioner.dev,resources=addresspools,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.provisioner.dev,resources=addresspools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=*,verbs=get
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;create;delete

// OwnerDeletingRetry is how soon a claim whose owner is being deleted is looked at again.
const OwnerDeletingRetry = 2 * time.Second

// DefaultOwnerCheckInterval is how often a claim with owners is checked for owners that are gone.
const DefaultOwnerCheckInterval = 30 * time.Second

// ExhaustedRetry is how often a claim its pool could not serve is tried again (besides
// every change of the pool and every release of an address of it).
const ExhaustedRetry = 20 * time.Second

// IPAddressClaimReconciler serves Cluster API's IPAM contract for the claims whose
// spec.poolRef names an AddressPool: it creates the claim's IPAddress (named like the
// claim) with the first free address of the pool, sets status.addressRef and the Ready
// condition (PoolExhausted, PoolNotFound when it cannot), and deletes the IPAddress when
// the claim is deleted. A claim whose owners are all gone is deleted, as the garbage
// collector would (the local control plane runs none, and CAPV leaves its claims to it).
// One worker: two claims never pick an address at the same time.
type IPAddressClaimReconciler struct {
	Client client.Client
	// Reader lists the pool's IPAddresses uncached, so an address allocated a moment ago is
	// never handed out twice, and reads claims' owners. Default: Client.
	Reader client.Reader
	// OwnerCheckInterval is how often a claim with owners is checked for owners that are
	// gone. Default: DefaultOwnerCheckInterval.
	OwnerCheckInterval time.Duration
}

func ours(ref ipamv1.IPPoolReference) bool {
	return ref.APIGroup == poolv1.GroupVersion.Group && ref.Kind == poolv1.Kind
}

func (r *IPAddressClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = r.Client
	}
	if r.OwnerCheckInterval == 0 {
		r.OwnerCheckInterval = DefaultOwnerCheckInterval
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			claim, ok := o.(*ipamv1.IPAddressClaim)
			return ok && ours(claim.Spec.PoolRef)
		}))).
		// A pool that appears, grows or frees an address: its claims without one are tried again.
		Watches(&poolv1.AddressPool{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfPool)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("ipaddressclaim").
		Complete(r)
}

func (r *IPAddressClaimReconciler) claimsOfPool(ctx context.Context, o client.Object) []reconcile.Request {
	var claims ipamv1.IPAddressClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range claims.Items {
		if ours(c.Spec.PoolRef) && c.Spec.PoolRef.Name == o.GetName() && c.Status.AddressRef.Name == "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return out
}

func (r *IPAddressClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var claim ipamv1.IPAddressClaim
	if err := r.Client.Get(ctx, req.NamespacedName, &claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ours(claim.Spec.PoolRef) {
		return ctrl.Result{}, nil
	}
	if !claim.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, &claim)
	}
	// The garbage collector's part, which no local control plane runs: a claim whose owners
	// are all gone (CAPV drops its finalizer and leaves the claim to the collector) is deleted.
	gone, ownerDeleting, err := r.ownersGone(ctx, &claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if gone {
		ctrl.LoggerFrom(ctx).Info("deleting the claim: its owners are gone")
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &claim))
	}
	// Owners are looked at again while one is being deleted, and now and then (their deletion is no event of this controller's).
	requeue := ctrl.Result{}
	if ownerDeleting {
		requeue = ctrl.Result{RequeueAfter: OwnerDeletingRetry}
	} else if len(claim.OwnerReferences) > 0 {
		requeue = ctrl.Result{RequeueAfter: r.OwnerCheckInterval}
	}

	if unpatched := claim.DeepCopy(); controllerutil.AddFinalizer(&claim, poolv1.ClaimFinalizer) {
		if err := r.Client.Patch(ctx, &claim, client.MergeFrom(unpatched)); err != nil {
			return ctrl.Result{}, err
		}
	}

	poolKey := client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.PoolRef.Name}
	var pool poolv1.AddressPool
	if err := r.Client.Get(ctx, poolKey, &pool); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return requeue, r.setReady(ctx, &claim, "", metav1.ConditionFalse, poolv1.ReasonPoolNotFound,
			fmt.Sprintf("AddressPool %s does not exist", poolKey))
	}

	// The claim's address, if an earlier reconcile created it.
	var address ipamv1.IPAddress
	err = r.Reader.Get(ctx, req.NamespacedName, &address)
	switch {
	case err == nil:
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	default:
		free, used, err := r.firstFree(ctx, &pool)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !free.IsValid() {
			if err := r.setReady(ctx, &claim, "", metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolExhaustedReason,
				fmt.Sprintf("AddressPool %s is exhausted: all %d of its addresses are allocated", poolKey, used)); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: ExhaustedRetry}, r.updatePoolStatus(ctx, &pool)
		}
		address = ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: claim.Namespace,
				Name:      claim.Name,
				Labels:    map[string]string{poolv1.PoolLabel: pool.Name},
			},
			Spec: ipamv1.IPAddressSpec{
				ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
				PoolRef:  claim.Spec.PoolRef,
				Address:  free.String(),
				Prefix:   ptr.To(pool.Spec.Prefix),
				Gateway:  pool.Spec.Gateway,
			},
		}
		if claim.Spec.ClusterName != "" {
			address.Labels[clusterv1.ClusterNameLabel] = claim.Spec.ClusterName
		}
		// Owned by the claim for tools that read ownership (clusterctl move); deleted by release, not by a garbage collector.
		if err := controllerutil.SetControllerReference(&claim, &address, r.Client.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Create(ctx, &address); err != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("allocated", "address", address.Spec.Address, "pool", poolKey.String())
	}
	if err := r.setReady(ctx, &claim, address.Name, metav1.ConditionTrue, poolv1.ReasonAllocated,
		fmt.Sprintf("%s/%d from AddressPool %s", address.Spec.Address, ptr.Deref(address.Spec.Prefix, 0), poolKey)); err != nil {
		return ctrl.Result{}, err
	}
	return requeue, r.updatePoolStatus(ctx, &pool)
}

// ownersGone says whether the claim has owners and none of them exists any more (by UID),
// and whether one that exists is being deleted.
func (r *IPAddressClaimReconciler) ownersGone(ctx context.Context, claim *ipamv1.IPAddressClaim) (gone, deleting bool, err error) {
	if len(claim.OwnerReferences) == 0 {
		return false, false, nil
	}
	for _, ref := range claim.OwnerReferences {
		owner := &unstructured.Unstructured{}
		owner.SetAPIVersion(ref.APIVersion)
		owner.SetKind(ref.Kind)
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: ref.Name}, owner)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return false, false, err
		case owner.GetUID() != ref.UID:
			continue
		}
		return false, owner.GetDeletionTimestamp() != nil, nil
	}
	return true, false, nil
}

// poolAddresses are the IPAddresses taken from pool (by label), read uncached.
func (r *IPAddressClaimReconciler) poolAddresses(ctx context.Context, pool *poolv1.AddressPool) ([]ipamv1.IPAddress, error) {
	var list ipamv1.IPAddressList
	if err := r.Reader.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingLabels{poolv1.PoolLabel: pool.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// firstFree is the pool's first address no IPAddress holds (invalid when none), and how many it has allocated.
func (r *IPAddressClaimReconciler) firstFree(ctx context.Context, pool *poolv1.AddressPool) (netip.Addr, int, error) {
	taken, err := r.poolAddresses(ctx, pool)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	used := map[string]bool{}
	for _, a := range taken {
		used[a.Spec.Address] = true
	}
	var free netip.Addr
	pool.Spec.Each(func(a netip.Addr) bool {
		if used[a.String()] {
			return true
		}
		free = a
		return false
	})
	return free, len(taken), nil
}

// release deletes the claim's IPAddress (the address is free again) and drops the finalizer.
func (r *IPAddressClaimReconciler) release(ctx context.Context, claim *ipamv1.IPAddressClaim) error {
	if !controllerutil.ContainsFinalizer(claim, poolv1.ClaimFinalizer) {
		return nil
	}
	var address ipamv1.IPAddress
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(claim), &address)
	if err == nil && address.Spec.ClaimRef.Name == claim.Name {
		if err := r.Client.Delete(ctx, &address); client.IgnoreNotFound(err) != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("released", "address", address.Spec.Address)
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	unpatched := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, poolv1.ClaimFinalizer)
	if err := r.Client.Patch(ctx, claim, client.MergeFrom(unpatched)); client.IgnoreNotFound(err) != nil {
		return err
	}
	var pool poolv1.AddressPool
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.PoolRef.Name}, &pool); err != nil {
		return client.IgnoreNotFound(err)
	}
	return r.updatePoolStatus(ctx, &pool)
}

// setReady writes the claim's addressRef and its Ready condition (the v1beta2 condition and
// the deprecated v1beta1 one, which providers still aggregate).
func (r *IPAddressClaimReconciler) setReady(ctx context.Context, claim *ipamv1.IPAddressClaim, address string, status metav1.ConditionStatus, reason, message string) error {
	unpatched := claim.DeepCopy()
	claim.Status.AddressRef.Name = address
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type: clusterv1.ReadyCondition, Status: status, Reason: reason, Message: message, ObservedGeneration: claim.Generation,
	})
	//lint:ignore SA1019 providers built on v1beta1 conditions (CAPV v1.16) still read a claim's deprecated Ready condition
	v1beta1 := clusterv1.Condition{Type: clusterv1.ReadyCondition, Status: corev1.ConditionStatus(status), LastTransitionTime: metav1.Now()}
	if status != metav1.ConditionTrue {
		v1beta1.Reason, v1beta1.Message, v1beta1.Severity = reason, message, clusterv1.ConditionSeverityWarning
	}
	if claim.Status.Deprecated == nil {
		claim.Status.Deprecated = &ipamv1.IPAddressClaimDeprecatedStatus{}
	}
	if claim.Status.Deprecated.V1Beta1 == nil {
		claim.Status.Deprecated.V1Beta1 = &ipamv1.IPAddressClaimV1Beta1DeprecatedStatus{}
	}
	//lint:ignore SA1019 providers built on v1beta1 conditions (CAPV v1.16) still read a claim's deprecated Ready condition
	conds := claim.Status.Deprecated.V1Beta1.Conditions
	replaced := false
	for i := range conds {
		if conds[i].Type == v1beta1.Type {
			if conds[i].Status == v1beta1.Status {
				v1beta1.LastTransitionTime = conds[i].LastTransitionTime
			}
			conds[i], replaced = v1beta1, true
		}
	}
	if !replaced {
		conds = append(conds, v1beta1)
	}
	//lint:ignore SA1019 providers built on v1beta1 conditions (CAPV v1.16) still read a claim's deprecated Ready condition
	claim.Status.Deprecated.V1Beta1.Conditions = conds
	return r.Client.Status().Patch(ctx, claim, client.MergeFrom(unpatched))
}

// updatePoolStatus counts the pool's addresses and those bound to claims.
func (r *IPAddressClaimReconciler) updatePoolStatus(ctx context.Context, pool *poolv1.AddressPool) error {
	taken, err := r.poolAddresses(ctx, pool)
	if err != nil {
		return err
	}
	unpatched := pool.DeepCopy()
	total := int32(pool.Spec.Count())
	pool.Status = poolv1.AddressPoolStatus{Total: total, Allocated: int32(len(taken)), Free: max(total-int32(len(taken)), 0)}
	if pool.Status == unpatched.Status {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, pool, client.MergeFrom(unpatched)))
}
