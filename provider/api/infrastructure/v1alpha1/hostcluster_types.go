package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostClusterSpec is the infrastructure of a Cluster whose machines are existing hosts.
type HostClusterSpec struct {
	// ControlPlaneEndpoint is where the cluster's API server is reached. When it is not
	// set, the controller sets it to the address of a registered, unclaimed Host that can
	// run the control plane (roles contain control-plane or are empty) and matches
	// controlPlaneHostSelector, with port 6443, and reserves that Host (label
	// infrastructure.provisioner.dev/endpoint-of) for the cluster's control plane. Once
	// set it does not change. Default: unset (chosen from the Hosts).
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// ControlPlaneHostSelector narrows the Hosts the endpoint may be taken from (the
	// control-plane pool's hostSelector). Only used while controlPlaneEndpoint is unset.
	// Default: unset (every Host).
	// +optional
	ControlPlaneHostSelector *metav1.LabelSelector `json:"controlPlaneHostSelector,omitempty"`
}

// HostClusterInitializationStatus is the contract's initialization status.
type HostClusterInitializationStatus struct {
	// Provisioned is true once the control-plane endpoint is known.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// HostClusterStatus is written by the HostCluster controller.
type HostClusterStatus struct {
	// Initialization is what Cluster API reads to know the infrastructure is provisioned.
	// +optional
	Initialization HostClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// EndpointHost is the Host whose address became the control-plane endpoint (when the
	// controller chose it).
	// +optional
	EndpointHost string `json:"endpointHost,omitempty"`

	// Conditions: Ready (the endpoint is known).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Reasons of a HostCluster's Ready condition.
const (
	// ReasonWaitingForHost: no registered, unclaimed Host can give the endpoint yet.
	ReasonWaitingForHost = "WaitingForHost"
)

// HostClusterFinalizer lets the controller remove its endpoint reservation from the Host.
const HostClusterFinalizer = "infrastructure.provisioner.dev/hostcluster"

// HostCluster is the infrastructure cluster of a Cluster built on existing hosts.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=hostclusters,scope=Namespaced,categories=cluster-api;provisioner
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`
// +kubebuilder:printcolumn:name="Provisioned",type=string,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostClusterSpec   `json:"spec,omitempty"`
	Status HostClusterStatus `json:"status,omitempty"`
}

// HostClusterList is a list of HostClusters.
// +kubebuilder:object:root=true
type HostClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &HostCluster{}, &HostClusterList{})
}
