package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddressPoolSpec is the set of addresses a pool hands out, and what every address of it
// carries (prefix, gateway).
type AddressPoolSpec struct {
	// Addresses the pool hands out, in this order: single IPv4 addresses
	// (10.0.0.10), inclusive ranges (10.0.0.10-10.0.0.20) or CIDR blocks (10.0.0.0/28,
	// without its network and broadcast address). The gateway is never handed out.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=7
	// +kubebuilder:validation:items:MaxLength=31
	Addresses []string `json:"addresses"`

	// Prefix is the length of the network prefix every address of the pool is given
	// (24 for a /24).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	Prefix int32 `json:"prefix"`

	// Gateway is the default gateway every address of the pool is given; it must lie in
	// the prefix of every address. Default: none (the machines get no default route).
	// +optional
	// +kubebuilder:validation:MaxLength=15
	Gateway string `json:"gateway,omitempty"`
}

// AddressPoolStatus is written by the IPAddressClaim controller.
type AddressPoolStatus struct {
	// Total is how many addresses the pool can hand out.
	// +optional
	Total int32 `json:"total,omitempty"`

	// Allocated is how many of them are bound to claims (IPAddress objects of this pool).
	// +optional
	Allocated int32 `json:"allocated,omitempty"`

	// Free is Total less Allocated.
	// +optional
	Free int32 `json:"free,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=addresspools,scope=Namespaced,categories=cluster-api
// +kubebuilder:printcolumn:name="Prefix",type=integer,JSONPath=`.spec.prefix`
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.spec.gateway`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.free`

// AddressPool is an in-cluster pool of IPv4 addresses. IPAddressClaims in its namespace
// whose spec.poolRef is {apiGroup: ipam.provisioner.dev, kind: AddressPool, name: <its
// name>} get an IPAddress from it.
type AddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AddressPoolSpec   `json:"spec,omitempty"`
	Status AddressPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AddressPoolList is a list of AddressPools.
type AddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressPool `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &AddressPool{}, &AddressPoolList{})
}

// Kind is the kind a claim's spec.poolRef names.
const Kind = "AddressPool"

// Reasons of an IPAddressClaim's Ready condition, as the controller writes them.
const (
	// ReasonAllocated: the claim's IPAddress exists.
	ReasonAllocated = "AddressAllocated"
	// ReasonPoolNotFound: the claim names a pool that does not exist (yet).
	ReasonPoolNotFound = "PoolNotFound"
	// ReasonPoolExhausted: every address of the pool is bound to another claim.
	ReasonPoolExhausted = "PoolExhausted"
)

// ClaimFinalizer keeps a claim until the controller has deleted its IPAddress (the local
// control plane runs no garbage collector).
const ClaimFinalizer = "ipam.provisioner.dev/address"

// PoolLabel on an IPAddress names the AddressPool it was taken from.
const PoolLabel = "ipam.provisioner.dev/pool"
