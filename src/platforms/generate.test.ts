import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { serializeManifest } from '../assets/manifests.js';
import {
  desiredSetSelector,
  installConfigOwner,
  objectSetHash,
  objectSetHashKey,
  objectSetIdKey,
  objectSetOwnerGvkKey,
  objectSetOwnerNameKey,
  objectSetOwnerNamespaceKey,
  composeInstallConfigSchema,
  validateInstallConfigDocument,
  validateInstallConfigText,
  type InstallConfig,
} from '../config/index.js';
import { ConfigError, type FieldProblem } from '../errors.js';
import { validateAgainstCrd } from '../../test/support/crd-schema.js';
import { Random, prng, randomInstallConfig } from '../../test/support/random-install-config.js';
import { generateManifests, installConfigSchema, platforms, type ManifestSet } from './index.js';
import { controllerManagerClientRate, withControllerManagerDefaults } from './generate.js';
import type { ClusterConfiguration } from './types.js';
import { configSectionOf } from './registry.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const goldenRoot = path.join(repoRoot, 'test/fixtures/golden');
/** Set to rewrite the golden files from the generator (then review them by eye). */
const updateGolden = process.env.PROVISIONER_UPDATE_GOLDEN === '1';

function load(text: string): InstallConfig {
  return validateInstallConfigText(text, { schema: installConfigSchema }).config;
}

function keyOf(object: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }): string {
  return `${object.apiVersion}/${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}

describe('golden manifests per platform', async () => {
  const cases: { platform: string; name: string }[] = [];
  for (const platform of await readdir(goldenRoot)) {
    for (const entry of await readdir(path.join(goldenRoot, platform))) {
      if (entry.endsWith('.install-config.yaml')) cases.push({ platform, name: entry.slice(0, -'.install-config.yaml'.length) });
    }
  }

  it('covers every platform', () => {
    expect(new Set(cases.map((c) => c.platform))).toEqual(new Set(platforms.map((p) => p.name)));
  });

  for (const { platform, name } of cases) {
    it(`${platform}/${name} generates the reviewed manifests`, async () => {
      const dir = path.join(goldenRoot, platform);
      const config = load(await readFile(path.join(dir, `${name}.install-config.yaml`), 'utf8'));
      const set = generateManifests(config);
      expect(set.platform).toBe(platform);
      const outDir = path.join(dir, name, 'cluster-api');
      if (updateGolden) {
        await mkdir(outDir, { recursive: true });
        for (const file of await readdir(outDir)) await rm(path.join(outDir, file));
        for (const m of set.manifests) await writeFile(path.join(outDir, m.file), serializeManifest(m));
      }
      const expectedFiles = (await readdir(outDir)).sort();
      expect(set.manifests.map((m) => m.file)).toEqual(expectedFiles);
      for (const m of set.manifests) {
        expect(serializeManifest(m), `${platform}/${name}/${m.file}`).toBe(await readFile(path.join(outDir, m.file), 'utf8'));
      }
    });
  }
});

describe('generated objects', () => {
  const text = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
`;

  it('orders files as namespace, Cluster, infrastructure cluster, control plane, then per pool template, bootstrap, deployment', () => {
    const set = generateManifests(load(text));
    expect(set.manifests.map((m) => `${m.file} ${m.object.kind}`)).toEqual([
      '00_namespace.yaml Namespace',
      '01_cluster.yaml Cluster',
      '02_infrastructure-cluster.yaml DevCluster',
      '03_control-plane-machine-template.yaml DevMachineTemplate',
      '04_control-plane.yaml KubeadmControlPlane',
      '10_pool-worker_1-machine-template.yaml DevMachineTemplate',
      '10_pool-worker_2-bootstrap-template.yaml KubeadmConfigTemplate',
      '10_pool-worker_3-machine-deployment.yaml MachineDeployment',
    ]);
  });

  it('uses v1beta2 contract references (apiGroup, kind, name) that resolve inside the set', () => {
    const set = generateManifests(load(text));
    const byKind = new Map(set.manifests.map((m) => [m.object.kind, m.object]));
    const cluster = byKind.get('Cluster') as unknown as { spec: { controlPlaneRef: Record<string, string>; infrastructureRef: Record<string, string> } };
    expect(cluster.spec.controlPlaneRef).toEqual({ apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'demo-control-plane' });
    expect(cluster.spec.infrastructureRef).toEqual({ apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevCluster', name: 'demo' });
    const names = new Set(set.manifests.map((m) => `${m.object.kind}/${m.object.metadata.name}`));
    const md = byKind.get('MachineDeployment') as unknown as { spec: { template: { spec: { bootstrap: { configRef: { kind: string; name: string } }; infrastructureRef: { kind: string; name: string } } } } };
    expect(names.has(`${md.spec.template.spec.bootstrap.configRef.kind}/${md.spec.template.spec.bootstrap.configRef.name}`)).toBe(true);
    expect(names.has(`${md.spec.template.spec.infrastructureRef.kind}/${md.spec.template.spec.infrastructureRef.name}`)).toBe(true);
  });

  it('stamps wrangler desired-set ownership on every object, with the hash as a label', () => {
    const config = load(text);
    const set = generateManifests(config);
    const owner = installConfigOwner(config);
    const hash = objectSetHash(owner);
    // sha1("provisioner-cluster" + "provisioner.dev/v1alpha1, Kind=InstallConfig" + "demo" + "demo"), as wrangler computes it.
    expect(hash).toBe('77b9b40595a9694f0d77df93bdebae17c2322e33');
    expect(desiredSetSelector(owner)).toBe(`objectset.rio.cattle.io/hash=${hash}`);
    for (const m of set.manifests) {
      expect(m.object.metadata.annotations).toMatchObject({
        [objectSetIdKey]: 'provisioner-cluster',
        [objectSetHashKey]: hash,
        [objectSetOwnerGvkKey]: 'provisioner.dev/v1alpha1, Kind=InstallConfig',
        [objectSetOwnerNameKey]: 'demo',
        [objectSetOwnerNamespaceKey]: 'demo',
      });
      expect(m.object.metadata.labels?.[objectSetHashKey]).toBe(hash);
    }
  });

  it('renames a template when its spec changes, and only then', () => {
    const before = generateManifests(load(text));
    const same = generateManifests(load(text));
    const changed = generateManifests(load(text.replace('quantity: 2', 'quantity: 2\n    platform: {inmemory: {startup: {vm: 30s}}}')));
    const template = (s: ManifestSet) => s.manifests.find((m) => m.file === '10_pool-worker_1-machine-template.yaml')!.object.metadata.name;
    const deployment = (s: ManifestSet) => s.manifests.find((m) => m.role === 'machine-deployment')!.object as unknown as { spec: { template: { spec: { infrastructureRef: { name: string } } } } };
    expect(template(same)).toBe(template(before));
    expect(template(changed)).not.toBe(template(before));
    expect(template(changed)).toMatch(/^demo-worker-[0-9a-f]{8}$/);
    expect(deployment(changed).spec.template.spec.infrastructureRef.name).toBe(template(changed));
  });

  it('keeps kubeadm\'s control-plane taint unless the control-plane pool also has the worker role', () => {
    const cp = (t: string) =>
      (generateManifests(load(t)).manifests.find((m) => m.object.kind === 'KubeadmControlPlane')!.object as unknown as {
        spec: { kubeadmConfigSpec: { initConfiguration?: { nodeRegistration?: { taints?: unknown[] } } } };
      }).spec.kubeadmConfigSpec.initConfiguration?.nodeRegistration?.taints;
    expect(cp(text)).toBeUndefined();
    expect(cp(text.replace('roles: [etcd, controlPlane]', 'roles: [etcd, controlPlane, worker]'))).toEqual([]);
    expect(cp(text.replace('roles: [etcd, controlPlane]', 'roles: [etcd, controlPlane]\n    taints: [{key: example.com/x, effect: NoExecute}]'))).toEqual([
      { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
      { key: 'example.com/x', effect: 'NoExecute' },
    ]);
  });

  it('runs kube-controller-manager at 150 requests a second, bursts of 300, on every platform; a platform\'s own value wins', async () => {
    for (const platform of platforms) {
      const config = load(await readFile(path.join(goldenRoot, platform.name, 'default.install-config.yaml'), 'utf8'));
      const kcp = generateManifests(config).manifests.find((m) => m.object.kind === 'KubeadmControlPlane')!.object as unknown as { spec: { kubeadmConfigSpec: { clusterConfiguration: ClusterConfiguration } } };
      expect(kcp.spec.kubeadmConfigSpec.clusterConfiguration.controllerManager?.extraArgs, platform.name).toEqual(expect.arrayContaining([...controllerManagerClientRate]));
    }
    expect(withControllerManagerDefaults(undefined)).toEqual({ controllerManager: { extraArgs: [...controllerManagerClientRate] } });
    const own = { imageRepository: 'example.com', controllerManager: { extraArgs: [{ name: 'cloud-provider', value: 'external' }, { name: 'kube-api-qps', value: '5' }] } };
    expect(withControllerManagerDefaults(own)).toEqual({
      imageRepository: 'example.com',
      controllerManager: { extraArgs: [{ name: 'cloud-provider', value: 'external' }, { name: 'kube-api-qps', value: '5' }, { name: 'kube-api-burst', value: '300' }] },
    });
  });

  it('passes labels outside the Node-synced domains to the kubelet, and all labels to the Machines', () => {
    const set = generateManifests(load(text.replace('roles: [worker]', 'roles: [worker]\n    labels: {example.com/team: blue, node-role.kubernetes.io/worker: ""}')));
    const bootstrap = set.manifests.find((m) => m.role === 'bootstrap-template')!.object as unknown as { spec: { template: { spec: { joinConfiguration: { nodeRegistration: { kubeletExtraArgs: { name: string; value: string }[] } } } } } };
    expect(bootstrap.spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs).toContainEqual({ name: 'node-labels', value: 'example.com/team=blue' });
    const md = set.manifests.find((m) => m.role === 'machine-deployment')!.object as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } };
    expect(md.spec.template.metadata.labels).toMatchObject({ 'example.com/team': 'blue', 'node-role.kubernetes.io/worker': '' });
  });
});

describe('the ClusterClass layout (manifests.layout: topology)', () => {
  const text = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
    labels: {example.com/tier: control}
  - name: worker
    quantity: 2
    roles: [worker]
    labels: {example.com/team: blue}
  - name: big
    quantity: 1
    roles: [worker]
    platform: {inmemory: {startup: {vm: 30s}}}
manifests:
  layout: topology
`;
  type Ref = { apiVersion: string; kind: string; name: string };
  interface ClassJson {
    spec: {
      infrastructure: { templateRef: Ref; naming: { template: string } };
      controlPlane: { templateRef: Ref; machineInfrastructure: { templateRef: Ref }; naming: { template: string } };
      workers: { machineDeployments: { class: string; bootstrap: { templateRef: Ref }; infrastructure: { templateRef: Ref }; naming: { template: string } }[] };
    };
  }
  interface TopologyJson {
    spec: { controlPlaneRef?: unknown; infrastructureRef?: unknown; topology: { classRef: { name: string }; version: string; controlPlane: { replicas: number; metadata?: { labels: Record<string, string> } }; workers: { machineDeployments: { class: string; name: string; replicas: number; metadata?: { labels: Record<string, string> } }[] } } };
  }

  it('writes the templates, a ClusterClass and a Cluster with spec.topology instead of the control plane and MachineDeployments', () => {
    const set = generateManifests(load(text));
    expect(set.manifests.map((m) => `${m.file} ${m.object.kind}`)).toEqual([
      '00_namespace.yaml Namespace',
      '01_cluster.yaml Cluster',
      '02_infrastructure-cluster-template.yaml DevClusterTemplate',
      '03_control-plane-machine-template.yaml DevMachineTemplate',
      '04_control-plane-template.yaml KubeadmControlPlaneTemplate',
      '05_cluster-class.yaml ClusterClass',
      '10_pool-big_1-machine-template.yaml DevMachineTemplate',
      '10_pool-big_2-bootstrap-template.yaml KubeadmConfigTemplate',
      '10_pool-worker_1-machine-template.yaml DevMachineTemplate',
      '10_pool-worker_2-bootstrap-template.yaml KubeadmConfigTemplate',
    ]);
  });

  it('names every template the ClusterClass refers to, with its version, and one machineDeployment class per worker pool', () => {
    const set = generateManifests(load(text));
    const keys = new Set(set.manifests.map((m) => `${m.object.apiVersion}/${m.object.kind}/${m.object.metadata.name}`));
    const clusterClass = set.manifests.find((m) => m.role === 'cluster-class')!.object as unknown as ClassJson;
    const refs = [
      clusterClass.spec.infrastructure.templateRef,
      clusterClass.spec.controlPlane.templateRef,
      clusterClass.spec.controlPlane.machineInfrastructure.templateRef,
      ...clusterClass.spec.workers.machineDeployments.flatMap((md) => [md.bootstrap.templateRef, md.infrastructure.templateRef]),
    ];
    for (const r of refs) expect(keys, `${r.kind}/${r.name}`).toContain(`${r.apiVersion}/${r.kind}/${r.name}`);
    expect(clusterClass.spec.workers.machineDeployments.map((md) => md.class)).toEqual(['big', 'worker']);
    // The topology controller names what it creates as the classic layout does: waits and destroy find them alike.
    expect(clusterClass.spec.infrastructure.naming.template).toBe('{{ .cluster.name }}');
    expect(clusterClass.spec.controlPlane.naming.template).toBe('{{ .cluster.name }}-control-plane');
    expect(clusterClass.spec.workers.machineDeployments[0]!.naming.template).toBe('{{ .cluster.name }}-{{ .machineDeployment.topologyName }}');
  });

  it('asks for the pools in the Cluster\'s topology: class, version, control-plane replicas, one machineDeployment per worker pool, pool labels', () => {
    const config = load(text);
    const cluster = generateManifests(config).manifests.find((m) => m.role === 'cluster')!.object as unknown as TopologyJson;
    expect(cluster.spec.controlPlaneRef).toBeUndefined();
    expect(cluster.spec.infrastructureRef).toBeUndefined();
    expect(cluster.spec.topology.classRef).toEqual({ name: 'demo' });
    expect(cluster.spec.topology.version).toBe(config.kubernetesVersion);
    expect(cluster.spec.topology.controlPlane).toEqual({ replicas: 3, metadata: { labels: { 'example.com/tier': 'control' } } });
    expect(cluster.spec.topology.workers.machineDeployments).toEqual([
      { class: 'big', name: 'big', replicas: 1 },
      { class: 'worker', name: 'worker', replicas: 2, metadata: { labels: { 'example.com/team': 'blue' } } },
    ]);
  });

  it('keeps the classic layout\'s kubeadm settings and machine templates, and hash-names the cluster and control-plane templates too', () => {
    const classic = generateManifests(load(text.replace('  layout: topology\n', '  layout: classic\n')));
    const topology = generateManifests(load(text));
    const byFile = (set: ManifestSet, file: string) => set.manifests.find((m) => m.file === file)!.object;
    for (const file of ['03_control-plane-machine-template.yaml', '10_pool-worker_1-machine-template.yaml', '10_pool-worker_2-bootstrap-template.yaml']) {
      expect(byFile(topology, file), file).toEqual(byFile(classic, file));
    }
    const kcp = byFile(classic, '04_control-plane.yaml') as unknown as { spec: { kubeadmConfigSpec: unknown } };
    const kcpTemplate = byFile(topology, '04_control-plane-template.yaml') as unknown as { metadata: { name: string }; spec: { template: { spec: { kubeadmConfigSpec: unknown } } } };
    expect(kcpTemplate.spec.template.spec.kubeadmConfigSpec).toEqual(kcp.spec.kubeadmConfigSpec);
    expect(kcpTemplate.metadata.name).toMatch(/^demo-control-plane-[0-9a-f]{8}$/);
    expect(byFile(topology, '02_infrastructure-cluster-template.yaml').metadata.name).toMatch(/^demo-cluster-[0-9a-f]{8}$/);
  });

  it('passes the CRD schemas on every platform with a ClusterClass layout', () => {
    for (const platform of platforms.filter((p) => p.clusterClass && p.name !== 'vsphere')) {
      const section = platform.name === 'aws' ? 'platform: {aws: {region: us-east-1}}\n' : '';
      for (const m of generateManifests(load(text.replace(/\n {4}platform: \{inmemory.*\n/, '\n') + section)).manifests) {
        expect(validateAgainstCrd(m.object as unknown as Record<string, unknown>), `${platform.name} ${m.file}`).toEqual([]);
      }
    }
  });

  it('is the classic layout when manifests.layout is not set', () => {
    const config = load(text.replace('manifests:\n  layout: topology\n', ''));
    expect(config.manifests.layout).toBe('classic');
    expect(generateManifests(config).manifests.some((m) => m.object.kind === 'KubeadmControlPlane')).toBe(true);
  });

  /** The field problems of a config the schema refuses. */
  const problemsOf = (configText: string, schema = installConfigSchema): readonly FieldProblem[] => {
    try {
      validateInstallConfigText(configText, { schema });
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };

  it('is refused, naming manifests.layout, for a platform without a ClusterClass layout', () => {
    const platform = platforms[0]!;
    const { clusterClass: _dropped, ...withoutClass } = platform;
    const schema = composeInstallConfigSchema([configSectionOf(withoutClass)], platform.name);
    const problems = problemsOf(text, schema);
    expect(problems.map((p) => p.path)).toEqual(['manifests.layout']);
    expect(problems[0]!.message).toMatch(new RegExp(`${platform.name} platform offers no ClusterClass layout`));
    expect(problemsOf(text.replace('layout: topology', 'layout: classic'), schema)).toEqual([]);
    // Every registered platform offers it.
    expect(problemsOf(text)).toEqual([]);
  });

  it('rejects an unknown layout with the field named', () => {
    expect(problemsOf(text.replace('layout: topology', 'layout: clusterclass')).map((p) => p.path)).toEqual(['manifests.layout']);
  });
});

describe('pruning: removing a machine pool', () => {
  const withPools = (names: string[]) => `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: prune
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
${names.map((n) => `  - name: ${n}\n    quantity: ${n.length}\n    roles: [worker]\n    labels: {example.com/pool: ${n}}\n`).join('')}`;

  for (const platform of ['inmemory', 'aws'] as const) {
    it(`drops exactly that pool's objects and changes no other object (${platform})`, () => {
      const suffix = platform === 'aws' ? 'platform: {aws: {region: us-east-1}}\n' : '';
      const full = generateManifests(load(withPools(['alpha', 'beta', 'gamma']) + suffix));
      const without = generateManifests(load(withPools(['alpha', 'gamma']) + suffix));
      const fullKeys = new Map(full.manifests.map((m) => [keyOf(m.object), m]));
      const withoutKeys = new Map(without.manifests.map((m) => [keyOf(m.object), m]));
      const disappeared = [...fullKeys.keys()].filter((k) => !withoutKeys.has(k));
      const appeared = [...withoutKeys.keys()].filter((k) => !fullKeys.has(k));
      expect(appeared).toEqual([]);
      expect(disappeared.map((k) => fullKeys.get(k)!.role).sort()).toEqual(['bootstrap-template', 'machine-deployment', 'machine-template']);
      expect(disappeared.every((k) => fullKeys.get(k)!.pool === 'beta')).toBe(true);
      for (const [key, manifest] of withoutKeys) {
        expect(serializeManifest(manifest), key).toBe(serializeManifest(fullKeys.get(key)!));
      }
      // The set identity (the selector that lists objects to prune) does not change with the pools.
      expect(without.owner).toEqual(full.owner);
    });
  }
});

describe('property: random valid configs generate manifests that pass the CRD schemas and webhook rules', () => {
  const seeds = Array.from({ length: 150 }, (_, i) => 1000 + i * 7919);
  for (const seed of seeds) {
    it(`seed ${seed}`, () => {
      const random = new Random(prng(seed));
      const document = randomInstallConfig(random);
      const { config } = validateInstallConfigDocument(document, { schema: installConfigSchema });
      const set = generateManifests(config);
      const files = set.manifests.map((m) => m.file);
      expect(new Set(files).size).toBe(files.length);
      expect([...files].sort()).toEqual(files);
      const keys = set.manifests.map((m) => keyOf(m.object));
      expect(new Set(keys).size).toBe(keys.length);
      for (const m of set.manifests) {
        expect(validateAgainstCrd(m.object as unknown as Record<string, unknown>), `${m.file}`).toEqual([]);
        expect(m.object.metadata.labels?.[objectSetHashKey]).toBe(objectSetHash(set.owner));
        // What is written is what was generated: YAML round-trips to the same object.
        expect(parse(serializeManifest(m))).toEqual(m.object);
      }
      expect(generateManifests(config)).toEqual(set);
      const workers = config.machinePools.filter((p) => !p.roles.includes('controlPlane'));
      expect(set.manifests.filter((m) => m.role === 'machine-deployment')).toHaveLength(workers.length);
      // The same config in the ClusterClass layout passes the CRD schemas too.
      for (const m of generateManifests({ ...config, manifests: { layout: 'topology' } }).manifests) {
        expect(validateAgainstCrd(m.object as unknown as Record<string, unknown>), `topology ${m.file}`).toEqual([]);
      }
    });
  }
});

describe('the CRD check itself', () => {
  it('rejects unknown fields, wrong types and even control-plane replicas', () => {
    const set = generateManifests(load(`apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata: {name: demo}
machinePools: [{name: cp, quantity: 3, roles: [etcd, controlPlane]}]
`));
    const kcp = structuredClone(set.manifests.find((m) => m.object.kind === 'KubeadmControlPlane')!.object) as unknown as Record<string, Record<string, unknown>>;
    kcp.spec!.replicas = 2;
    kcp.spec!.machineTemplate = { spec: { infrastructureRef: { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DevMachineTemplate', name: 'x' } } };
    const problems = validateAgainstCrd(kcp);
    expect(problems).toContain('KubeadmControlPlane.spec.machineTemplate.spec.infrastructureRef.apiVersion: unknown field');
    expect(problems).toContain('KubeadmControlPlane.spec.machineTemplate.spec.infrastructureRef.apiGroup: required');
    expect(problems).toContain('spec.replicas: cannot be even with stacked etcd (KCP webhook)');
  });
});
