package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// APIEndpoint is where a cluster's API server is reached.
type APIEndpoint struct {
	// Host is the address (IP or DNS name) of the API server.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`

	// Port of the API server.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsZero is true when neither host nor port is set (omitzero uses it).
func (e APIEndpoint) IsZero() bool { return e.Host == "" && e.Port == 0 }

// IsValid is true when both host and port are set.
func (e APIEndpoint) IsValid() bool { return e.Host != "" && e.Port != 0 }

// ClaimKey is the label value that names a namespaced object: "<namespace>.<name>", or,
// when that is longer than a label value may be (63), its first 46 characters, a dash and
// 16 hex characters of its sha256 (still unique, still readable).
func ClaimKey(namespace, name string) string {
	key := namespace + "." + name
	if len(key) <= 63 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	prefix := key[:46]
	// A label value must end with an alphanumeric; the hash suffix does.
	return prefix + "-" + hex.EncodeToString(sum[:])[:16]
}

// Condition types and reasons shared by the kinds of this package.
const (
	// ConditionReady is the contract's Ready condition (Cluster API mirrors it).
	ConditionReady = "Ready"

	// ReasonReady: everything this object needs is done.
	ReasonReady = "Ready"
)
