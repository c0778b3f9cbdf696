package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegistrationTokenSpec asks the manager for a short-lived import token.
type RegistrationTokenSpec struct {
	// TTL of the token. Default: 1h.
	// +optional
	// +kubebuilder:default="1h"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// HostName, when set, confines the token to that one host, and lets it register a
	// Host that exists already: a Host moved here from another manager (a pivot), whose
	// agent follows with this token and gets a fresh credential from this manager. A
	// token without it registers only a new host.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=58
	HostName string `json:"hostName,omitempty"`
}

// RegistrationTokenPhase is where a token stands.
// +kubebuilder:validation:Enum=Pending;Ready;Used;Expired
type RegistrationTokenPhase string

const (
	// TokenPending: the manager has not issued the token yet.
	TokenPending RegistrationTokenPhase = "Pending"
	// TokenReady: the token is in status.secretName and can register one host.
	TokenReady RegistrationTokenPhase = "Ready"
	// TokenUsed: a host registered with it; it cannot register another.
	TokenUsed RegistrationTokenPhase = "Used"
	// TokenExpired: its TTL passed; its ServiceAccount is gone.
	TokenExpired RegistrationTokenPhase = "Expired"
)

// RegistrationTokenStatus is written by the manager.
type RegistrationTokenStatus struct {
	// +optional
	Phase RegistrationTokenPhase `json:"phase,omitempty"`

	// SecretName is the Secret (key "token") that holds the import token.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// ExpiresAt is when the token stops working.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// Host registered with this token.
	// +optional
	Host string `json:"host,omitempty"`
}

// RegistrationToken is a one-use, short-lived credential that can only create one
// HostRegistration, named like the token, in the registration namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=provisioner
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.status.host`
type RegistrationToken struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RegistrationTokenSpec   `json:"spec,omitempty"`
	Status RegistrationTokenStatus `json:"status,omitempty"`
}

// RegistrationTokenList is a list of RegistrationTokens.
// +kubebuilder:object:root=true
type RegistrationTokenList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RegistrationToken `json:"items"`
}

// HostRegistrationSpec is what an agent asks to be registered as.
type HostRegistrationSpec struct {
	// HostName becomes the Host's name.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=58
	HostName string `json:"hostName"`

	// Address the agent reports for its host.
	// +optional
	Address string `json:"address,omitempty"`

	// Roles of the host.
	// +optional
	// +listType=set
	Roles []string `json:"roles,omitempty"`

	// Labels to put on the Host.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// HostRegistrationPhase is where a registration stands.
// +kubebuilder:validation:Enum=Pending;Granted;Denied
type HostRegistrationPhase string

const (
	RegistrationPending HostRegistrationPhase = "Pending"
	RegistrationGranted HostRegistrationPhase = "Granted"
	RegistrationDenied  HostRegistrationPhase = "Denied"
)

// HostRegistrationStatus is written by the manager.
type HostRegistrationStatus struct {
	// +optional
	Phase HostRegistrationPhase `json:"phase,omitempty"`

	// Message says why a registration was denied.
	// +optional
	Message string `json:"message,omitempty"`

	// CredentialSecretName is the Secret (in this namespace) with the agent's credential:
	// keys token, namespace, serviceAccount, host.
	// +optional
	CredentialSecretName string `json:"credentialSecretName,omitempty"`
}

// HostRegistration is an agent's request, made with an import token, to become a Host.
// Its name must be the name of the RegistrationToken whose token creates it (the
// webhook checks the requester); granting it creates the Host and the agent's credential.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=provisioner
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.hostName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a registration's spec is immutable"
	Spec   HostRegistrationSpec   `json:"spec,omitempty"`
	Status HostRegistrationStatus `json:"status,omitempty"`
}

// HostRegistrationList is a list of HostRegistrations.
// +kubebuilder:object:root=true
type HostRegistrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostRegistration `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &RegistrationToken{}, &RegistrationTokenList{}, &HostRegistration{}, &HostRegistrationList{})
}
