package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-ipam-provisioner-dev-v1alpha1-addresspool,mutating=false,failurePolicy=fail,sideEffects=None,groups=ipam.provisioner.dev,resources=addresspools,verbs=create;update,versions=v1alpha1,name=vaddresspool.ipam.provisioner.dev,admissionReviewVersions=v1

// AddressPool wants a spec that poolv1.ValidateSpec accepts.
type AddressPool struct{}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *AddressPool) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &poolv1.AddressPool{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*poolv1.AddressPool] = &AddressPool{}

var addressPoolKind = schema.GroupKind{Group: poolv1.GroupVersion.Group, Kind: poolv1.Kind}

// ValidateCreate checks the spec.
func (webhook *AddressPool) ValidateCreate(_ context.Context, p *poolv1.AddressPool) (admission.Warnings, error) {
	return nil, invalid(addressPoolKind, p.Name, poolv1.ValidateSpec(&p.Spec, field.NewPath("spec")))
}

// ValidateUpdate allows the pool to change (grow, or shrink: addresses already bound stay
// with their claims until released).
func (webhook *AddressPool) ValidateUpdate(_ context.Context, _, p *poolv1.AddressPool) (admission.Warnings, error) {
	return nil, invalid(addressPoolKind, p.Name, poolv1.ValidateSpec(&p.Spec, field.NewPath("spec")))
}

// ValidateDelete allows every delete.
func (webhook *AddressPool) ValidateDelete(context.Context, *poolv1.AddressPool) (admission.Warnings, error) {
	return nil, nil
}
