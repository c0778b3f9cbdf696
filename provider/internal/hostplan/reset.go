package hostplan

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// containerdAddress is the socket the reset plan's ctr commands use (the hosts'
// containerd, see the preflight check).
const containerdAddress = "/run/containerd/containerd.sock"

// imageArchives is where a bootstrap downloads the image archives it imports.
const imageArchives = "/var/lib/provisioner/images"

// ourChains matches the iptables-save lines of the chains the cluster's networking made:
// their declarations, their rules and the jumps to them.
const ourChains = `KUBE-|FLANNEL|CNI-|cni0`

// routesInBlock is an awk program printing the destinations of `ip -4 route show` that lie
// in the block net (a.b.c.d/n).
const routesInBlock = `function n(a,  p) { split(a, p, "."); return ((p[1] * 256 + p[2]) * 256 + p[3]) * 256 + p[4] }
BEGIN { split(net, b, "/"); lo = n(b[1]); hi = lo + 2 ^ (32 - b[2]) }
{ split($1, d, "/"); if (d[1] ~ /^[0-9.]+$/ && n(d[1]) >= lo && n(d[1]) < hi) print $1 }`

// Reset is the plan that undoes a bootstrap: kubelet's supervisor stopped (kubelet would
// restart the static pods), kubeadm reset, every container in containerd's k8s.io
// namespace killed and removed, what kubeadm and kubelet left on disk removed, the
// cluster's networking undone (kubeadm reset leaves it: the rules kube-proxy, the kubelet
// and the pod network wrote, the pod network's routes, interfaces, CNI plugin and state),
// and the images the bootstrap imported removed with their archives. Each step tolerates
// what is already gone (a bootstrap that failed early), so the plan is Applied on a host in
// any state, and running it twice is harmless. Node binaries stay: a host claimed again
// reuses them.
func Reset() agentv1.NodePlanSpec {
	sh := func(name, script string) agentv1.Instruction {
		return agentv1.Instruction{Name: name, Command: "/bin/sh", Args: []string{"-c", "PATH=$PATH:/usr/local/bin:/usr/sbin:/sbin\n" + script}, SaveOutput: true,
			Timeout: &metav1.Duration{Duration: 5 * time.Minute}}
	}
	return agentv1.NodePlanSpec{
		Instructions: []agentv1.Instruction{
			// The agent's supervisor (no systemd on hosts): stopping it ends kubelet's process
			// group. The agent gives instructions its own path as $PROVISIONER_AGENT.
			sh("stop-kubelet", `exec "${PROVISIONER_AGENT:-provisioner-agent}" supervise stop --name kubelet`),
			sh("kubeadm-reset", `if command -v kubeadm >/dev/null 2>&1; then kubeadm reset -f --cri-socket unix://`+containerdAddress+`; else echo "no kubeadm: nothing to reset"; fi`),
			sh("remove-containers", `if ! command -v ctr >/dev/null 2>&1 || [ ! -S `+containerdAddress+` ]; then echo "no containerd: no containers"; exit 0; fi
ctr="ctr --address `+containerdAddress+` -n k8s.io"
for t in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
for t in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks rm -f "$t" >/dev/null 2>&1 || true; done
for c in $($ctr containers ls -q 2>/dev/null); do $ctr containers rm "$c" || exit 1; done
left=$($ctr containers ls -q | wc -l); [ "$left" = 0 ] || { echo "$left containers left" >&2; exit 1; }`),
			// Only chains and rules that are ours by name (KUBE-* of kube-proxy and the
			// kubelet, FLANNEL-* of the pod network, CNI-* of the CNI plugins, and the jumps
			// to them): iptables-restore replaces each table with what is left, so the
			// host's own rules stay. Routes into the pod block (flannel's host-gw routes, read
			// from its subnet file) and the pod network's interfaces go too.
			sh("remove-network", `for cmd in iptables ip6tables; do
  command -v $cmd-save >/dev/null 2>&1 || continue
  $cmd-save | grep -v -E '`+ourChains+`' | $cmd-restore || exit 1
done
net=$(sed -n 's/^FLANNEL_NETWORK=//p' /run/flannel/subnet.env 2>/dev/null)
if [ -n "$net" ]; then
  ip -4 route show | awk -v net="$net" '`+routesInBlock+`' | while read -r dst; do ip route del "$dst" || exit 1; done
fi
for link in cni0 flannel.1; do ! ip link show "$link" >/dev/null 2>&1 || ip link del "$link" || exit 1; done
rm -f /opt/cni/bin/flannel /run/flannel/subnet.env
rm -rf /var/lib/cni/networks/cbr0 /var/lib/cni/flannel
exit 0`),
			// Every image of containerd's k8s.io namespace (the kubelet's): the bundle's, the
			// ones a user loaded, and whatever the cluster's pods pulled.
			sh("remove-images", `rm -f `+imageArchives+`/*.tar; rm -rf `+imageArchives+`/loaded
if ! command -v ctr >/dev/null 2>&1 || [ ! -S `+containerdAddress+` ]; then echo "no containerd: no images"; exit 0; fi
ctr="ctr --address `+containerdAddress+` -n k8s.io"
for i in $($ctr images ls -q); do $ctr images rm "$i" >/dev/null || exit 1; done
exit 0`),
			// The directories' contents, not the directories: on a host they may be mount
			// points (the namespace test hosts bind each one), which rm cannot remove.
			sh("remove-files", `awk '$2 ~ "^/var/lib/kubelet/" {print $2}' /proc/mounts | sort -r | while read -r m; do umount "$m" || umount -l "$m"; done
for d in /etc/kubernetes /var/lib/kubelet /var/lib/etcd /etc/cni/net.d /run/kubeadm /run/cluster-api; do
  [ -d "$d" ] && find "$d" -mindepth 1 -delete
done
exit 0`),
		},
		// The API server may be gone with its host (the last control plane); every step is
		// local, so the plan needs nothing from the cluster.
		RetryStrategy:    &agentv1.RetryStrategy{MaxAttempts: 3, InitialBackoff: &metav1.Duration{Duration: 2 * time.Second}},
		ExecutionTimeout: &metav1.Duration{Duration: 15 * time.Minute},
	}
}
