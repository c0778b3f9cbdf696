package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostclusters,verbs=create;update,versions=v1alpha1,name=vhostcluster.infrastructure.provisioner.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostclustertemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostclustertemplates,verbs=create;update,versions=v1alpha1,name=vhostclustertemplate.infrastructure.provisioner.dev,admissionReviewVersions=v1

// HostCluster wants a valid selector; the endpoint does not change once set (the
// cluster's certificates and kubeconfigs name it).
type HostCluster struct{}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *HostCluster) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.HostCluster{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*infrav1.HostCluster] = &HostCluster{}

// ValidateCreate checks the spec.
func (webhook *HostCluster) ValidateCreate(_ context.Context, c *infrav1.HostCluster) (admission.Warnings, error) {
	return nil, invalid(infrav1.GroupVersion.WithKind("HostCluster").GroupKind(), c.Name, validateHostClusterSpec(&c.Spec, field.NewPath("spec")))
}

// ValidateUpdate checks the spec and keeps a set endpoint.
func (webhook *HostCluster) ValidateUpdate(_ context.Context, old, c *infrav1.HostCluster) (admission.Warnings, error) {
	errs := validateHostClusterSpec(&c.Spec, field.NewPath("spec"))
	if old.Spec.ControlPlaneEndpoint.IsValid() && old.Spec.ControlPlaneEndpoint != c.Spec.ControlPlaneEndpoint {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "controlPlaneEndpoint"), "is immutable once set"))
	}
	return nil, invalid(infrav1.GroupVersion.WithKind("HostCluster").GroupKind(), c.Name, errs)
}

// ValidateDelete allows every delete.
func (webhook *HostCluster) ValidateDelete(context.Context, *infrav1.HostCluster) (admission.Warnings, error) {
	return nil, nil
}

func validateHostClusterSpec(spec *infrav1.HostClusterSpec, path *field.Path) field.ErrorList {
	errs := validateSelector(spec.ControlPlaneHostSelector, path.Child("controlPlaneHostSelector"))
	if e := spec.ControlPlaneEndpoint; !e.IsZero() && !e.IsValid() {
		errs = append(errs, field.Invalid(path.Child("controlPlaneEndpoint"), e, "set both host and port, or neither"))
	}
	return errs
}

// HostClusterTemplate wants a valid spec; spec.template.spec is immutable (a ClusterClass
// rotates templates by name).
type HostClusterTemplate struct{}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *HostClusterTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.HostClusterTemplate{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*infrav1.HostClusterTemplate] = &HostClusterTemplate{}

// ValidateCreate checks spec.template.spec.
func (webhook *HostClusterTemplate) ValidateCreate(_ context.Context, t *infrav1.HostClusterTemplate) (admission.Warnings, error) {
	return nil, validateHostClusterTemplate(nil, t)
}

// ValidateUpdate checks spec.template.spec and keeps it.
func (webhook *HostClusterTemplate) ValidateUpdate(_ context.Context, old, t *infrav1.HostClusterTemplate) (admission.Warnings, error) {
	return nil, validateHostClusterTemplate(&old.Spec.Template.Spec, t)
}

// ValidateDelete allows every delete.
func (webhook *HostClusterTemplate) ValidateDelete(context.Context, *infrav1.HostClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

func validateHostClusterTemplate(old *infrav1.HostClusterSpec, t *infrav1.HostClusterTemplate) error {
	return validateTemplate(infrav1.GroupVersion.WithKind("HostClusterTemplate").GroupKind(), t.Name, old, &t.Spec.Template.Spec,
		validateHostClusterSpec, "is immutable: create a new template")
}
