package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/contentref"
)

// +kubebuilder:webhook:path=/validate-agent-provisioner-dev-v1alpha1-nodeplan,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent.provisioner.dev,resources=nodeplans,verbs=create;update,versions=v1alpha1,name=vnodeplan.agent.provisioner.dev,admissionReviewVersions=v1

// NodePlan refuses a plan whose content does not match its digests, a plan outside its
// host's namespace, and a spec change while the plan is Executing unless the change
// carries the force-update annotation.
type NodePlan struct {
	// Client reads the Secrets and ConfigMaps that contentRefs name.
	Client client.Reader
}

// SetupWebhookWithManager registers the validator with the manager's webhook server.
func (webhook *NodePlan) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &agentv1.NodePlan{}).WithValidator(webhook).Complete()
}

var _ admission.Validator[*agentv1.NodePlan] = &NodePlan{}

// ValidateCreate checks the plan's placement and every digest it can check now.
func (webhook *NodePlan) ValidateCreate(ctx context.Context, plan *agentv1.NodePlan) (admission.Warnings, error) {
	errs := validatePlacement(plan)
	warnings, contentErrs := webhook.validateContent(ctx, plan)
	errs = append(errs, contentErrs...)
	return warnings, invalidPlan(plan, errs)
}

// ValidateUpdate keeps the host label, and the spec while the plan is Executing.
func (webhook *NodePlan) ValidateUpdate(ctx context.Context, old, plan *agentv1.NodePlan) (admission.Warnings, error) {
	var errs field.ErrorList
	if old.Labels[agentv1.HostLabel] != plan.Labels[agentv1.HostLabel] {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(agentv1.HostLabel), "is immutable: create a new plan for another host"))
	}
	if equality.Semantic.DeepEqual(old.Spec, plan.Spec) {
		return nil, invalidPlan(plan, errs)
	}
	if old.Status.Phase == agentv1.PhaseExecuting && plan.Annotations[agentv1.ForceUpdateAnnotation] != "true" {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf(
			"the plan is Executing (attempt %d); its spec cannot change until it ends, so a retry runs the plan that failed. Wait, cancel it (annotation %s=true), or force the change with the annotation %s=true",
			old.Status.Attempts, agentv1.CancelAnnotation, agentv1.ForceUpdateAnnotation)))
		return nil, invalidPlan(plan, errs)
	}
	warnings, contentErrs := webhook.validateContent(ctx, plan)
	return warnings, invalidPlan(plan, append(errs, contentErrs...))
}

// ValidateDelete allows every delete.
func (webhook *NodePlan) ValidateDelete(context.Context, *agentv1.NodePlan) (admission.Warnings, error) {
	return nil, nil
}

// validatePlacement: the plan names its host, and lives in that host's plan namespace
// (the only namespace its agent can read).
func validatePlacement(plan *agentv1.NodePlan) field.ErrorList {
	host := plan.Labels[agentv1.HostLabel]
	labelPath := field.NewPath("metadata", "labels").Key(agentv1.HostLabel)
	if host == "" {
		return field.ErrorList{field.Required(labelPath, "the name of the Host this plan is for")}
	}
	if want := agentv1.PlanNamespace(host); plan.Namespace != want {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), plan.Namespace, fmt.Sprintf("plans for host %q live in namespace %q", host, want))}
	}
	return nil
}

// validateContent checks every digest it can check now: inline content, and referenced
// Secrets and ConfigMaps that already exist (a missing one is a warning; the agent checks
// the digest again when it writes the file, and a URL only then).
func (webhook *NodePlan) validateContent(ctx context.Context, plan *agentv1.NodePlan) (admission.Warnings, field.ErrorList) {
	var warnings admission.Warnings
	var errs field.ErrorList
	for i := range plan.Spec.Files {
		f := &plan.Spec.Files[i]
		path := field.NewPath("spec", "files").Index(i)
		if f.Content != nil {
			content, err := f.InlineContent()
			if err != nil {
				errs = append(errs, field.Invalid(path.Child("content"), "(content)", "is not valid base64: "+err.Error()))
				continue
			}
			if f.Digest != "" && agentv1.Digest(content) != f.Digest {
				errs = append(errs, field.Invalid(path.Child("digest"), f.Digest, "does not match the content, whose digest is "+agentv1.Digest(content)))
			}
			continue
		}
		ref := f.ContentRef
		if ref == nil || ref.URL != "" {
			continue
		}
		keyRef, secret, what := ref.ConfigMapKeyRef, false, "configMapKeyRef"
		if ref.SecretKeyRef != nil {
			keyRef, secret, what = ref.SecretKeyRef, true, "secretKeyRef"
		}
		if keyRef == nil {
			continue
		}
		content, found, err := contentref.Read(ctx, webhook.Client, plan.Namespace, keyRef, secret)
		switch {
		case err != nil:
			errs = append(errs, field.InternalError(path.Child("contentRef", what), err))
		case !found:
			warnings = append(warnings, fmt.Sprintf("%s: %s %s/%s key %q not found yet; the agent checks its digest when it writes the file", path, what, plan.Namespace, keyRef.Name, keyRef.Key))
		case agentv1.Digest(content) != ref.Digest:
			errs = append(errs, field.Invalid(path.Child("contentRef", "digest"), ref.Digest, fmt.Sprintf("does not match %s %s key %q, whose digest is %s", what, keyRef.Name, keyRef.Key, agentv1.Digest(content))))
		}
	}
	return warnings, errs
}

func invalidPlan(plan *agentv1.NodePlan, errs field.ErrorList) error {
	return invalid(agentv1.GroupVersion.WithKind("NodePlan").GroupKind(), plan.Name, errs)
}
