/**
 * How kubeadm, kubelet and containerd run on a host: no systemd, cgroup v1, no
 * CAP_SYS_RESOURCE, images imported from archives (no registry). Every value here is one
 * place to change when the hand-proven settings change.
 *
 * PROVISIONAL: these follow the shared design (/work/notes/issue16-shared.md, "Kubeadm on
 * hosts") until the settings proven on the test hosts are written down
 * ("B: proven node settings"); replace from there, nowhere else.
 */

/** Registry name of the images built from the bundle's binaries; nothing is pulled from it. */
export const imageRepository = 'provisioner.local';

/** containerd's socket on a host (each host has its own, in its mount namespace). */
export const containerdSocket = '/run/containerd/containerd.sock';

/**
 * Addon phases `kubeadm init` skips: CoreDNS (its module is not one the bundle builds, so
 * there is no image of it) and kube-proxy (not proven on the test hosts).
 */
export const skippedInitPhases = ['addon/coredns', 'addon/kube-proxy'];

/** Preflight checks reported as warnings: SystemVerification refuses cgroup v1. */
export const ignoredPreflightErrors = ['SystemVerification'];

/** Where the kubeadm patches live on a host; the KubeletConfiguration patch below is written there. */
export const patchesDirectory = '/etc/kubernetes/provisioner-patches';

/**
 * KubeletConfiguration fields kubeadm's own config lacks here (a merge patch, for init
 * and join): cgroup v1 allowed, cgroupfs (containerd 1.6 answers no RuntimeConfig, so the
 * kubelet's own setting counts), and an OOM score adjustment of 0 since root may not
 * lower it without CAP_SYS_RESOURCE.
 */
export const kubeletConfigurationPatch = ['failCgroupV1: false', 'cgroupDriver: cgroupfs', 'oomScoreAdj: 0', ''].join('\n');

/** Extra kubelet flags (besides those kubeadm writes to kubeadm-flags.env). */
export const kubeletExtraArgs: { name: string; value: string }[] = [];

/** Where the HostMachine controller's plan files put the image archives (one OCI archive per image). */
export const imageArchiveDirectory = '/var/lib/provisioner/images';

/**
 * The kubelet runs under the agent's supervisor (`provisioner-agent supervise`, a
 * detached restart loop; the reset plan stops it by name): these hosts have no systemd.
 */
export const kubeletSupervisedName = 'kubelet';

/** The command the supervisor runs: waits for kubeadm's kubelet config, then runs kubelet as kubeadm's systemd drop-in would. */
export const kubeletRunScript = {
  path: '/usr/local/lib/provisioner/kubelet-run.sh',
  content: `#!/bin/sh
# Written by provisioner: the kubelet as kubeadm's systemd drop-in would run it, once kubeadm wrote its config.
while [ ! -f /var/lib/kubelet/config.yaml ]; do sleep 1; done
KUBELET_KUBEADM_ARGS=
[ -f /var/lib/kubelet/kubeadm-flags.env ] && . /var/lib/kubelet/kubeadm-flags.env
# Word splitting of the flags is wanted, as systemd does with the drop-in's variables.
exec kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml $KUBELET_KUBEADM_ARGS
`,
};

/** Starts the kubelet's supervisor; starting what already runs the same command does nothing, so a re-run plan is safe. */
export const startKubelet = `provisioner-agent supervise start --name ${kubeletSupervisedName} -- ${kubeletRunScript.path}`;

/** Imports every image archive into containerd's k8s.io namespace (where the kubelet looks), failing on the first that does not import. */
export const importImages = `for f in ${imageArchiveDirectory}/*.tar; do ctr --address ${containerdSocket} -n k8s.io images import "$f" || exit 1; done`;

/** Node name and provider ID from the host's name (the provider's cloud-config converter fills the Jinja variable). */
export const nodeName = '{{ ds.meta_data.hostname }}';
export const providerId = 'provisioner-host://{{ ds.meta_data.hostname }}';
