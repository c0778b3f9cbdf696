// Package v1alpha1 is the agent.provisioner.dev API: NodePlans (what a host's agent
// executes), Hosts (the inventory of registered machines), and the two kinds of the
// registration handshake, RegistrationToken and HostRegistration.
//
// +kubebuilder:object:generate=true
// +groupName=agent.provisioner.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agent.provisioner.dev", Version: "v1alpha1"}

	// schemeBuilder registers this package's kinds with a scheme (apimachinery's builder, as
	// Cluster API's own api packages do, so importing the types pulls in no controller-runtime).
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = schemeBuilder.AddToScheme

	// objectTypes are the kinds of this package; each types file appends its own in init.
	objectTypes = []runtime.Object{}
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

const (
	// HostLabel names the Host a NodePlan is for. The agent watches only plans with its
	// own host's name here, in its host's plan namespace.
	HostLabel = "agent.provisioner.dev/host"

	// ForceUpdateAnnotation, set to "true" on a NodePlan, lets its spec change while the
	// plan is Executing (the running execution is stopped and the new spec runs instead).
	ForceUpdateAnnotation = "agent.provisioner.dev/force-update"

	// CancelAnnotation, set to "true" on a NodePlan, stops its execution (or keeps it from
	// starting); the plan ends Cancelled. It is metadata, so the webhook lets it through
	// while the plan is Executing.
	CancelAnnotation = "agent.provisioner.dev/cancel"

	// HostFinalizer keeps a Host until the manager has revoked its agent's credential.
	HostFinalizer = "agent.provisioner.dev/revoke-credential"

	// DefaultRegistrationNamespace is where RegistrationTokens, their import
	// ServiceAccounts and HostRegistrations live.
	DefaultRegistrationNamespace = "provisioner-registration"

	// ServerCAConfigMap is the ConfigMap in the registration namespace that holds the API
	// server's CA (key ca.crt). Anyone may read it, unauthenticated: an agent fetches it
	// before it trusts the server and checks it against the checksum it was given.
	ServerCAConfigMap = "server-ca"

	// HandoverSecret is the Secret in a host's plan namespace through which the manager
	// the host's agent talks to tells it to follow its Host to another manager (a pivot):
	// keys server (https URL), caChecksum (sha256 of the new server's CA, hex),
	// registrationNamespace and token (a one-use RegistrationToken of the new manager,
	// confined to this host). The agent reads it with the credential it has (it may get
	// Secrets of its namespace), registers there as the same host, and switches over.
	HandoverSecret = "agent-handover"

	// AgentServiceAccount is the ServiceAccount of a host's agent, in the host's plan namespace.
	AgentServiceAccount = "agent"
)

// PlanNamespace is the namespace that holds a host's NodePlans, its agent's
// ServiceAccount and the Secrets and ConfigMaps its plans reference. One namespace per
// host is what lets RBAC confine an agent to its own plans.
func PlanNamespace(hostName string) string { return "host-" + hostName }

// CredentialSecretName is the Secret the manager writes a granted agent credential to,
// in the registration namespace. Its name follows from the registration's, so the import
// ServiceAccount's Role can name it.
func CredentialSecretName(registrationName string) string { return registrationName + "-credential" }

// TokenSecretName is the Secret holding a RegistrationToken's import token.
func TokenSecretName(tokenName string) string { return tokenName + "-token" }

// NodeArtifactsNamespace and NodeArtifactsService name the Service a self-managed hosts
// cluster serves its node artifacts (kubelet, kubeadm, image archives) behind; agents GET
// them through the API server's service proxy with their own credentials.
const (
	NodeArtifactsNamespace = "provisioner-agent-system"
	NodeArtifactsService   = "node-artifacts"
)

// NodeArtifactsRoleName names the Role (and its binding, in NodeArtifactsNamespace) that
// lets a host's agent GET the node artifacts through the service proxy, and nothing else.
func NodeArtifactsRoleName(hostName string) string {
	return "agent.provisioner.dev:node-artifacts:" + hostName
}

// HostClusterRoleName names the ClusterRole (and its binding) that lets a host's agent
// read its own Host and write its status.
func HostClusterRoleName(hostName string) string { return "agent.provisioner.dev:host:" + hostName }
