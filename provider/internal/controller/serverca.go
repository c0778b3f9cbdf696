package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// serverCAReaderRole lets anyone, authenticated or not, read the server-ca ConfigMap.
const serverCAReaderRole = "server-ca-reader"

// PublishServerCA creates the registration namespace and publishes the API server's CA
// in it, readable without credentials, the way kubeadm publishes cluster-info: an agent
// reads it over an unverified connection, before it has any reason to trust the
// server, and accepts it only if its checksum is the one it was given. The CA is not a
// secret; the checksum is what makes it trustworthy.
func PublishServerCA(ctx context.Context, c client.Client, namespace string, caPEM []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: managedLabels(nil)}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registration namespace %s: %w", namespace, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentv1.ServerCAConfigMap}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, cm, func() error {
		cm.Labels = managedLabels(cm.Labels)
		cm.Data = map[string]string{"ca.crt": string(caPEM)}
		return nil
	}); err != nil {
		return fmt.Errorf("configmap %s/%s: %w", namespace, agentv1.ServerCAConfigMap, err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: serverCAReaderRole}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Labels = managedLabels(role.Labels)
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{agentv1.ServerCAConfigMap}, Verbs: []string{"get"}}}
		return nil
	}); err != nil {
		return fmt.Errorf("role %s/%s: %w", namespace, serverCAReaderRole, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: serverCAReaderRole}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.Labels = managedLabels(binding.Labels)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: serverCAReaderRole}
		binding.Subjects = []rbacv1.Subject{
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:unauthenticated"},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"},
		}
		return nil
	}); err != nil {
		return fmt.Errorf("rolebinding %s/%s: %w", namespace, serverCAReaderRole, err)
	}
	return nil
}
