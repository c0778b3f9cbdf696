package webhooks

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// templateSpecPath is where every template kind keeps the templated kind's spec.
var templateSpecPath = field.NewPath("spec", "template", "spec")

// validateTemplate is every template kind's rule: spec.template.spec valid as the
// templated kind's spec, and, on update (old non-nil), unchanged (templates are replaced
// by name, never edited); immutable is the message refusing a change.
func validateTemplate[S any](gk schema.GroupKind, name string, old, spec *S, validate func(*S, *field.Path) field.ErrorList, immutable string) error {
	errs := validate(spec, templateSpecPath)
	if old != nil && !equality.Semantic.DeepEqual(*old, *spec) {
		errs = append(errs, field.Forbidden(templateSpecPath, immutable))
	}
	return invalid(gk, name, errs)
}
