// Package webhooks holds the manager's validating webhooks, one type per kind, as Cluster
// API's core/webhooks/admission does: each type is the kind's validator, registers itself
// with SetupWebhookWithManager, and gets any client it reads through from the manager
// (cmd/manager wires them). The API packages hold types only.
package webhooks

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// invalid is the Invalid error naming the object and every field in errs (nil for none).
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
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
