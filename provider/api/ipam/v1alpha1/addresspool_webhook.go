package v1alpha1

import (
	"context"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:path=/validate-ipam-provisioner-dev-v1alpha1-addresspool,mutating=false,failurePolicy=fail,sideEffects=None,groups=ipam.provisioner.dev,resources=addresspools,verbs=create;update,versions=v1alpha1,name=vaddresspool.ipam.provisioner.dev,admissionReviewVersions=v1

// SetupWebhookWithManager registers the AddressPool's validating webhook.
func SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &AddressPool{}).WithValidator(addressPoolValidator{}).Complete()
}

type addressPoolValidator struct{}

// ValidateSpec checks what the CRD schema cannot: every entry parses, the pool holds at
// most MaxPoolSize addresses and at least one besides the gateway, the gateway is an
// IPv4 address in the prefix of every address.
func ValidateSpec(spec *AddressPoolSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	total := 0
	var gateway netip.Addr
	if spec.Gateway != "" {
		var err error
		if gateway, err = netip.ParseAddr(spec.Gateway); err != nil || !gateway.Is4() {
			errs = append(errs, field.Invalid(path.Child("gateway"), spec.Gateway, "not an IPv4 address"))
			gateway = netip.Addr{}
		}
	}
	for i, entry := range spec.Addresses {
		at := path.Child("addresses").Index(i)
		first, last, err := ParseEntry(entry)
		if err != nil {
			errs = append(errs, field.Invalid(at, entry, err.Error()))
			continue
		}
		if total += size(first, last); total > MaxPoolSize {
			errs = append(errs, field.TooMany(path.Child("addresses"), total, MaxPoolSize))
			return errs
		}
		if gateway.IsValid() && spec.Prefix >= 1 && spec.Prefix <= 32 {
			network := netip.PrefixFrom(gateway, int(spec.Prefix)).Masked()
			if !network.Contains(first) || !network.Contains(last) {
				errs = append(errs, field.Invalid(at, entry, fmt.Sprintf("outside %s, the gateway's network with prefix %d", network, spec.Prefix)))
			}
		}
	}
	if len(errs) == 0 && spec.Count() == 0 {
		errs = append(errs, field.Invalid(path.Child("addresses"), spec.Addresses, "holds no address besides the gateway"))
	}
	return errs
}

func invalid(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: GroupVersion.Group, Kind: Kind}, name, errs)
}

func (addressPoolValidator) ValidateCreate(_ context.Context, p *AddressPool) (admission.Warnings, error) {
	return nil, invalid(p.Name, ValidateSpec(&p.Spec, field.NewPath("spec")))
}

// ValidateUpdate allows the pool to change (grow, or shrink: addresses already bound stay
// with their claims until released).
func (addressPoolValidator) ValidateUpdate(_ context.Context, _, p *AddressPool) (admission.Warnings, error) {
	return nil, invalid(p.Name, ValidateSpec(&p.Spec, field.NewPath("spec")))
}

func (addressPoolValidator) ValidateDelete(context.Context, *AddressPool) (admission.Warnings, error) {
	return nil, nil
}
