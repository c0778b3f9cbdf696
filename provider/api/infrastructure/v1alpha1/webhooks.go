package v1alpha1

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostclusters,verbs=create;update,versions=v1alpha1,name=vhostcluster.infrastructure.provisioner.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostclustertemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostclustertemplates,verbs=create;update,versions=v1alpha1,name=vhostclustertemplate.infrastructure.provisioner.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostmachines,verbs=create;update,versions=v1alpha1,name=vhostmachine.infrastructure.provisioner.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infrastructure-provisioner-dev-v1alpha1-hostmachinetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.provisioner.dev,resources=hostmachinetemplates,verbs=create;update,versions=v1alpha1,name=vhostmachinetemplate.infrastructure.provisioner.dev,admissionReviewVersions=v1

// SetupWebhooksWithManager registers the validating webhooks of every kind of this package.
func SetupWebhooksWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &HostCluster{}).WithValidator(hostClusterValidator{}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &HostClusterTemplate{}).WithValidator(hostClusterTemplateValidator).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &HostMachine{}).WithValidator(hostMachineValidator{}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &HostMachineTemplate{}).WithValidator(hostMachineTemplateValidator).Complete()
}

// validateSelector refuses a selector that cannot be turned into a label selector (bad
// operator, values with Exists, invalid keys or values): the CRD schema cannot check it,
// and a bad one would only show later as a machine that never finds a Host.
func validateSelector(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return field.ErrorList{field.Invalid(path, sel, err.Error())}
	}
	return nil
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: GroupVersion.Group, Kind: kind}, name, errs)
}

// --- HostCluster: a valid selector; the endpoint does not change once set (the
// cluster's certificates and kubeconfigs name it).

type hostClusterValidator struct{}

func validateHostClusterSpec(spec *HostClusterSpec, path *field.Path) field.ErrorList {
	errs := validateSelector(spec.ControlPlaneHostSelector, path.Child("controlPlaneHostSelector"))
	if e := spec.ControlPlaneEndpoint; !e.IsZero() && !e.IsValid() {
		errs = append(errs, field.Invalid(path.Child("controlPlaneEndpoint"), e, "set both host and port, or neither"))
	}
	return errs
}

func (hostClusterValidator) ValidateCreate(_ context.Context, c *HostCluster) (admission.Warnings, error) {
	return nil, invalid("HostCluster", c.Name, validateHostClusterSpec(&c.Spec, field.NewPath("spec")))
}

func (hostClusterValidator) ValidateUpdate(_ context.Context, old, c *HostCluster) (admission.Warnings, error) {
	errs := validateHostClusterSpec(&c.Spec, field.NewPath("spec"))
	if old.Spec.ControlPlaneEndpoint.IsValid() && old.Spec.ControlPlaneEndpoint != c.Spec.ControlPlaneEndpoint {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "controlPlaneEndpoint"), "is immutable once set"))
	}
	return nil, invalid("HostCluster", c.Name, errs)
}

func (hostClusterValidator) ValidateDelete(context.Context, *HostCluster) (admission.Warnings, error) {
	return nil, nil
}

// --- HostClusterTemplate: a valid spec; spec.template.spec is immutable (a ClusterClass
// rotates templates by name).

var hostClusterTemplateValidator = templateValidator[*HostClusterTemplate, HostClusterSpec]{
	kind:      "HostClusterTemplate",
	spec:      func(t *HostClusterTemplate) *HostClusterSpec { return &t.Spec.Template.Spec },
	validate:  validateHostClusterSpec,
	immutable: "is immutable: create a new template",
}

// --- HostMachine: a valid selector; what chose and bootstrapped the Host does not change
// (a claimed Host would no longer match), and providerID is set once.

type hostMachineValidator struct{}

func validateHostMachineSpec(spec *HostMachineSpec, path *field.Path) field.ErrorList {
	return validateSelector(&spec.HostSelector, path.Child("hostSelector"))
}

func (hostMachineValidator) ValidateCreate(_ context.Context, m *HostMachine) (admission.Warnings, error) {
	return nil, invalid("HostMachine", m.Name, validateHostMachineSpec(&m.Spec, field.NewPath("spec")))
}

func (hostMachineValidator) ValidateUpdate(_ context.Context, old, m *HostMachine) (admission.Warnings, error) {
	path := field.NewPath("spec")
	errs := validateHostMachineSpec(&m.Spec, path)
	if !equality.Semantic.DeepEqual(old.Spec.HostSelector, m.Spec.HostSelector) {
		errs = append(errs, field.Forbidden(path.Child("hostSelector"), "is immutable"))
	}
	if !equality.Semantic.DeepEqual(old.Spec.Artifacts, m.Spec.Artifacts) {
		errs = append(errs, field.Forbidden(path.Child("artifacts"), "is immutable"))
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != m.Spec.ProviderID {
		errs = append(errs, field.Forbidden(path.Child("providerID"), fmt.Sprintf("is immutable once set (%s)", old.Spec.ProviderID)))
	}
	return nil, invalid("HostMachine", m.Name, errs)
}

func (hostMachineValidator) ValidateDelete(context.Context, *HostMachine) (admission.Warnings, error) {
	return nil, nil
}

// --- HostMachineTemplate: a valid spec; spec.template.spec is immutable (Cluster API
// rolls machines out by pointing at a new template, never by changing one).

var hostMachineTemplateValidator = templateValidator[*HostMachineTemplate, HostMachineSpec]{
	kind:      "HostMachineTemplate",
	spec:      func(t *HostMachineTemplate) *HostMachineSpec { return &t.Spec.Template.Spec },
	validate:  validateHostMachineSpec,
	immutable: "is immutable: create a new template and point the control plane or machine deployment at it",
}

// templateValidator serves every template kind: spec.template.spec valid as the templated
// kind's spec, and unchanged by an update (templates are replaced by name, never edited).
type templateValidator[T client.Object, S any] struct {
	kind string
	// spec is the template's spec.template.spec.
	spec     func(T) *S
	validate func(*S, *field.Path) field.ErrorList
	// immutable is the message refusing a changed spec.template.spec.
	immutable string
}

var templateSpecPath = field.NewPath("spec", "template", "spec")

func (v templateValidator[T, S]) ValidateCreate(_ context.Context, t T) (admission.Warnings, error) {
	return nil, invalid(v.kind, t.GetName(), v.validate(v.spec(t), templateSpecPath))
}

func (v templateValidator[T, S]) ValidateUpdate(_ context.Context, old, t T) (admission.Warnings, error) {
	errs := v.validate(v.spec(t), templateSpecPath)
	if !equality.Semantic.DeepEqual(*v.spec(old), *v.spec(t)) {
		errs = append(errs, field.Forbidden(templateSpecPath, v.immutable))
	}
	return nil, invalid(v.kind, t.GetName(), errs)
}

func (templateValidator[T, S]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
