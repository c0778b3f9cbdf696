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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "ipam.provisioner.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
