package hostplan

import (
	"os/exec"
	"strings"
	"testing"
)

// TestResetNetworkFilters runs the reset plan's filters on what a node shows: only the
// cluster's chains, rules and jumps leave iptables-save's output, only routes into the pod
// block are picked for deletion.
func TestResetNetworkFilters(t *testing.T) {
	saved := strings.Join([]string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":KUBE-SERVICES - [0:0]",
		":FLANNEL-POSTRTG - [0:0]",
		":CNI-HOSTPORT-DNAT - [0:0]",
		":USER-CHAIN - [0:0]",
		"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
		"-A POSTROUTING -m comment --comment \"flanneld masq\" -j FLANNEL-POSTRTG",
		"-A POSTROUTING -s 198.51.100.0/24 -j USER-CHAIN",
		"-A USER-CHAIN -j RETURN",
		"COMMIT",
	}, "\n") + "\n"
	grep := exec.Command("grep", "-v", "-E", ourChains)
	grep.Stdin = strings.NewReader(saved)
	out, err := grep.Output()
	if err != nil {
		t.Fatalf("grep: %v", err)
	}
	want := "*nat\n:PREROUTING ACCEPT [0:0]\n:USER-CHAIN - [0:0]\n-A POSTROUTING -s 198.51.100.0/24 -j USER-CHAIN\n-A USER-CHAIN -j RETURN\nCOMMIT\n"
	if string(out) != want {
		t.Errorf("left of iptables-save:\n%s\nwant:\n%s", out, want)
	}

	routes := "default via 198.18.0.1 dev eth0\n198.18.0.0/16 dev eth0 proto kernel scope link src 198.18.0.11\n198.19.1.0/24 via 198.18.0.12 dev eth0\n198.19.0.0/24 dev cni0 proto kernel scope link src 198.19.0.1\n198.19.200.0/24 via 198.18.0.13 dev eth0\n"
	awk := exec.Command("awk", "-v", "net=198.19.0.0/17", routesInBlock)
	awk.Stdin = strings.NewReader(routes)
	out, err = awk.Output()
	if err != nil {
		t.Fatalf("awk: %v", err)
	}
	if got, want := string(out), "198.19.1.0/24\n198.19.0.0/24\n"; got != want {
		t.Errorf("routes in the pod block: %q, want %q", got, want)
	}
}
