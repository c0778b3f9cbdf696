package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HostMachineSpec says which Host a Machine may run on and what the Host is given
// besides the Machine's bootstrap data.
type HostMachineSpec struct {
	// ProviderID is "provisioner-host://<host name>", set by the controller once the
	// Host is claimed (the contract's spec.providerID; Cluster API copies it to the Machine
	// and matches it to the Node).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// HostSelector selects, by label, the Hosts this machine may claim. The Machine's role
	// narrows them further: a control-plane Machine (label cluster.x-k8s.io/control-plane)
	// takes a Host whose roles contain control-plane or are empty, any other Machine one
	// whose roles contain worker or are empty. Default: {} (every Host).
	// +optional
	HostSelector metav1.LabelSelector `json:"hostSelector,omitempty,omitzero"`

	// Artifacts are files the prepare plan downloads (node binaries, image archives), each
	// checked against its sha256 digest. Default: none.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=path
	Artifacts []Artifact `json:"artifacts,omitempty"`

	// PrepareCommands run on the Host (each with /bin/sh -c, in order) in its prepare plan,
	// after the artifacts are downloaded: what the Host needs before its kubeadm init or
	// join that does not depend on the bootstrap data (image imports, for example). The
	// prepare plan is written as soon as the Host is claimed, so this runs while Cluster
	// API makes the bootstrap data (a worker's waits for the control plane to be
	// initialized); the bootstrap plan is written once the prepare plan is Applied and the
	// bootstrap data exists. Default: none (the prepare plan checks the Host's
	// prerequisites and downloads the artifacts).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	PrepareCommands []string `json:"prepareCommands,omitempty"`
}

// Artifact is a file the host downloads over HTTP(S) into path.
type Artifact struct {
	// Path on the host.
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`

	// URL to GET (for example the artifact server of provisioner-forwarder).
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// Digest is the content's sha256 ("sha256:<hex>").
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`

	// Mode in octal. Default: "0644".
	// +optional
	// +kubebuilder:default="0644"
	// +kubebuilder:validation:Pattern=`^0?[0-7]{3}$`
	Mode string `json:"mode,omitempty"`
}

// HostReference names a cluster-scoped agent.provisioner.dev Host.
type HostReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// PlanReference names a NodePlan.
type PlanReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// HostMachineInitializationStatus is the contract's initialization status.
type HostMachineInitializationStatus struct {
	// Provisioned is true once the Host's bootstrap plan is Applied.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// HostMachineStatus is written by the HostMachine controller.
type HostMachineStatus struct {
	// Initialization is what Cluster API reads to know the machine is provisioned.
	// +optional
	Initialization HostMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// HostRef is the Host this machine claimed.
	// +optional
	HostRef *HostReference `json:"hostRef,omitempty"`

	// PreparePlan is the NodePlan that prepares the Host before its bootstrap data exists.
	// +optional
	PreparePlan *PlanReference `json:"preparePlan,omitempty"`

	// BootstrapPlan is the NodePlan that bootstraps the Host.
	// +optional
	BootstrapPlan *PlanReference `json:"bootstrapPlan,omitempty"`

	// Addresses of the Host (its registered address, as InternalIP, and its hostname).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// Conditions: Ready, HostClaimed, PreparePlanApplied, BootstrapPlanApplied, and
	// HostReleased while the machine is deleted.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types of a HostMachine.
const (
	// ConditionHostClaimed: the machine holds a Host.
	ConditionHostClaimed = "HostClaimed"
	// ConditionPreparePlanApplied: the Host's prepare plan is Applied.
	ConditionPreparePlanApplied = "PreparePlanApplied"
	// ConditionBootstrapPlanApplied: the Host's bootstrap plan is Applied.
	ConditionBootstrapPlanApplied = "BootstrapPlanApplied"
	// ConditionHostReleased: on deletion, the Host was reset and released.
	ConditionHostReleased = "HostReleased"
)

// Reasons of a HostMachine's conditions.
const (
	ReasonWaitingForMachine       = "WaitingForMachine"
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	ReasonNoHostAvailable         = "NoHostAvailable"
	ReasonClaimed                 = "Claimed"
	ReasonBootstrapDataInvalid    = "BootstrapDataInvalid"
	ReasonPlanPending             = "PlanPending"
	ReasonPlanApplied             = "PlanApplied"
	// ReasonPlanFailed: the prepare or bootstrap plan ended Failed (or Cancelled); the message names
	// the Host, the plan and the failing check or instruction.
	ReasonPlanFailed = "PlanFailed"
	// ReasonResetting: the reset plan runs on the Host.
	ReasonResetting = "Resetting"
	// ReasonReleased: the reset plan was Applied and the claim removed.
	ReasonReleased = "Released"
	// ReasonResetTimedOut: the reset plan was not Applied within the reset timeout (the
	// agent is gone, or the reset failed); the claim was removed anyway and the Host may
	// still run what the machine put on it.
	ReasonResetTimedOut = "ResetTimedOut"
)

// HostMachineFinalizer keeps a HostMachine until its Host is reset and released.
const HostMachineFinalizer = "infrastructure.provisioner.dev/hostmachine"

// HostMachine is the infrastructure machine of a Machine that runs on an existing Host.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=hostmachines,scope=Namespaced,categories=cluster-api;provisioner
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.status.hostRef.name`
// +kubebuilder:printcolumn:name="Provider ID",type=string,JSONPath=`.spec.providerID`,priority=10
// +kubebuilder:printcolumn:name="Provisioned",type=string,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostMachineSpec   `json:"spec,omitempty"`
	Status HostMachineStatus `json:"status,omitempty"`
}

// HostMachineList is a list of HostMachines.
// +kubebuilder:object:root=true
type HostMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostMachine `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &HostMachine{}, &HostMachineList{})
}
