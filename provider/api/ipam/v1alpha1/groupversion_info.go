// Package v1alpha1 is the ipam.provisioner.dev API: AddressPool, an in-cluster pool of
// IPv4 addresses that serves Cluster API's IPAM contract (ipam.cluster.x-k8s.io
// IPAddressClaim → IPAddress, v1beta2) for claims whose spec.poolRef names it. An
// infrastructure provider that takes addresses from pools (CAPV's
// network.devices[].addressesFromPools) creates the claims; the manager's
// IPAddressClaim controller allocates the addresses.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.provisioner.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "ipam.provisioner.dev", Version: "v1alpha1"}

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
