package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// eagerSource is the only source of a controller on the registration path (tokens, then
// grants): an informer on obj, asked for at set-up so that it starts with the manager's
// cache, watched without waiting for the rest of that cache. A controller watching a kind
// source starts only once every informer of the cache has listed, which at a control
// plane's start is some 25 Cluster API kinds whose storage the API server builds one at a
// time (1.5 s on two cores), and `create cluster` prints no registration command before
// this provider has issued the tokens. Reads in the reconcilers still wait for their own
// kind's informer (the cache's reader does).
func eagerSource(mgr ctrl.Manager, obj client.Object) (source.Source, error) {
	// Not blocking: before the manager starts, the context is not used.
	informer, err := mgr.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	return &source.Informer{Informer: informer, Handler: &handler.EnqueueRequestForObject{}}, nil
}
