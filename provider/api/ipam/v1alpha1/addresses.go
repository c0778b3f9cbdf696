package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxPoolSize is the most addresses one pool may hold (its addresses are enumerated on
// every allocation).
const MaxPoolSize = 65536

// ParseEntry turns one entry of spec.addresses into its first and last address: a single
// IPv4 address, an inclusive range first-last, or a CIDR block without its network and
// broadcast addresses (a /31 or /32 keeps both).
func ParseEntry(entry string) (netip.Addr, netip.Addr, error) {
	switch {
	case strings.Contains(entry, "/"):
		prefix, err := netip.ParsePrefix(entry)
		if err != nil || !prefix.Addr().Is4() {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not an IPv4 CIDR block such as 10.0.0.0/28", entry)
		}
		if prefix.Masked() != prefix {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q has host bits set: the block is %s", entry, prefix.Masked())
		}
		first := prefix.Addr()
		last := lastOf(prefix)
		if prefix.Bits() < 31 {
			first, last = first.Next(), last.Prev()
		}
		return first, last, nil
	case strings.Contains(entry, "-"):
		a, b, _ := strings.Cut(entry, "-")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 != nil || err2 != nil || !first.Is4() || !last.Is4() {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not an IPv4 range such as 10.0.0.10-10.0.0.20", entry)
		}
		if last.Less(first) {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q ends before it starts", entry)
		}
		return first, last, nil
	default:
		addr, err := netip.ParseAddr(entry)
		if err != nil || !addr.Is4() {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not an IPv4 address, range (a-b) or CIDR block", entry)
		}
		return addr, addr, nil
	}
}

func lastOf(prefix netip.Prefix) netip.Addr {
	b := prefix.Addr().As4()
	host := uint32(1)<<(32-prefix.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func size(first, last netip.Addr) int {
	f, l := first.As4(), last.As4()
	fv := int(f[0])<<24 | int(f[1])<<16 | int(f[2])<<8 | int(f[3])
	lv := int(l[0])<<24 | int(l[1])<<16 | int(l[2])<<8 | int(l[3])
	return lv - fv + 1
}

// Each calls yield with every address the pool hands out, in spec order, each once,
// never the gateway; it stops when yield returns false. The spec must be valid.
func (s *AddressPoolSpec) Each(yield func(netip.Addr) bool) {
	gateway, _ := netip.ParseAddr(s.Gateway)
	seen := map[netip.Addr]bool{}
	for _, entry := range s.Addresses {
		first, last, err := ParseEntry(entry)
		if err != nil {
			continue
		}
		for a := first; ; a = a.Next() {
			if a != gateway && !seen[a] {
				seen[a] = true
				if !yield(a) {
					return
				}
			}
			if a == last {
				break
			}
		}
	}
}

// Count is how many addresses the pool hands out.
func (s *AddressPoolSpec) Count() int {
	n := 0
	s.Each(func(netip.Addr) bool { n++; return true })
	return n
}

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
