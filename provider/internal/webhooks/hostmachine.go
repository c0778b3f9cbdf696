package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostmachines,verbs=create;update,versions=v1alpha1,name=vhostmachine.infrastructure.provisioner.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostmachinetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostmachinetemplates,verbs=create;update,versions=v1alpha1,name=vhostmachinetemplate.infrastructure.provisioner.dev,admissionReviewVersions=v1

// HostMachine wants a valid selector; what chose and bootstrapped the Host does not
// change (a claimed Host would no longer match), and providerID is set once.
type HostMachine struct{}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *HostMachine) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.HostMachine{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*infrav1.HostMachine] = &HostMachine{}

// ValidateCreate checks the spec.
func (webhook *HostMachine) ValidateCreate(_ context.Context, m *infrav1.HostMachine) (admission.Warnings, error) {
	return nil, invalid(infrav1.GroupVersion.WithKind("HostMachine").GroupKind(), m.Name, validateHostMachineSpec(&m.Spec, field.NewPath("spec")))
}

// ValidateUpdate checks the spec and keeps its selector, artifacts, prepareCommands and a set providerID.
func (webhook *HostMachine) ValidateUpdate(_ context.Context, old, m *infrav1.HostMachine) (admission.Warnings, error) {
	path := field.NewPath("spec")
	errs := validateHostMachineSpec(&m.Spec, path)
	if !equality.Semantic.DeepEqual(old.Spec.HostSelector, m.Spec.HostSelector) {
		errs = append(errs, field.Forbidden(path.Child("hostSelector"), "is immutable"))
	}
	if !equality.Semantic.DeepEqual(old.Spec.Artifacts, m.Spec.Artifacts) {
		errs = append(errs, field.Forbidden(path.Child("artifacts"), "is immutable"))
	}
	if !equality.Semantic.DeepEqual(old.Spec.PrepareCommands, m.Spec.PrepareCommands) {
		errs = append(errs, field.Forbidden(path.Child("prepareCommands"), "is immutable"))
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != m.Spec.ProviderID {
		errs = append(errs, field.Forbidden(path.Child("providerID"), fmt.Sprintf("is immutable once set (%s)", old.Spec.ProviderID)))
	}
	return nil, invalid(infrav1.GroupVersion.WithKind("HostMachine").GroupKind(), m.Name, errs)
}

// ValidateDelete allows every delete.
func (webhook *HostMachine) ValidateDelete(context.Context, *infrav1.HostMachine) (admission.Warnings, error) {
	return nil, nil
}

func validateHostMachineSpec(spec *infrav1.HostMachineSpec, path *field.Path) field.ErrorList {
	return validateSelector(&spec.HostSelector, path.Child("hostSelector"))
}

// HostMachineTemplate wants a valid spec; spec.template.spec is immutable (Cluster API
// rolls machines out by pointing at a new template, never by changing one).
type HostMachineTemplate struct{}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *HostMachineTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.HostMachineTemplate{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*infrav1.HostMachineTemplate] = &HostMachineTemplate{}

// ValidateCreate checks spec.template.spec.
func (webhook *HostMachineTemplate) ValidateCreate(_ context.Context, t *infrav1.HostMachineTemplate) (admission.Warnings, error) {
	return nil, validateHostMachineTemplate(nil, t)
}

// ValidateUpdate checks spec.template.spec and keeps it.
func (webhook *HostMachineTemplate) ValidateUpdate(_ context.Context, old, t *infrav1.HostMachineTemplate) (admission.Warnings, error) {
	return nil, validateHostMachineTemplate(&old.Spec.Template.Spec, t)
}

// ValidateDelete allows every delete.
func (webhook *HostMachineTemplate) ValidateDelete(context.Context, *infrav1.HostMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validateHostMachineTemplate(old *infrav1.HostMachineSpec, t *infrav1.HostMachineTemplate) error {
	return validateTemplate(infrav1.GroupVersion.WithKind("HostMachineTemplate").GroupKind(), t.Name, old, &t.Spec.Template.Spec,
		validateHostMachineSpec, "is immutable: create a new template and point the control plane or machine deployment at it")
}
