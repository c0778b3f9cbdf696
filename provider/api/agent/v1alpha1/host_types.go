package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostSpec is what a host said about itself when it registered.
type HostSpec struct {
	// Address the host registered from (what it reported; informational).
	// +optional
	Address string `json:"address,omitempty"`

	// Roles the host was registered with (e.g. control-plane, worker).
	// +optional
	// +listType=set
	Roles []string `json:"roles,omitempty"`
}

// Condition types of a Host.
const (
	// ConditionRegistered: the manager created the host's credential and RBAC.
	ConditionRegistered = "Registered"
)

// HostStatus is written by the manager (registration) and by the host's agent (the rest).
type HostStatus struct {
	// PlanNamespace holds the host's NodePlans and the objects they reference.
	// +optional
	PlanNamespace string `json:"planNamespace,omitempty"`

	// ServiceAccount of the host's agent, in PlanNamespace.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// Registration is the HostRegistration that created this Host.
	// +optional
	Registration string `json:"registration,omitempty"`

	// +optional
	RegisteredTime *metav1.Time `json:"registeredTime,omitempty"`

	// LastHeartbeatTime is when the agent last reported.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// AgentVersion, Hostname, OS and Arch as the agent reports them.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// +optional
	OS string `json:"os,omitempty"`
	// +optional
	Arch string `json:"arch,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Host is a machine whose agent registered. Deleting it revokes the agent's credential.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=provisioner
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Roles",type=string,JSONPath=`.spec.roles`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Host struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostSpec   `json:"spec,omitempty"`
	Status HostStatus `json:"status,omitempty"`
}

// HostList is a list of Hosts.
// +kubebuilder:object:root=true
type HostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Host `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Host{}, &HostList{})
}
