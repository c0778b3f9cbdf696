/**
 * Cluster-shaped sets of Cluster API objects for move tests and the pivot benchmark:
 * created directly (no machine is provisioned), paused, with the status `clusterctl move`
 * requires before it moves anything (infrastructure provisioned, control plane
 * initialized, a nodeRef on every Machine); and the check that a set arrived whole.
 */
import { defaultRetryPolicy, sleep, withRetry } from '../../src/concurrency.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../../src/kube/client.js';
import { contentDifference } from '../../src/pivot/graph.js';

const capi = 'cluster.x-k8s.io/v1beta2';
const infra = 'infrastructure.cluster.x-k8s.io/v1beta2';
const bootstrap = 'bootstrap.cluster.x-k8s.io/v1beta2';
const controlPlaneApi = 'controlplane.cluster.x-k8s.io/v1beta2';

export interface Seeded {
  namespace: string;
  name: string;
  /** Every object as it is in the source right after seeding (with UIDs). */
  objects: KubeObject[];
}

/**
 * One write of a test's fixture, retried like any write of ours (`KubeApiError.isTransient`, conflicts):
 * a busy machine's etcd answers "request timed out" now and then, and a webhook is refused while
 * its manager restarts; seeding is not what is measured.
 */
export async function retriedWrite<T>(op: () => Promise<T>): Promise<T> {
  const result = await withRetry(op, { policy: defaultRetryPolicy, isRetryable: (e) => e instanceof KubeApiError && (e.isTransient || e.isConflict), sleep });
  if (!result.ok) throw result.error;
  return result.value;
}

type Owner = { apiVersion: string; kind: string; name: string; uid: string };
const ownerRef = (o: KubeObject, controller = true) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name, uid: o.metadata.uid!, controller });

/** Creates one cluster's objects in `namespace`, paused, with the status clusterctl checks. */
export async function seedCluster(kube: KubeClient, namespace: string, shape: { controlPlane: number; workers: number }): Promise<Seeded> {
  const name = namespace;
  const labels = { 'cluster.x-k8s.io/cluster-name': name };
  const meta = (objName: string, extra: { labels?: Record<string, string>; ownerReferences?: Owner[] } = {}) => ({
    name: objName,
    namespace,
    labels: { ...labels, ...(extra.labels ?? {}) },
    ...(extra.ownerReferences ? { ownerReferences: extra.ownerReferences } : {}),
  });
  const objects: KubeObject[] = [];
  const create = async (obj: KubeObject, status?: unknown): Promise<KubeObject> => {
    let created = await retriedWrite(() => kube.apply(obj));
    if (status !== undefined) created = await retriedWrite(() => kube.applyStatus({ ...created, status }));
    objects.push(created);
    return created;
  };
  await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  const cluster = await create(
    {
      apiVersion: capi,
      kind: 'Cluster',
      metadata: meta(name),
      spec: {
        paused: true,
        clusterNetwork: { pods: { cidrBlocks: ['198.19.0.0/17'] }, services: { cidrBlocks: ['198.19.128.0/20'] } },
        controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: `${name}-cp` },
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevCluster', name },
      },
    },
    {
      initialization: { infrastructureProvisioned: true, controlPlaneInitialized: true },
      conditions: [{ type: 'ControlPlaneInitialized', status: 'True', reason: 'Initialized', message: 'seeded by the benchmark', lastTransitionTime: new Date().toISOString() }],
    },
  );
  const clusterOwner = [ownerRef(cluster)];
  await create({ apiVersion: infra, kind: 'DevCluster', metadata: meta(name, { ownerReferences: clusterOwner }), spec: { backend: { inMemory: {} } } }, { initialization: { provisioned: true } });
  const template = (n: string) => ({ apiVersion: infra, kind: 'DevMachineTemplate', metadata: meta(n, { ownerReferences: clusterOwner }), spec: { template: { spec: { backend: { inMemory: {} } } } } });
  await create(template(`${name}-cp`));
  await create(template(`${name}-worker`));
  await create({ apiVersion: bootstrap, kind: 'KubeadmConfigTemplate', metadata: meta(`${name}-worker`, { ownerReferences: clusterOwner }), spec: { template: { spec: { format: 'cloud-config' } } } });
  const kcp = await create(
    {
      apiVersion: controlPlaneApi,
      kind: 'KubeadmControlPlane',
      metadata: meta(`${name}-cp`, { ownerReferences: clusterOwner }),
      spec: { replicas: shape.controlPlane, version: 'v1.36.3', machineTemplate: { spec: { infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevMachineTemplate', name: `${name}-cp` } } }, kubeadmConfigSpec: { format: 'cloud-config' } },
    },
    { initialization: { controlPlaneInitialized: true } },
  );
  const workerLabels = { 'cluster.x-k8s.io/deployment-name': `${name}-worker` };
  const machineTemplate = {
    metadata: { labels: { ...labels, ...workerLabels } },
    spec: {
      clusterName: name,
      version: 'v1.36.3',
      bootstrap: { configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfigTemplate', name: `${name}-worker` } },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevMachineTemplate', name: `${name}-worker` },
    },
  };
  const md = await create({
    apiVersion: capi,
    kind: 'MachineDeployment',
    metadata: meta(`${name}-worker`, { ownerReferences: clusterOwner }),
    spec: { clusterName: name, replicas: shape.workers, selector: { matchLabels: { ...labels, ...workerLabels } }, template: machineTemplate },
  });
  const ms = await create({
    apiVersion: capi,
    kind: 'MachineSet',
    metadata: meta(`${name}-worker-1`, { labels: workerLabels, ownerReferences: [ownerRef(md)] }),
    spec: { clusterName: name, replicas: shape.workers, selector: { matchLabels: { ...labels, ...workerLabels } }, template: machineTemplate },
  });
  for (const suffix of ['kubeconfig', 'ca', 'etcd', 'sa', 'proxy']) {
    await create({ apiVersion: 'v1', kind: 'Secret', metadata: meta(`${name}-${suffix}`, { ownerReferences: [ownerRef(suffix === 'kubeconfig' ? cluster : kcp)] }), type: 'cluster.x-k8s.io/secret', data: { value: Buffer.from(`${suffix}-data`).toString('base64') } });
  }
  const machine = async (machineName: string, owner: KubeObject, extraLabels: Record<string, string>) => {
    const m = await create(
      {
        apiVersion: capi,
        kind: 'Machine',
        metadata: meta(machineName, { labels: extraLabels, ownerReferences: [ownerRef(owner)] }),
        spec: {
          clusterName: name,
          version: 'v1.36.3',
          bootstrap: { dataSecretName: machineName },
          infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevMachine', name: machineName },
        },
      },
      { nodeRef: { name: machineName } },
    );
    const config = await create({ apiVersion: bootstrap, kind: 'KubeadmConfig', metadata: meta(machineName, { labels: extraLabels, ownerReferences: [ownerRef(m)] }), spec: { format: 'cloud-config' } }, { dataSecretName: machineName });
    await create({ apiVersion: infra, kind: 'DevMachine', metadata: meta(machineName, { labels: extraLabels, ownerReferences: [ownerRef(m)] }), spec: { backend: { inMemory: {} } } });
    await create({ apiVersion: 'v1', kind: 'Secret', metadata: meta(machineName, { ownerReferences: [ownerRef(config)] }), type: 'cluster.x-k8s.io/secret', data: { value: Buffer.from(`bootstrap-${machineName}`).toString('base64') } });
  };
  const tasks: (() => Promise<void>)[] = [];
  for (let i = 0; i < shape.controlPlane; i++) tasks.push(() => machine(`${name}-cp-${i}`, kcp, { 'cluster.x-k8s.io/control-plane': '' }));
  for (let i = 0; i < shape.workers; i++) tasks.push(() => machine(`${name}-worker-${i}`, ms, workerLabels));
  // Eight at a time: seeding is not what is measured.
  for (let i = 0; i < tasks.length; i += 8) await Promise.all(tasks.slice(i, i + 8).map((t) => t()));
  return { namespace, name, objects };
}

/** The seeded objects as the source holds them now (those it still has). */
export async function snapshotSeeded(kube: KubeClient, seeded: Seeded): Promise<KubeObject[]> {
  const live: KubeObject[] = [];
  for (const o of seeded.objects) {
    const current = await kube.get<KubeObject>({ apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.metadata.name, namespace: seeded.namespace } });
    if (current) live.push(current);
  }
  return live;
}

/**
 * Objects missing in the target, differing from `expected` (default: the content as seeded),
 * with owners not remapped to target UIDs, or left in the source.
 */
export async function checkMoved(source: KubeClient, target: KubeClient, seeded: Seeded, expected: readonly KubeObject[] = seeded.objects): Promise<{ moved: number; problems: string[] }> {
  const problems: string[] = [];
  const targetUids = new Set<string>();
  const moved: KubeObject[] = [];
  for (const before of expected) {
    const ref = { apiVersion: before.apiVersion, kind: before.kind, metadata: { name: before.metadata.name, namespace: seeded.namespace } };
    const after = await target.get<KubeObject>(ref);
    if (!after) {
      problems.push(`${before.kind} ${before.metadata.name} missing in the target`);
      continue;
    }
    targetUids.add(after.metadata.uid!);
    moved.push(after);
    // Labels aside: the source's controllers label objects while the set is unpaused (clusterctl refuses a paused one), e.g. a Machine's `cluster.x-k8s.io/set-name`.
    const difference = contentDifference(withoutLabels(before), withoutLabels(after), true);
    if (difference !== undefined) problems.push(`${before.kind} ${before.metadata.name} differs at ${difference}`);
    if (await source.get(ref)) problems.push(`${before.kind} ${before.metadata.name} left in the source`);
  }
  for (const after of moved) {
    for (const r of after.metadata.ownerReferences ?? []) if (!targetUids.has(r.uid)) problems.push(`${after.kind} ${after.metadata.name} owner ${r.kind} ${r.name} not remapped`);
  }
  return { moved: moved.length, problems };
}

function withoutLabels(obj: KubeObject): KubeObject {
  const { labels: _labels, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

export async function setClusterPaused(kube: KubeClient, seeded: Seeded, paused: boolean): Promise<void> {
  await kube.mergePatch({ apiVersion: capi, kind: 'Cluster', metadata: { name: seeded.name, namespace: seeded.namespace } }, { spec: { paused } });
}
