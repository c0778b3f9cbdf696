/**
 * How kubeadm, kubelet and containerd run on a host: no systemd, cgroup v1, no
 * CAP_SYS_RESOURCE, images imported from archives (no registry). Every value here is one
 * place to change. They are the settings proven by hand on the namespace test hosts
 * (kubeadm and kubelet v1.36.3 from the bundle, containerd 1.6.20 from Debian): `kubeadm
 * init` on one host and `join` of another gave two Ready nodes and a Running pod.
 *
 * Per-host values come from the host through the provider's cloud-config variables
 * (`{{ ds.meta_data.hostname }}`: the Host's name, `{{ ds.meta_data.local_ipv4 }}`: its
 * registered address) or from the host's own kubelet flags file (`hostKubeletFlagsFiles`):
 * the namespace test hosts put their own `--cgroup-root` there, since several kubelets
 * share one kernel's cgroups.
 */
import { corednsImageTag, flannelImageRef, kubeadmCorednsTag } from '../../nodeartifacts/node-images.js';
import type { ClusterConfiguration, KubeletArg } from '../types.js';

/** The bundled pod network's image, imported on every node (`importedArchives`). */
export const flannelImage = flannelImageRef;

/** Registry name of the images built from the bundle's binaries; nothing is pulled from it. */
export const imageRepository = 'provisioner.local';

/** containerd's socket on a host (each namespace test host has its own, in its mount namespace). */
export const containerdSocket = '/run/containerd/containerd.sock';

/**
 * The keys of the cluster's certificates (the CAs and service-account key Cluster API makes,
 * every certificate and kubeconfig `kubeadm init` and a control-plane join make): ECDSA
 * P-256. kubeadm's default, RSA-2048, costs about 300 ms of CPU per key, and `kubeadm init`
 * makes more than ten of them on the host while Cluster API makes four before the
 * control-plane plan exists. Needs Kubernetes v1.31 or later.
 */
export const encryptionAlgorithm = 'ECDSA-P256';

/**
 * The cluster configuration of every hosts cluster: images from `imageRepository` (kubeadm
 * names CoreDNS `<repository>/coredns:<tag>` there), CoreDNS at the tag the bundle builds
 * when it is not the one kubeadm defaults to, and `encryptionAlgorithm`. kubeadm's add-on
 * phases both run: kube-proxy (iptables mode; its image carries iptables) and CoreDNS.
 */
export function clusterConfiguration(): ClusterConfiguration {
  return { imageRepository, encryptionAlgorithm, ...(corednsImageTag === kubeadmCorednsTag ? {} : { dns: { imageTag: corednsImageTag } }) };
}

/**
 * kube-proxy's settings, appended to the kubeadm config `kubeadm init` reads (Cluster API's
 * KubeadmConfigSpec has no KubeProxyConfiguration), which kubeadm's addon/kube-proxy phase
 * puts into the kube-proxy ConfigMap. `conntrack.maxPerCore: 0` leaves the host's conntrack
 * table size as it is: kube-proxy otherwise raises nf_conntrack_max, which a host in a network
 * namespace (a container, a test host) may not write, and fails (kind sets the same).
 * Appended once, so a retried plan's config is the same as the first attempt's.
 */
export const kubeProxyConfiguration = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 0\n';
export const appendKubeProxyConfiguration =
  `grep -q '^kind: KubeProxyConfiguration' /run/kubeadm/kubeadm.yaml || printf -- '${`\n---\n${kubeProxyConfiguration}`.replaceAll('\n', '\\n')}' >> /run/kubeadm/kubeadm.yaml`;

/** Preflight checks reported as warnings: SystemVerification refuses cgroup v1; the only one proven necessary. */
export const ignoredPreflightErrors = ['SystemVerification'];

/** Images are imported before kubeadm runs; a missing one is an error, never a pull. */
export const imagePullPolicy = 'Never';

/** Node name, provider ID and node IP from the Host (the provider fills the cloud-config's variables). */
export const hostName = '{{ ds.meta_data.hostname }}';
export const hostAddress = '{{ ds.meta_data.local_ipv4 }}';
const providerId = `provisioner-host://${hostName}`;

/**
 * Kubelet flags. kubeadm's generated config says cgroupDriver systemd and Cluster API's
 * KubeadmConfigSpec has no KubeletConfiguration, so flags (which win over the config file)
 * carry: cgroup v1 allowed, cgroupfs (containerd 1.6 answers no RuntimeConfig, so the
 * kubelet's own setting counts), an OOM score adjustment of 0 (root may not lower it
 * without CAP_SYS_RESOURCE), the host's address as the node IP, and the provider ID that
 * matches the Node to its Machine.
 */
export const kubeletExtraArgs: KubeletArg[] = [
  { name: 'fail-cgroupv1', value: 'false' },
  { name: 'cgroup-driver', value: 'cgroupfs' },
  { name: 'oom-score-adj', value: '0' },
  { name: 'node-ip', value: hostAddress },
  { name: 'provider-id', value: providerId },
];

/** Where the HostMachine controller's plan downloads the image archives (one OCI archive per image). */
export const imageArchiveDirectory = '/var/lib/provisioner/images';

/**
 * What each role imports: control-plane hosts every archive (static pods, etcd, and the add-ons
 * any node may run), workers the pod sandbox and the add-ons: kube-proxy (kubeadm's DaemonSet on
 * every node; in kubernetes.tar with the other three Kubernetes images, which share its `kube`
 * layer, so they cost a worker nothing more), the pod network's DaemonSet, and CoreDNS (its
 * Deployment runs where it fits).
 */
export const importedArchives = { controlPlane: ['*.tar'], worker: ['pause.tar', 'kubernetes.tar', 'flannel.tar', 'coredns.tar'] } as const;

/** Where the images a user loaded (`provisioner images load`) are downloaded: every node imports them. */
export const loadedArchiveDirectory = `${imageArchiveDirectory}/loaded`;

/** Imports an image archive into containerd's k8s.io namespace (where the kubelet looks). */
export const importArchive = (file: string) => `ctr --address ${containerdSocket} -n k8s.io images import "${file}"`;

/**
 * Imports the role's image archives and the loaded ones, failing on the first that does not
 * import (a loaded pattern that matches nothing is skipped).
 */
export function importImages(role: keyof typeof importedArchives): string {
  const files = [...importedArchives[role].map((file) => `${imageArchiveDirectory}/${file}`), `${loadedArchiveDirectory}/*.tar`].join(' ');
  return `for f in ${files}; do [ -e "$f" ] || continue; ${importArchive('$f')} || exit 1; done`;
}

/**
 * Files with the host's own kubelet flags (`KUBELET_EXTRA_ARGS=…`), read in this order if
 * present: `/etc/default/kubelet` as kubeadm's systemd unit reads it, then one under
 * /var/lib/provisioner, which namespace test hosts have per host.
 */
const hostKubeletFlagsFiles = ['/etc/default/kubelet', '/var/lib/provisioner/kubelet.env'];

/** The agent, as plan instructions find it: the agent sets PROVISIONER_AGENT to its own path; else from PATH. */
const agent = '"${PROVISIONER_AGENT:-provisioner-agent}"';

/**
 * The kubelet runs under the agent's supervisor (`provisioner-agent supervise`, a
 * detached restart loop; the reset plan stops it by this name): these hosts have no systemd.
 */
export const kubeletSupervisedName = 'kubelet';

/** The command the supervisor runs: waits for kubeadm's kubelet files, then runs the kubelet as kubeadm's systemd drop-in would. */
export const kubeletRunScript = {
  path: '/usr/local/lib/provisioner/kubelet-run.sh',
  content: `#!/bin/sh
# Written by provisioner: the kubelet as kubeadm's systemd drop-in runs it, once kubeadm wrote its files
# (the wait stands in for systemd's restart-until-configured). A tenth of a second, where sleep
# takes fractions (GNU, busybox), since kubeadm init and join wait for this kubelet.
until [ -f /var/lib/kubelet/config.yaml ] && [ -f /var/lib/kubelet/kubeadm-flags.env ]; do sleep 0.1 2>/dev/null || sleep 1; done
KUBELET_KUBEADM_ARGS=
KUBELET_EXTRA_ARGS=
. /var/lib/kubelet/kubeadm-flags.env
# The host's own flags, e.g. --cgroup-root where several kubelets share one kernel.
${hostKubeletFlagsFiles.map((f) => `[ -f ${f} ] && . ${f}`).join('\n')}
# Word splitting of the flags is wanted, as systemd does with the drop-in's variables.
exec /usr/local/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`,
};

/** Starts the kubelet's supervisor before kubeadm (kubeadm's own `systemctl` calls only warn); the same command again is a no-op, so a retried plan is safe. */
export const startKubelet = `${agent} supervise start --name ${kubeletSupervisedName} -- ${kubeletRunScript.path}`;

/**
 * Files a `kubeadm join` writes as it goes (discovery's CA, the bootstrap kubeconfig, the
 * kubelet's config, and the kubeconfig the kubelet writes after its TLS bootstrap); any of
 * them fails a second join's preflight (and the kubelet they start holds port 10250).
 */
const joinLeftovers = ['/etc/kubernetes/pki/ca.crt', '/etc/kubernetes/bootstrap-kubelet.conf', '/etc/kubernetes/kubelet.conf', '/var/lib/kubelet/config.yaml'];

/** Cluster API's marker of a kubeadm command that succeeded (its runcmd line writes it). */
const successMarker = '/run/cluster-api/bootstrap-success.complete';

/**
 * The agent provider's record of the kubeadm config this very plan ran kubeadm with
 * (provider/internal/hostplan, KubeadmRecord; sha256sum's format): it tells this plan's
 * interrupted join from another cluster's leftovers. The provider skips a kubeadm line
 * whose marker and record match.
 */
const kubeadmRecord = '/run/cluster-api/provisioner-kubeadm.sha256';

/**
 * A worker's first instruction settles what an earlier attempt of its plan left (the plan
 * is retried after its agent was killed mid-join, which kills the join):
 * - the join succeeded (marker and record): nothing to do, the join line is skipped;
 * - this plan's join got through the kubelet's TLS bootstrap (the kubelet wrote its
 *   kubeconfig; the Node exists and may be Ready, so a second join would be refused):
 *   the join counts as done, the marker is written, the join line is skipped;
 * - else any of the join's files, or another cluster's marker: undone (kubelet stopped,
 *   `kubeadm reset`), so the join runs again from the start.
 * Workers only: on control-plane machines the bootstrap data writes the cluster's CA into
 * /etc/kubernetes/pki, which `kubeadm reset` would delete.
 */
export const undoUnfinishedJoin =
  `if sha256sum -c --status ${kubeadmRecord} 2>/dev/null; then ours=1; else ours=; fi; ` +
  `if [ -n "$ours" ] && [ -f ${successMarker} ]; then echo "this plan's join succeeded in an earlier attempt"; ` +
  `elif [ -n "$ours" ] && [ -f /etc/kubernetes/kubelet.conf ]; then echo "this plan's interrupted join got through the kubelet's TLS bootstrap: the join is done"; echo success > ${successMarker}; ` +
  `elif [ -f ${successMarker} ] || ${joinLeftovers.map((f) => `[ -f ${f} ]`).join(' || ')}; then echo "undoing an unfinished join"; ` +
  `${agent} supervise stop --name ${kubeletSupervisedName}; kubeadm reset -f --cri-socket unix://${containerdSocket} && rm -f ${successMarker} ${kubeadmRecord}; fi`;

