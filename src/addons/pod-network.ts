/**
 * The bundled pod network: flannel with the host-gw backend (a route per node to each other
 * node's pod subnet, so the nodes must share a link, as the hosts of one site or the namespace
 * test hosts do; no encapsulation, nothing the kernel must offer beyond routing and iptables).
 * These are the objects upstream's kube-flannel.yml declares, written for one image that
 * holds both flanneld and the flannel CNI plugin (built from the bundle; see
 * src/nodeartifacts/node-images.ts), so its init container and the daemon share it:
 *
 *  - namespace kube-flannel (privileged pod security: the daemon changes the node's routes);
 *  - the flannel ServiceAccount and its ClusterRole (read pods and nodes, patch node status);
 *  - ConfigMap kube-flannel-cfg: the CNI config (flannel delegating to the bridge plugin,
 *    then portmap) and the network config (the pod block, the backend);
 *  - DaemonSet kube-flannel-ds: copies /flannel into the node's /opt/cni/bin and then the CNI
 *    config into /etc/cni/net.d (which makes the node Ready), in one init container where
 *    upstream has two, then runs flanneld, which takes the node's subnet from
 *    Node.spec.podCIDR (kube-controller-manager allocates it from the cluster's pod block, as
 *    kubeadm configures it) and publishes it in /run/flannel/subnet.env for the plugin.
 *
 * flanneld is told the node's own address as its interface (`--iface=$(POD_IP)`: a
 * host-network pod's IP is the node's), since it otherwise looks for the default route's
 * interface, which a host on an isolated network may not have.
 */
import type { ConfigMap, KubeObject } from '../platforms/types.js';

/** The pod network's namespace in the workload cluster (upstream's). */
export const podNetworkNamespace = 'kube-flannel';

/** Where the CNI config lands on each node; a node is Ready once it is there. */
export const flannelCniConfigPath = '/etc/cni/net.d/10-flannel.conflist';

export interface PodNetworkOptions {
  /** The cluster's IPv4 pod block (networking.podCIDRs[0]); each node gets a /24 of it. */
  podCidr: string;
  /** The image with /opt/bin/flanneld, /flannel, sh and cp, e.g. `provisioner.local/flannel:v0.28.10`. */
  image: string;
  /** Pull policy of that image. `Never` where nodes import their images. */
  imagePullPolicy: 'Never' | 'IfNotPresent';
}

/** The objects of the flannel pod network, in apply order (namespace first). */
export function flannelObjects(options: PodNetworkOptions): KubeObject[] {
  const namespace = podNetworkNamespace;
  const labels = { 'k8s-app': 'flannel', app: 'flannel', tier: 'node' };
  const cniConfig = {
    name: 'cbr0',
    cniVersion: '0.3.1',
    plugins: [
      { type: 'flannel', delegate: { hairpinMode: true, isDefaultGateway: true } },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
  const netConfig = { Network: options.podCidr, EnableNFTables: false, Backend: { Type: 'host-gw' } };
  const config: ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'kube-flannel-cfg', namespace, labels },
    data: { 'cni-conf.json': `${JSON.stringify(cniConfig, null, 2)}\n`, 'net-conf.json': `${JSON.stringify(netConfig, null, 2)}\n` },
  };
  const image = { image: options.image, imagePullPolicy: options.imagePullPolicy };
  const daemonSet = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'kube-flannel-ds', namespace, labels },
    spec: {
      selector: { matchLabels: { app: 'flannel' } },
      template: {
        metadata: { labels },
        spec: {
          affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] }] } } },
          hostNetwork: true,
          priorityClassName: 'system-node-critical',
          tolerations: [{ operator: 'Exists', effect: 'NoSchedule' }],
          serviceAccountName: 'flannel',
          // One init container for both copies, plugin first: the config is what makes the node
          // Ready, so the plugin is in place by then. Two would put the kubelet's relist (once a
          // second) and a container start between them: the pod network's sandbox to Ready took
          // 1.6-3.8 s with two, 0.4-0.9 s with one (docs/benchmarks.md).
          initContainers: [
            {
              name: 'install-cni',
              ...image,
              command: ['/bin/sh', '-c'],
              args: [`cp -f /flannel /opt/cni/bin/flannel && cp -f /etc/kube-flannel/cni-conf.json ${flannelCniConfigPath}`],
              volumeMounts: [{ name: 'cni-plugin', mountPath: '/opt/cni/bin' }, { name: 'cni', mountPath: '/etc/cni/net.d' }, { name: 'flannel-cfg', mountPath: '/etc/kube-flannel/' }],
            },
          ],
          containers: [
            {
              name: 'kube-flannel',
              ...image,
              command: ['/opt/bin/flanneld'],
              args: ['--ip-masq', '--kube-subnet-mgr', '--iface=$(POD_IP)'],
              resources: { requests: { cpu: '100m', memory: '50Mi' } },
              securityContext: { privileged: false, capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } },
              env: [
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                { name: 'EVENT_QUEUE_DEPTH', value: '5000' },
                { name: 'CONT_WHEN_CACHE_NOT_READY', value: 'false' },
              ],
              volumeMounts: [
                { name: 'run', mountPath: '/run/flannel' },
                { name: 'flannel-cfg', mountPath: '/etc/kube-flannel/' },
                { name: 'xtables-lock', mountPath: '/run/xtables.lock' },
              ],
            },
          ],
          volumes: [
            { name: 'run', hostPath: { path: '/run/flannel' } },
            { name: 'cni-plugin', hostPath: { path: '/opt/cni/bin' } },
            { name: 'cni', hostPath: { path: '/etc/cni/net.d' } },
            { name: 'flannel-cfg', configMap: { name: 'kube-flannel-cfg' } },
            { name: 'xtables-lock', hostPath: { path: '/run/xtables.lock', type: 'FileOrCreate' } },
          ],
        },
      },
    },
  };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: { 'k8s-app': 'flannel', 'pod-security.kubernetes.io/enforce': 'privileged' } } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'flannel', namespace, labels } } as KubeObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'flannel', labels },
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
      ],
    } as KubeObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'flannel', labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'flannel' },
      subjects: [{ kind: 'ServiceAccount', name: 'flannel', namespace }],
    } as KubeObject,
    config,
    daemonSet as KubeObject,
  ];
}
