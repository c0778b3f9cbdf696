// Package v1alpha1 is the infrastructure.provisioner.dev API: Cluster API's infrastructure
// kinds for hosts that already exist (registered agent.provisioner.dev Hosts).
// HostCluster gives a Cluster its control-plane endpoint; a HostMachine claims a Host and
// bootstraps it with a NodePlan made from the Machine's cloud-config. They follow the
// v1beta2 infrastructure contract of Cluster API v1.14 (status.initialization.provisioned,
// spec.providerID, status.addresses, metav1 conditions, templates' spec.template).
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.provisioner.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.provisioner.dev", Version: "v1alpha1"}

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

// Labels and annotations this provider writes on agent.provisioner.dev Hosts and NodePlans.
// Hosts are cluster-scoped and HostMachines namespaced, so no owner reference can link
// them: these labels do, and the controllers' own deletion logic removes them.
const (
	// ClaimedByLabel on a Host names the HostMachine that holds it, ClaimKey(namespace, name).
	ClaimedByLabel = "infrastructure.provisioner.dev/claimed-by"

	// ClusterNameLabel on a Host or NodePlan names the Cluster its HostMachine belongs to
	// (Cluster API's label).
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"

	// EndpointOfLabel on a Host reserves it for a HostCluster's control plane, ClaimKey of
	// the HostCluster: the HostCluster chose the Host's address as the control-plane
	// endpoint, so only a control-plane HostMachine of that cluster may claim it.
	EndpointOfLabel = "infrastructure.provisioner.dev/endpoint-of"

	// HostMachineLabel on a NodePlan (and its files Secret) names the HostMachine it was
	// made for, ClaimKey(namespace, name).
	HostMachineLabel = "infrastructure.provisioner.dev/host-machine"

	// PlanPurposeLabel on a NodePlan says what it does: "prepare", "bootstrap" or "reset".
	PlanPurposeLabel = "infrastructure.provisioner.dev/purpose"

	// ControlPlaneMachineLabel is Cluster API's label on control-plane Machines.
	ControlPlaneMachineLabel = "cluster.x-k8s.io/control-plane"

	// RoleControlPlane and RoleWorker are the Host roles (Host.spec.roles) a HostMachine
	// needs; a Host with no roles takes either.
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"

	// ProviderIDPrefix: a HostMachine's providerID is this prefix and its Host's name.
	ProviderIDPrefix = "provisioner-host://"

	// DefaultAPIServerPort is the control-plane endpoint's port when it is taken from a Host.
	DefaultAPIServerPort int32 = 6443
)
