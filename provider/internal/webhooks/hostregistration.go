package webhooks

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-agent-provisioner-dev-v1alpha1-hostregistration,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent.provisioner.dev,resources=hostregistrations,verbs=create,versions=v1alpha1,name=vhostregistration.agent.provisioner.dev,admissionReviewVersions=v1

// HostRegistration admits a HostRegistration only from the import ServiceAccount of a
// RegistrationToken of the same name that is Ready (not used, not expired): a token
// registers one host, once; a token made for a host registers only it.
type HostRegistration struct {
	// Client reads RegistrationTokens (uncached: a token just used must look used).
	Client client.Reader
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *HostRegistration) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &agentv1.HostRegistration{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*agentv1.HostRegistration] = &HostRegistration{}

// ValidateCreate admits the registration of the requesting import token's own host.
func (webhook *HostRegistration) ValidateCreate(ctx context.Context, reg *agentv1.HostRegistration) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	want := fmt.Sprintf("system:serviceaccount:%s:%s", reg.Namespace, reg.Name)
	if req.UserInfo.Username != want {
		return nil, apierrors.NewForbidden(agentv1.GroupVersion.WithResource("hostregistrations").GroupResource(), reg.Name,
			fmt.Errorf("a HostRegistration is created by the import token of the RegistrationToken of the same name (%s), not by %s", want, req.UserInfo.Username))
	}
	var token agentv1.RegistrationToken
	if err := webhook.Client.Get(ctx, types.NamespacedName{Namespace: reg.Namespace, Name: reg.Name}, &token); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, forbidRegistration(reg, "its RegistrationToken no longer exists; ask for a new registration command")
		}
		return nil, apierrors.NewInternalError(err)
	}
	now := time.Now
	if webhook.Now != nil {
		now = webhook.Now
	}
	switch {
	case token.Spec.HostName != "" && token.Spec.HostName != reg.Spec.HostName:
		return nil, forbidRegistration(reg, fmt.Sprintf("the registration token is for host %q only, not %q", token.Spec.HostName, reg.Spec.HostName))
	case token.Status.Phase == agentv1.TokenUsed:
		return nil, forbidRegistration(reg, fmt.Sprintf("the registration token was already used (by host %q); ask for a new registration command", token.Status.Host))
	case token.Status.Phase == agentv1.TokenExpired || (token.Status.ExpiresAt != nil && !now().Before(token.Status.ExpiresAt.Time)):
		return nil, forbidRegistration(reg, "the registration token expired; ask for a new registration command")
	case token.Status.Phase != agentv1.TokenReady:
		return nil, forbidRegistration(reg, "the registration token is not ready")
	}
	return nil, nil
}

// ValidateUpdate is not called (the webhook is registered for create only; the CRD
// schema keeps the spec immutable).
func (webhook *HostRegistration) ValidateUpdate(context.Context, *agentv1.HostRegistration, *agentv1.HostRegistration) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete allows every delete.
func (webhook *HostRegistration) ValidateDelete(context.Context, *agentv1.HostRegistration) (admission.Warnings, error) {
	return nil, nil
}

func forbidRegistration(reg *agentv1.HostRegistration, why string) error {
	return apierrors.NewForbidden(agentv1.GroupVersion.WithResource("hostregistrations").GroupResource(), reg.Name, fmt.Errorf("%s", why))
}
