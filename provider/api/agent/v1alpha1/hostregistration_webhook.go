package v1alpha1

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:path=/validate-agent-provisioner-dev-v1alpha1-hostregistration,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent.provisioner.dev,resources=hostregistrations,verbs=create,versions=v1alpha1,name=vhostregistration.agent.provisioner.dev,admissionReviewVersions=v1

// HostRegistrationValidator admits a HostRegistration only from the import
// ServiceAccount of a RegistrationToken of the same name that is Ready (not used, not
// expired): a token registers one host, once; a token made for a host registers only it.
// +kubebuilder:object:generate=false
type HostRegistrationValidator struct {
	// Reader reads RegistrationTokens (uncached: a token just used must look used).
	Reader client.Reader
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// SetupHostRegistrationWebhookWithManager registers the validator with the manager's webhook server.
func SetupHostRegistrationWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &HostRegistration{}).
		WithValidator(&HostRegistrationValidator{Reader: mgr.GetAPIReader()}).
		Complete()
}

var _ admission.Validator[*HostRegistration] = &HostRegistrationValidator{}

func (v *HostRegistrationValidator) ValidateCreate(ctx context.Context, reg *HostRegistration) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	want := fmt.Sprintf("system:serviceaccount:%s:%s", reg.Namespace, reg.Name)
	if req.UserInfo.Username != want {
		return nil, apierrors.NewForbidden(GroupVersion.WithResource("hostregistrations").GroupResource(), reg.Name,
			fmt.Errorf("a HostRegistration is created by the import token of the RegistrationToken of the same name (%s), not by %s", want, req.UserInfo.Username))
	}
	var token RegistrationToken
	if err := v.Reader.Get(ctx, types.NamespacedName{Namespace: reg.Namespace, Name: reg.Name}, &token); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, forbidRegistration(reg, "its RegistrationToken no longer exists; ask for a new registration command")
		}
		return nil, apierrors.NewInternalError(err)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	switch {
	case token.Spec.HostName != "" && token.Spec.HostName != reg.Spec.HostName:
		return nil, forbidRegistration(reg, fmt.Sprintf("the registration token is for host %q only, not %q", token.Spec.HostName, reg.Spec.HostName))
	case token.Status.Phase == TokenUsed:
		return nil, forbidRegistration(reg, fmt.Sprintf("the registration token was already used (by host %q); ask for a new registration command", token.Status.Host))
	case token.Status.Phase == TokenExpired || (token.Status.ExpiresAt != nil && !now().Before(token.Status.ExpiresAt.Time)):
		return nil, forbidRegistration(reg, "the registration token expired; ask for a new registration command")
	case token.Status.Phase != TokenReady:
		return nil, forbidRegistration(reg, "the registration token is not ready")
	}
	return nil, nil
}

// ValidateUpdate is not called (the webhook is registered for create only; the CRD
// schema keeps the spec immutable).
func (v *HostRegistrationValidator) ValidateUpdate(context.Context, *HostRegistration, *HostRegistration) (admission.Warnings, error) {
	return nil, nil
}

func (v *HostRegistrationValidator) ValidateDelete(context.Context, *HostRegistration) (admission.Warnings, error) {
	return nil, nil
}

func forbidRegistration(reg *HostRegistration, why string) error {
	return apierrors.NewForbidden(GroupVersion.WithResource("hostregistrations").GroupResource(), reg.Name, fmt.Errorf("%s", why))
}
