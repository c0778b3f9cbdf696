package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// HostReconciler revokes a deleted Host's agent credential: it deletes the agent's
// ServiceAccount (which invalidates every token issued for it) and its RBAC, then lets
// the Host go. The plan namespace and its NodePlans stay: no namespace controller runs
// here to finalize a namespace, and a host registered again under the same name finds
// its plans' history.
type HostReconciler struct {
	Client client.Client
}

func (r *HostReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&agentv1.Host{}).Named("host").Complete(r)
}

func (r *HostReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var host agentv1.Host
	if err := r.Client.Get(ctx, req.NamespacedName, &host); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if host.DeletionTimestamp.IsZero() {
		if controllerutil.AddFinalizer(&host, agentv1.HostFinalizer) {
			return ctrl.Result{}, r.Client.Update(ctx, &host)
		}
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(&host, agentv1.HostFinalizer) {
		return ctrl.Result{}, nil
	}

	namespace := agentv1.PlanNamespace(host.Name)
	agent := metav1.ObjectMeta{Namespace: namespace, Name: agentv1.AgentServiceAccount}
	hostRole := metav1.ObjectMeta{Name: agentv1.HostClusterRoleName(host.Name)}
	artifacts := metav1.ObjectMeta{Namespace: agentv1.NodeArtifactsNamespace, Name: agentv1.NodeArtifactsRoleName(host.Name)}
	if err := deleteAll(ctx, r.Client,
		&corev1.ServiceAccount{ObjectMeta: agent},
		&rbacv1.RoleBinding{ObjectMeta: agent},
		&rbacv1.Role{ObjectMeta: agent},
		&rbacv1.ClusterRoleBinding{ObjectMeta: hostRole},
		&rbacv1.ClusterRole{ObjectMeta: hostRole},
		&rbacv1.RoleBinding{ObjectMeta: artifacts},
		&rbacv1.Role{ObjectMeta: artifacts},
	); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(&host, agentv1.HostFinalizer)
	if err := r.Client.Update(ctx, &host); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
