package hostplan

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentv1 "provisioner.dev/provider/api/v1alpha1"
)

// containerdAddress is the socket the reset plan's ctr commands use (the hosts'
// containerd, see the preflight check).
const containerdAddress = "/run/containerd/containerd.sock"

// Reset is the plan that undoes a bootstrap: kubelet's supervisor stopped (kubelet would
// restart the static pods), kubeadm reset, every container in containerd's k8s.io
// namespace killed and removed, and what kubeadm and kubelet left on disk removed. Each
// step tolerates what is already gone (a bootstrap that failed early), so the plan is
// Applied on a host in any state, and running it twice is harmless. Image archives and
// node binaries stay: a host claimed again reuses them.
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
