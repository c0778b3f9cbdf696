package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// registrationConcurrency is how many RegistrationTokens, and how many HostRegistrations, are
// reconciled at once.
const registrationConcurrency = 10

// completeEager adds r as the controller name of a kind on the registration path (tokens,
// then grants), watching obj through an informer asked for at set-up so that it starts with
// the manager's cache, without waiting for the rest of that cache. A controller watching a kind
// source starts only once every informer of the cache has listed, which at a control
// plane's start is some 25 Cluster API kinds whose storage the API server builds one at a
// time (1.5 s on two cores), and `create cluster` prints no registration command before
// this provider has issued the tokens. Reads in the reconcilers still wait for their own
// kind's informer (the cache's reader does). Up to registrationConcurrency objects are
// reconciled at once: each token and each grant is its own set of objects, and hosts
// registering together should not wait for each other's round trips.
func completeEager(mgr ctrl.Manager, name string, obj client.Object, r reconcile.Reconciler) error {
	// Not blocking: before the manager starts, the context is not used.
	informer, err := mgr.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).
		WithOptions(controller.Options{MaxConcurrentReconciles: registrationConcurrency}).
		WatchesRawSource(&source.Informer{Informer: informer, Handler: &handler.EnqueueRequestForObject{}}).
		Complete(r)
}
