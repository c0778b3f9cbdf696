package v1alpha1

import (
	"net/netip"
	"strings"
	"testing"
)

func TestEachHandsOutEveryAddressOnceInOrderNeverTheGateway(t *testing.T) {
	spec := AddressPoolSpec{Addresses: []string{"10.0.0.8/30", "10.0.0.1-10.0.0.3", "10.0.0.9", "10.0.0.40/31"}, Prefix: 24, Gateway: "10.0.0.2"}
	var got []string
	spec.Each(func(a netip.Addr) bool { got = append(got, a.String()); return true })
	want := "10.0.0.9 10.0.0.10 10.0.0.1 10.0.0.3 10.0.0.40 10.0.0.41"
	if strings.Join(got, " ") != want {
		t.Errorf("addresses %v, want %s (a /30 without network and broadcast, the gateway skipped, duplicates once, a /31 whole)", got, want)
	}
	if spec.Count() != 6 {
		t.Errorf("Count %d, want 6", spec.Count())
	}
	var first []string
	spec.Each(func(a netip.Addr) bool { first = append(first, a.String()); return false })
	if len(first) != 1 {
		t.Errorf("Each went on after yield returned false: %v", first)
	}
}

func TestParseEntryRefusesWhatIsNotAnIPv4AddressRangeOrBlock(t *testing.T) {
	for entry, want := range map[string]string{
		"10.0.0.300":        "not an IPv4 address",
		"fd00::1":           "not an IPv4 address",
		"10.0.0.9-10.0.0.1": "ends before it starts",
		"10.0.0.1-x":        "not an IPv4 range",
		"10.0.0.1/24":       "host bits set",
		"fd00::/64":         "not an IPv4 CIDR block",
	} {
		if _, _, err := ParseEntry(entry); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error saying %q", entry, err, want)
		}
	}
}
