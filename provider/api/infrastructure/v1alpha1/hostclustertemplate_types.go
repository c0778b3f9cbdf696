package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HostClusterTemplateSpec holds the HostCluster a ClusterClass stamps out.
type HostClusterTemplateSpec struct {
	Template HostClusterTemplateResource `json:"template"`
}

// HostClusterTemplateResource is the template's HostCluster.
type HostClusterTemplateResource struct {
	// ObjectMeta: labels and annotations of the HostCluster made from it.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// Spec of the HostCluster made from it.
	Spec HostClusterSpec `json:"spec"`
}

// HostClusterTemplate is the HostCluster template of a ClusterClass.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hostclustertemplates,scope=Namespaced,categories=cluster-api;provisioner
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostClusterTemplateSpec `json:"spec,omitempty"`
}

// HostClusterTemplateList is a list of HostClusterTemplates.
// +kubebuilder:object:root=true
type HostClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostClusterTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &HostClusterTemplate{}, &HostClusterTemplateList{})
}
