package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HostMachineTemplateSpec holds the HostMachine that KubeadmControlPlane and
// MachineDeployments stamp out.
type HostMachineTemplateSpec struct {
	Template HostMachineTemplateResource `json:"template"`
}

// HostMachineTemplateResource is the template's HostMachine.
type HostMachineTemplateResource struct {
	// ObjectMeta: labels and annotations of the HostMachines made from it.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// Spec of the HostMachines made from it.
	Spec HostMachineSpec `json:"spec"`
}

// HostMachineTemplate is the HostMachine template of a control plane or machine
// deployment. Its spec is immutable (Cluster API rolls machines by switching templates).
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hostmachinetemplates,scope=Namespaced,categories=cluster-api;provisioner
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostMachineTemplateSpec `json:"spec,omitempty"`
}

// HostMachineTemplateList is a list of HostMachineTemplates.
// +kubebuilder:object:root=true
type HostMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostMachineTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &HostMachineTemplate{}, &HostMachineTemplateList{})
}
