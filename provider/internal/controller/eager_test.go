package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// TestTokensAreIssuedBeforeTheRestOfTheCacheHasListed: the manager's cache holds an informer
// that never lists (its user may not list Deployments), so every controller watching a kind
// source waits; the RegistrationToken controller issues a token all the same.
func TestTokensAreIssuedBeforeTheRestOfTheCacheHasListed(t *testing.T) {
	env, cfg := startEnv(t)
	scheme, admin := agentScheme(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Everything the token path needs, nothing of the apps group.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "registration-path"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"", rbacv1.GroupName, agentv1.GroupVersion.Group, "events.k8s.io", "coordination.k8s.io"},
			Resources: []string{"*"},
			Verbs:     []string{"*"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "registration-path"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "registration-path"}},
	}
	for _, obj := range []client.Object{role, binding, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "registration"}}} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	user, err := env.AddUser(envtest.User{Name: "registration-path"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr := testManager(t, user.Config(), scheme)
	if err := (&RegistrationTokenReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	nothing := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	if err := ctrl.NewControllerManagedBy(mgr).For(&appsv1.Deployment{}).Named("never-listed").Complete(nothing); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	token := &agentv1.RegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "registration", Name: "hosts-1"}}
	if err := admin.Create(ctx, token); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for token.Status.Phase != agentv1.TokenReady {
		if time.Now().After(deadline) {
			t.Fatalf("token not issued within 30 s (phase %q) while the manager's cache waited for Deployments", token.Status.Phase)
		}
		time.Sleep(100 * time.Millisecond)
		if err := admin.Get(ctx, client.ObjectKeyFromObject(token), token); err != nil {
			t.Fatal(err)
		}
	}
	// The premise: the cache had not listed everything when the token was issued.
	deployments, err := mgr.GetCache().GetInformer(ctx, &appsv1.Deployment{}, cache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if deployments.HasSynced() {
		t.Fatal("the Deployment informer synced: the test shows nothing")
	}
}
