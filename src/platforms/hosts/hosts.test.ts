import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { renderNewInstallConfig } from '../../assets/index.js';
import { validateInstallConfigText, type InstallConfig } from '../../config/index.js';
import { ConfigError, InfrastructureError, MachinesError } from '../../errors.js';
import { generateManifests, installConfigSchema } from '../index.js';
import { hostArtifacts } from './artifacts.js';
import { appendKubeProxyConfiguration, importImages } from './node-settings.js';
import { assignHosts, hostView, planFailure, poolDemands, supplyLine, type HostView } from './registration.js';

const base = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
networking:
  podCIDRs: [198.19.0.0/17]
  serviceCIDRs: [198.19.128.0/20]
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
    platform:
      hosts:
        hostSelector:
          matchLabels:
            example.com/disk: ssd
platform:
  hosts: {}
`;
const withListen = `${base}bootstrap:\n  listenAddress: 198.18.0.1\n`;

function load(text: string): InstallConfig {
  return validateInstallConfigText(text, { schema: installConfigSchema }).config;
}

function configError(text: string): ConfigError {
  try {
    load(text);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('the config was accepted');
}

describe('hosts install config', () => {
  it('requires bootstrap.listenAddress, naming the field and the next step', () => {
    const error = configError(base);
    const problem = error.problems.find((p) => p.path === 'bootstrap.listenAddress');
    expect(problem?.message).toMatch(/required on the hosts platform/);
    expect(problem?.hint).toMatch(/set bootstrap\.listenAddress to an address of this machine the hosts can reach/);
    expect(error.problems).toHaveLength(1);
  });

  it('takes a config with the listen address, and fills each pool\'s selector', () => {
    const config = load(withListen);
    expect(config.machinePools[0]!.platform.hosts).toEqual({ hostSelector: { matchLabels: {} } });
    expect(config.machinePools[1]!.platform.hosts).toEqual({ hostSelector: { matchLabels: { 'example.com/disk': 'ssd' } } });
  });

  it('refuses a selector label key that is no qualified name', () => {
    const error = configError(withListen.replace('example.com/disk: ssd', '"bad key!": ssd'));
    expect(error.problems.map((p) => p.path).join(' ')).toMatch(/hostSelector\.matchLabels/);
  });

  it('warns that several control-plane hosts without an endpoint hang on the first one', () => {
    const result = validateInstallConfigText(withListen.replace('quantity: 1', 'quantity: 3'), { schema: installConfigSchema });
    expect(result.warnings.map((w) => w.path)).toContain('platform.hosts.controlPlaneEndpoint');
  });

  it('create install-config writes bootstrap.listenAddress and the endpoint from the answers, and the result validates', () => {
    const text = renderNewInstallConfig({
      name: 'demo',
      platform: 'hosts',
      kubernetesVersion: 'v1.36.3',
      controlPlaneReplicas: 1,
      workers: 1,
      platformAnswers: { listenAddress: '198.18.0.1', hostsEndpoint: '198.18.0.100' },
    });
    const document = parse(text.split('\n').slice(1).join('\n')) as Record<string, unknown>;
    expect(document.bootstrap).toEqual({ listenAddress: '198.18.0.1' });
    expect(document.platform).toEqual({ hosts: { controlPlaneEndpoint: { host: '198.18.0.100' } } });
    expect(load(text).platform.hosts).toEqual({ controlPlaneEndpoint: { host: '198.18.0.100', port: 6443 } });
  });
});

describe('hosts manifests', () => {
  it('leaves the endpoint to the provider, giving it the control-plane pool\'s selector, unless the user sets one', () => {
    const cluster = (text: string) => generateManifests(load(text)).manifests.find((m) => m.role === 'infrastructure-cluster')!.object as unknown as { spec: unknown };
    expect(cluster(withListen).spec).toEqual({ controlPlaneHostSelector: {} });
    expect(cluster(withListen.replace('  hosts: {}', '  hosts:\n    controlPlaneEndpoint: {host: 198.18.0.100}')).spec).toEqual({ controlPlaneEndpoint: { host: '198.18.0.100', port: 6443 } });
  });

  it('imports each role\'s images in the prepare plan (the machine template\'s prepareCommands), not after the bootstrap data', () => {
    const set = generateManifests(load(withListen)).manifests;
    const prepare = (role: string) => (set.find((m) => m.role === role)!.object as unknown as { spec: { template: { spec: { prepareCommands: string[] } } } }).spec.template.spec.prepareCommands;
    expect(prepare('control-plane-machine-template')).toEqual([importImages('controlPlane')]);
    expect(prepare('machine-template')).toEqual([importImages('worker')]);
    for (const role of ['control-plane', 'bootstrap-template']) expect(JSON.stringify(set.find((m) => m.role === role)!.object)).not.toContain('images import');
  });

  it('renames a pool\'s machine template when its selector changes', () => {
    const template = (text: string) => generateManifests(load(text)).manifests.find((m) => m.role === 'machine-template')!.object.metadata.name;
    expect(template(withListen.replace('disk: ssd', 'disk: hdd'))).not.toBe(template(withListen));
  });
});

const demo = { name: 'demo', namespace: 'demo' };
const host = (name: string, overrides: Partial<HostView> = {}): HostView => ({ name, address: '198.18.0.10', roles: [], labels: {}, registered: true, ...overrides });

describe('filling pools with registered hosts', () => {
  const demands = () => poolDemands(load(withListen));

  it('counts per pool, by role and labels, each host once', () => {
    const supply = assignHosts(demands(), [host('a', { roles: ['control-plane'] }), host('b', { labels: { 'example.com/disk': 'ssd' } }), host('c', { roles: ['worker'] })], demo);
    expect(supply.map((s) => [s.demand.pool, s.hosts, s.missing])).toEqual([
      ['control-plane', ['a'], 0],
      ['worker', ['b'], 1],
    ]);
    expect(supplyLine(supply[1]!)).toBe('1 of 2 worker hosts registered (pool worker, labels example.com/disk=ssd)');
  });

  it('skips unregistered hosts, hosts claimed by another cluster, and hosts offering another role', () => {
    const ssd = { 'example.com/disk': 'ssd' };
    const hosts = [
      host('a', { registered: false }),
      host('b', { labels: ssd, claimedBy: 'other.m-1', clusterName: 'other' }),
      host('c', { labels: ssd, roles: ['control-plane'] }),
      host('d', { labels: ssd, claimedBy: 'demo.m-2', clusterName: 'demo' }),
      // The same cluster name in another namespace is another cluster.
      host('e', { labels: ssd, claimedBy: 'elsewhere.m-1', clusterName: 'demo' }),
    ];
    const supply = assignHosts(demands(), hosts, demo);
    expect(supply.map((s) => s.hosts)).toEqual([['c'], ['d']]);
  });

  it('puts a host that fits two pools where it is needed (not first come, first served)', () => {
    // x fits both pools, y only the control plane: taking x for the control plane would starve the workers.
    const ssd = { 'example.com/disk': 'ssd' };
    const config = load(withListen.replace('quantity: 2', 'quantity: 1'));
    const supply = assignHosts(poolDemands(config), [host('x', { labels: ssd }), host('y', { roles: ['control-plane'] })], demo);
    expect(supply.map((s) => s.hosts)).toEqual([['y'], ['x']]);
  });

  it('keeps a host reserved as a control-plane endpoint for that cluster\'s control plane', () => {
    const config = load(withListen.replace('quantity: 2', 'quantity: 1').replace('            example.com/disk: ssd\n', '').replace('        hostSelector:\n          matchLabels:\n', '        hostSelector: {}\n'));
    const ours = host('a', { endpointOf: 'demo.demo' });
    const theirs = host('b', { endpointOf: 'other.other' });
    expect(assignHosts(poolDemands(config), [ours, theirs], demo).map((s) => s.hosts)).toEqual([['a'], []]);
  });

  it('reads a Host object: registration condition and claim labels', () => {
    const view = hostView({
      apiVersion: 'agent.provisioner.dev/v1alpha1',
      kind: 'Host',
      metadata: { name: 'h1', labels: { 'infrastructure.provisioner.dev/claimed-by': 'demo.m', 'cluster.x-k8s.io/cluster-name': 'demo', rack: 'r1' } },
      spec: { address: '198.18.0.10', roles: ['worker'] },
      status: { conditions: [{ type: 'Registered', status: 'True' }] },
    } as Parameters<typeof hostView>[0]);
    expect(view).toMatchObject({ name: 'h1', address: '198.18.0.10', roles: ['worker'], registered: true, claimedBy: 'demo.m', clusterName: 'demo' });
  });
});

describe('a host whose plan failed', () => {
  it('is a machines error naming the host and the check', () => {
    const failed = planFailure([
      { apiVersion: 'infrastructure.provisioner.dev/v1alpha1', kind: 'HostMachine', metadata: { name: 'ok', namespace: 'demo' }, status: { conditions: [{ type: 'Ready', status: 'False', reason: 'WaitingForPlan' }] } },
      {
        apiVersion: 'infrastructure.provisioner.dev/v1alpha1',
        kind: 'HostMachine',
        metadata: { name: 'm-1', namespace: 'demo' },
        status: { hostRef: { name: 'h2' }, conditions: [{ type: 'BootstrapPlanApplied', status: 'False', reason: 'PlanFailed', message: 'check containerd-socket: /run/containerd/containerd.sock is missing' }] },
      },
    ]);
    expect(failed).toBeInstanceOf(MachinesError);
    expect(failed?.message).toBe('Host h2 failed the bootstrap plan of HostMachine demo/m-1: check containerd-socket: /run/containerd/containerd.sock is missing');
    expect(planFailure([])).toBeUndefined();
  });
});

describe('what the hosts download', () => {
  it('maps the served node binaries and image archives to host paths, modes and digests; the rest is not for hosts', () => {
    const served = [
      { path: 'node/images/etcd.tar', sha256: 'b'.repeat(64), url: 'http://198.18.0.1:4000/node/images/etcd.tar' },
      { path: 'node/bin/kubelet', sha256: 'a'.repeat(64), url: 'http://198.18.0.1:4000/node/bin/kubelet' },
      { path: 'other/readme.txt', sha256: 'c'.repeat(64), url: 'http://198.18.0.1:4000/other/readme.txt' },
    ];
    expect(hostArtifacts(served)).toEqual([
      { path: '/usr/local/bin/kubelet', url: 'http://198.18.0.1:4000/node/bin/kubelet', digest: `sha256:${'a'.repeat(64)}`, mode: '0755' },
      { path: '/var/lib/provisioner/images/etcd.tar', url: 'http://198.18.0.1:4000/node/images/etcd.tar', digest: `sha256:${'b'.repeat(64)}`, mode: '0644' },
    ]);
  });

  it('refuses files served on no address the hosts reach, naming the field to set', () => {
    expect(() => hostArtifacts([{ path: 'node/bin/kubeadm', sha256: 'a'.repeat(64), url: undefined }])).toThrow(InfrastructureError);
  });
});

describe('the pod network on hosts', () => {
  it('refuses a pod block too small for two node subnets, naming the field, unless the user brings the CNI', () => {
    const small = withListen.replace('podCIDRs: [198.19.0.0/17]', 'podCIDRs: [198.19.0.0/24]');
    const error = configError(small);
    expect(error.problems.map((p) => p.path)).toEqual(['networking.podCIDRs']);
    expect(error.problems[0]!.message).toContain('/23 or shorter');
    expect(load(small.replace('podCIDRs: [198.19.0.0/24]', 'podCIDRs: [198.19.0.0/24]\n  cni: none')).networking.cni).toBe('none');
  });

  it('applies the bundled flannel by a ClusterResourceSet that selects the cluster, with the pod block and the imported image', () => {
    const config = load(withListen);
    const set = generateManifests(config);
    const resources = set.manifests.find((m) => m.role === 'pod-network-resources')!.object as unknown as { metadata: { name: string }; data: Record<string, string> };
    const resourceSet = set.manifests.find((m) => m.role === 'pod-network')!.object as unknown as { spec: { clusterSelector: { matchLabels: Record<string, string> }; resources: { kind: string; name: string }[]; strategy: string } };
    expect(resourceSet.spec.clusterSelector.matchLabels).toEqual({ 'cluster.x-k8s.io/cluster-name': 'demo' });
    expect(resourceSet.spec.resources).toEqual([{ kind: 'ConfigMap', name: resources.metadata.name }]);
    const objects = resources.data['flannel.yaml']!.split('\n---\n').map((doc) => JSON.parse(doc) as { kind: string; data?: Record<string, string>; spec?: { template: { spec: { containers: { image: string; imagePullPolicy: string; args: string[] }[] } } } });
    expect(objects.map((o) => o.kind)).toEqual(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'DaemonSet']);
    expect(JSON.parse(objects[4]!.data!['net-conf.json']!)).toMatchObject({ Network: '198.19.0.0/17', Backend: { Type: 'host-gw' } });
    const daemon = objects[5]!.spec!.template.spec.containers[0]!;
    expect(daemon.image).toMatch(/^provisioner\.local\/flannel:v\d+\.\d+\.\d+$/);
    expect(daemon.imagePullPolicy).toBe('Never');
    expect(daemon.args).toContain('--iface=$(POD_IP)');
    // cni: none: nothing of the pod network in the manifests, and no node-local bridge either.
    const none = generateManifests(load(withListen.replace('serviceCIDRs: [198.19.128.0/20]', 'serviceCIDRs: [198.19.128.0/20]\n  cni: none')));
    expect(none.manifests.map((m) => m.role)).not.toContain('pod-network');
    expect(JSON.stringify(none.manifests)).not.toContain('/etc/cni/net.d');
  });

  it('runs kubeadm\'s kube-proxy and CoreDNS add-ons: no skipped phase, every add-on image imported on workers', () => {
    const set = generateManifests(load(withListen));
    const text = JSON.stringify(set.manifests);
    expect(text).not.toContain('skipPhases');
    expect(text).toContain('kubernetes.tar');
    expect(text).toContain('coredns.tar');
  });

  it('makes the cluster\'s keys ECDSA P-256: the KubeadmControlPlane\'s clusterConfiguration names the algorithm for Cluster API and kubeadm', () => {
    const set = generateManifests(load(withListen));
    const kcps = set.manifests
      .map((m) => m.object as { kind?: string; spec?: { kubeadmConfigSpec?: { clusterConfiguration?: { encryptionAlgorithm?: string } } } })
      .filter((o) => o.kind === 'KubeadmControlPlane');
    expect(kcps).toHaveLength(1);
    expect(kcps[0]?.spec?.kubeadmConfigSpec?.clusterConfiguration?.encryptionAlgorithm).toBe('ECDSA-P256');
  });

  it('gives kube-proxy a config that leaves the host\'s conntrack size alone, appended to kubeadm\'s config once however often the plan runs', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-kubeproxy-'));
    try {
      const file = path.join(dir, 'kubeadm.yaml');
      await writeFile(file, 'kind: InitConfiguration');
      const command = appendKubeProxyConfiguration.replaceAll('/run/kubeadm/kubeadm.yaml', file);
      await execa('/bin/sh', ['-c', command]);
      await execa('/bin/sh', ['-c', command]);
      const docs = parseAllDocuments(await readFile(file, 'utf8')).map((d) => d.toJSON() as { kind: string; conntrack?: { maxPerCore: number } });
      expect(docs.map((d) => d.kind)).toEqual(['InitConfiguration', 'KubeProxyConfiguration']);
      expect(docs[1]!.conntrack).toEqual({ maxPerCore: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(JSON.stringify(generateManifests(load(withListen)).manifests.find((m) => m.role === 'control-plane')!.object)).toContain('KubeProxyConfiguration');
  });

  it('refuses the bundled flannel on a platform whose nodes pull images, naming networking.cni', () => {
    const error = configError('apiVersion: provisioner.dev/v1alpha1\nkind: InstallConfig\nmetadata:\n  name: demo\nnetworking:\n  cni: flannel\nmachinePools:\n  - name: control-plane\n    quantity: 1\n    roles: [etcd, controlPlane]\n');
    expect(error.problems.map((p) => p.path)).toEqual(['networking.cni']);
    expect(error.problems[0]!.hint).toContain('none');
  });
});
