// Package controller holds the manager's reconcilers, one kind each: RegistrationToken
// (issues and expires import tokens), HostRegistration (grants a registration: Host,
// ServiceAccount, RBAC, credential) and Host (revokes the credential when the Host goes).
//
// Nothing here relies on garbage collection or the namespace controller: the local
// control plane runs no kube-controller-manager, so every object the manager creates
// is named predictably and deleted by the manager itself.
package controller

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// The manager's own permissions. It creates Roles that grant what it holds itself.
// +kubebuilder:rbac:groups=agent.provisioner.dev,resources=nodeplans;hosts;hostregistrations;registrationtokens,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agent.provisioner.dev,resources=nodeplans/status;hosts/status;hostregistrations/status;registrationtokens/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create
// +kubebuilder:rbac:groups="",resources=serviceaccounts;secrets;configmaps,verbs=get;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings;clusterroles;clusterrolebindings,verbs=get;create;update;patch;delete;bind;escalate

// managedByLabel marks every object the manager creates, for people reading a cluster.
const managedByLabel = "app.kubernetes.io/managed-by"
const managedByValue = "provisioner-agent-manager"

func managedLabels(extra map[string]string) map[string]string {
	labels := map[string]string{managedByLabel: managedByValue}
	for k, v := range extra {
		labels[k] = v
	}
	return labels
}

// ensureServiceAccount creates the ServiceAccount if it is missing.
func ensureServiceAccount(ctx context.Context, c client.Client, namespace, name string) (*corev1.ServiceAccount, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, sa, func() error {
		sa.Labels = managedLabels(sa.Labels)
		return nil
	})
	return sa, err
}

// ensureRole makes the Role's rules exactly these, and binds it to the ServiceAccount.
func ensureRole(ctx context.Context, c client.Client, namespace, name string, rules []rbacv1.PolicyRule, sa *corev1.ServiceAccount) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Labels = managedLabels(role.Labels)
		role.Rules = rules
		return nil
	}); err != nil {
		return fmt.Errorf("role %s/%s: %w", namespace, name, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.Labels = managedLabels(binding.Labels)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
		return nil
	}); err != nil {
		return fmt.Errorf("rolebinding %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ensureClusterRole is ensureRole for cluster-scoped rules.
func ensureClusterRole(ctx context.Context, c client.Client, name string, rules []rbacv1.PolicyRule, sa *corev1.ServiceAccount) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error {
		role.Labels = managedLabels(role.Labels)
		role.Rules = rules
		return nil
	}); err != nil {
		return fmt.Errorf("clusterrole %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.Labels = managedLabels(binding.Labels)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
		return nil
	}); err != nil {
		return fmt.Errorf("clusterrolebinding %s: %w", name, err)
	}
	return nil
}

// requestToken issues a bound token for the ServiceAccount. Bound tokens are checked
// against the ServiceAccount's UID on every request, so deleting the ServiceAccount
// revokes them at once.
func requestToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, seconds int64) (*authenticationv1.TokenRequest, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(seconds)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("token for serviceaccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return tr, nil
}

// deleteAll deletes each object, ignoring those already gone, and joins the errors.
func deleteAll(ctx context.Context, c client.Client, objs ...client.Object) error {
	var errs []error
	for _, obj := range objs {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// importObjects are everything a RegistrationToken's import credential consists of.
func importObjects(namespace, name string) []client.Object {
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.RoleBinding{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentv1.TokenSecretName(name)}},
	}
}

// importRules: before use, the import credential can create HostRegistrations (the
// webhook admits only the one named like the token) and read back its own registration
// and credential Secret. After use, create is gone.
func importRules(name string, canCreate bool) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{agentv1.GroupVersion.Group}, Resources: []string{"hostregistrations"}, ResourceNames: []string{name}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{agentv1.CredentialSecretName(name)}, Verbs: []string{"get"}},
	}
	if canCreate {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{agentv1.GroupVersion.Group}, Resources: []string{"hostregistrations"}, Verbs: []string{"create"}})
	}
	return rules
}

// agentRules: a host's agent reads and watches the plans of its own namespace and
// writes their status, reads the Secrets and ConfigMaps they reference, and renews its
// own token.
func agentRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{agentv1.GroupVersion.Group}, Resources: []string{"nodeplans"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{agentv1.GroupVersion.Group}, Resources: []string{"nodeplans/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{agentv1.AgentServiceAccount}, Verbs: []string{"create"}},
	}
}

// nodeArtifactsRules: the agent GETs the node artifacts through the API server's proxy
// to the one Service that serves them (`services/<name>/proxy/...`, whose authorized name
// is the Service's own when the URL names no port), and nothing else of that namespace.
func nodeArtifactsRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services/proxy"}, ResourceNames: []string{agentv1.NodeArtifactsService}, Verbs: []string{"get"}},
	}
}

// hostRules: the agent reads its own Host and writes its status, and nothing else
// cluster-wide.
func hostRules(hostName string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{agentv1.GroupVersion.Group}, Resources: []string{"hosts"}, ResourceNames: []string{hostName}, Verbs: []string{"get"}},
		{APIGroups: []string{agentv1.GroupVersion.Group}, Resources: []string{"hosts/status"}, ResourceNames: []string{hostName}, Verbs: []string{"get", "update", "patch"}},
	}
}
