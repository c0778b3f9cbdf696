package v1alpha1

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Digest is the "sha256:<hex>" digest of content, as plans write it.
func Digest(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// InlineContent is a file's inline content, decoded.
func (f *PlanFile) InlineContent() ([]byte, error) {
	if f.Content == nil {
		return nil, nil
	}
	if f.Encoding == "base64" {
		return base64.StdEncoding.DecodeString(*f.Content)
	}
	return []byte(*f.Content), nil
}

// ReadKeyReference returns one key of a Secret or ConfigMap (binaryData included).
// found is false when the object or the key does not exist.
func ReadKeyReference(ctx context.Context, c client.Reader, namespace string, ref *KeyReference, secret bool) (content []byte, found bool, err error) {
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	if secret {
		var s corev1.Secret
		if err := c.Get(ctx, key, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			return nil, false, err
		}
		v, ok := s.Data[ref.Key]
		return v, ok, nil
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if v, ok := cm.Data[ref.Key]; ok {
		return []byte(v), true, nil
	}
	v, ok := cm.BinaryData[ref.Key]
	return v, ok, nil
}

// +kubebuilder:webhook:path=/validate-agent-provisioner-dev-v1alpha1-nodeplan,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent.provisioner.dev,resources=nodeplans,verbs=create;update,versions=v1alpha1,name=vnodeplan.agent.provisioner.dev,admissionReviewVersions=v1

// NodePlanValidator refuses a plan whose content does not match its digests, a plan
// outside its host's namespace, and a spec change while the plan is Executing unless
// the change carries the force-update annotation.
// +kubebuilder:object:generate=false
type NodePlanValidator struct {
	// Reader reads the Secrets and ConfigMaps that contentRefs name.
	Reader client.Reader
}

// SetupNodePlanWebhookWithManager registers the validator with the manager's webhook server.
func SetupNodePlanWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &NodePlan{}).
		WithValidator(&NodePlanValidator{Reader: mgr.GetAPIReader()}).
		Complete()
}

var _ admission.Validator[*NodePlan] = &NodePlanValidator{}

func (v *NodePlanValidator) ValidateCreate(ctx context.Context, plan *NodePlan) (admission.Warnings, error) {
	errs := validatePlacement(plan)
	warnings, contentErrs := v.validateContent(ctx, plan)
	errs = append(errs, contentErrs...)
	return warnings, toInvalid(plan, errs)
}

func (v *NodePlanValidator) ValidateUpdate(ctx context.Context, old, plan *NodePlan) (admission.Warnings, error) {
	var errs field.ErrorList
	if old.Labels[HostLabel] != plan.Labels[HostLabel] {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(HostLabel), "is immutable: create a new plan for another host"))
	}
	if equality.Semantic.DeepEqual(old.Spec, plan.Spec) {
		return nil, toInvalid(plan, errs)
	}
	if old.Status.Phase == PhaseExecuting && plan.Annotations[ForceUpdateAnnotation] != "true" {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf(
			"the plan is Executing (attempt %d); its spec cannot change until it ends, so a retry runs the plan that failed. Wait, cancel it (annotation %s=true), or force the change with the annotation %s=true",
			old.Status.Attempts, CancelAnnotation, ForceUpdateAnnotation)))
		return nil, toInvalid(plan, errs)
	}
	warnings, contentErrs := v.validateContent(ctx, plan)
	return warnings, toInvalid(plan, append(errs, contentErrs...))
}

func (v *NodePlanValidator) ValidateDelete(context.Context, *NodePlan) (admission.Warnings, error) {
	return nil, nil
}

// validatePlacement: the plan names its host, and lives in that host's plan namespace
// (the only namespace its agent can read).
func validatePlacement(plan *NodePlan) field.ErrorList {
	host := plan.Labels[HostLabel]
	labelPath := field.NewPath("metadata", "labels").Key(HostLabel)
	if host == "" {
		return field.ErrorList{field.Required(labelPath, "the name of the Host this plan is for")}
	}
	if want := PlanNamespace(host); plan.Namespace != want {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), plan.Namespace, fmt.Sprintf("plans for host %q live in namespace %q", host, want))}
	}
	return nil
}

// validateContent checks every digest it can check now: inline content, and referenced
// Secrets and ConfigMaps that already exist (a missing one is a warning; the agent checks
// the digest again when it writes the file, and a URL only then).
func (v *NodePlanValidator) validateContent(ctx context.Context, plan *NodePlan) (admission.Warnings, field.ErrorList) {
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
			if f.Digest != "" && Digest(content) != f.Digest {
				errs = append(errs, field.Invalid(path.Child("digest"), f.Digest, "does not match the content, whose digest is "+Digest(content)))
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
		content, found, err := ReadKeyReference(ctx, v.Reader, plan.Namespace, keyRef, secret)
		switch {
		case err != nil:
			errs = append(errs, field.InternalError(path.Child("contentRef", what), err))
		case !found:
			warnings = append(warnings, fmt.Sprintf("%s: %s %s/%s key %q not found yet; the agent checks its digest when it writes the file", path, what, plan.Namespace, keyRef.Name, keyRef.Key))
		case Digest(content) != ref.Digest:
			errs = append(errs, field.Invalid(path.Child("contentRef", "digest"), ref.Digest, fmt.Sprintf("does not match %s %s key %q, whose digest is %s", what, keyRef.Name, keyRef.Key, Digest(content))))
		}
	}
	return warnings, errs
}

func toInvalid(plan *NodePlan, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(GroupVersion.WithKind("NodePlan").GroupKind(), plan.Name, errs)
}
