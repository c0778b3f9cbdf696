import { describe, expect, it } from 'vitest';
import { objectSetHashKey, objectSetOwnerNameKey, ownershipMetadata, type DesiredSetOwner } from '../config/ownership.js';
import { ConfigError } from '../errors.js';
import type { KubeObject } from '../kube/client.js';
import { appliedHashKey } from './compare.js';
import { executePlan } from './execute.js';
import { FakeApplyClient } from '../../test/support/fake-apply-client.js';
import { formatPlan, planApply, type DesiredSet, type Plan } from './plan.js';

const owner: DesiredSetOwner = { setId: 'provisioner-cluster', ownerGvk: 'provisioner.dev/v1alpha1, Kind=InstallConfig', ownerName: 'demo', ownerNamespace: 'demo' };
const otherOwner: DesiredSetOwner = { ...owner, ownerName: 'other' };

function owned(apiVersion: string, kind: string, name: string, namespace: string | undefined, spec: Record<string, unknown> = {}, by = owner): KubeObject {
  const meta = ownershipMetadata(by);
  return { apiVersion, kind, metadata: { name, ...(namespace ? { namespace } : {}), labels: { ...meta.labels }, annotations: { ...meta.annotations } }, spec };
}

const capi = 'cluster.x-k8s.io/v1beta2';
const infra = 'infrastructure.cluster.x-k8s.io/v1beta2';

/** A small cluster's objects, deliberately out of apply order. */
function generation(workers = true): KubeObject[] {
  const objects = [
    owned(capi, 'Cluster', 'demo', 'demo', { paused: false }),
    owned('v1', 'Namespace', 'demo', undefined),
    owned(infra, 'DevCluster', 'demo', 'demo', { backend: { inMemory: {} } }),
    owned('controlplane.cluster.x-k8s.io/v1beta2', 'KubeadmControlPlane', 'demo-cp', 'demo', { replicas: 1 }),
    owned(infra, 'DevMachineTemplate', 'demo-cp-1', 'demo', { template: { spec: {} } }),
  ];
  if (workers) {
    objects.push(owned(capi, 'MachineDeployment', 'demo-worker', 'demo', { replicas: 1 }));
    objects.push(owned(infra, 'DevMachineTemplate', 'demo-worker-1', 'demo', { template: { spec: {} } }));
    objects.push(owned('bootstrap.cluster.x-k8s.io/v1beta2', 'KubeadmConfigTemplate', 'demo-worker-1', 'demo', { template: { spec: {} } }));
  }
  return objects;
}

const set = (objects: KubeObject[]): DesiredSet => ({ owner, objects });
/** The kinds only worker pools have: a generation without workers has none of them. */
const workerKinds = [
  { apiVersion: capi, kind: 'MachineDeployment' },
  { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfigTemplate' },
];
const lines = (plan: Plan) => plan.entries.map((e) => `${e.action} ${e.ref.kind} ${e.ref.name}`);

async function applied(client: FakeApplyClient, objects: KubeObject[]): Promise<void> {
  await executePlan(client, await planApply(client, set(objects)));
}

describe('planApply', () => {
  it('plans every object as a create on an empty cluster, in apply order', async () => {
    const client = new FakeApplyClient();
    const plan = await planApply(client, set(generation()));
    expect(plan.counts).toEqual({ create: 8, patch: 0, unchanged: 0, delete: 0, conflict: 0 });
    expect(lines(plan)).toEqual([
      'create Namespace demo',
      'create DevCluster demo',
      'create DevMachineTemplate demo-cp-1',
      'create DevMachineTemplate demo-worker-1',
      'create KubeadmConfigTemplate demo-worker-1',
      'create KubeadmControlPlane demo-cp',
      'create Cluster demo',
      'create MachineDeployment demo-worker',
    ]);
    // Reads only: lists by the set's label, across namespaces.
    expect(client.calls.every((c) => c.op === 'list')).toBe(true);
    expect(client.callsOf('list').filter((c) => c.labelSelector === `${objectSetHashKey}=${ownershipMetadata(owner).labels[objectSetHashKey]}`)).toHaveLength(7);
    expect(client.callsOf('list').filter((c) => c.labelSelector).every((c) => c.namespace === undefined)).toBe(true);
  });

  it('sends each object with its applied hash', async () => {
    const plan = await planApply(new FakeApplyClient(), set(generation()));
    expect(plan.entries.every((e) => typeof e.object.metadata.annotations?.[appliedHashKey] === 'string')).toBe(true);
  });

  it('plans nothing but unchanged after the same set was applied, even with fields others added', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation());
    const cluster = client.get(generation()[0]!)!;
    client.put({ ...cluster, status: { phase: 'Provisioned' }, metadata: { ...cluster.metadata, finalizers: ['cluster.cluster.x-k8s.io'] } });
    const plan = await planApply(client, set(generation()));
    expect(plan.counts).toEqual({ create: 0, patch: 0, unchanged: 8, delete: 0, conflict: 0 });
  });

  it('plans a patch for a changed field, a removed field, and drift someone caused', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation());
    const next = generation();
    (next[3]!.spec as { replicas: number }).replicas = 3; // KubeadmControlPlane: changed
    delete (next[0]!.spec as { paused?: boolean }).paused; // Cluster: removed
    const devCluster = client.get(next[2]!)!;
    client.put({ ...devCluster, spec: { backend: { docker: {} } } }); // DevCluster: drifted
    const plan = await planApply(client, set(next));
    const patches = plan.entries.filter((e) => e.action === 'patch').map((e) => `${e.ref.kind}: ${e.reasons.join(', ')}`);
    expect(patches).toEqual(['DevCluster: spec.backend.inMemory', 'KubeadmControlPlane: spec.replicas', 'Cluster: fields removed since the last apply']);
    expect(plan.counts.unchanged).toBe(5);
  });

  it('prunes exactly the objects the new generation no longer contains, last and in reverse order', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation(true));
    const plan = await planApply(client, set(generation(false)), { extraKinds: workerKinds });
    expect(plan.counts).toMatchObject({ delete: 3, unchanged: 5, create: 0, patch: 0 });
    expect(lines(plan).slice(-3)).toEqual(['delete MachineDeployment demo-worker', 'delete KubeadmConfigTemplate demo-worker-1', 'delete DevMachineTemplate demo-worker-1']);
  });

  it('does not plan a delete for an object already being deleted, and refuses to apply one still desired', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation(true));
    for (const name of ['demo-worker', 'demo-cp']) {
      const kind = name === 'demo-worker' ? 'MachineDeployment' : 'KubeadmControlPlane';
      const apiVersion = name === 'demo-worker' ? capi : 'controlplane.cluster.x-k8s.io/v1beta2';
      const current = client.get(owned(apiVersion, kind, name, 'demo'))!;
      client.put({ ...current, metadata: { ...current.metadata, deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: ['f'] } });
    }
    const plan = await planApply(client, set(generation(false)), { extraKinds: workerKinds });
    expect(plan.deleting.map((r) => r.name)).toEqual(['demo-worker']);
    expect(plan.entries.filter((e) => e.action === 'delete').map((e) => e.ref.kind)).toEqual(['KubeadmConfigTemplate', 'DevMachineTemplate']);
    expect(plan.entries.find((e) => e.ref.name === 'demo-cp')).toMatchObject({ action: 'conflict', blockedBy: 'deletion' });
    expect(formatPlan(plan)).toContain('(1 object(s) no longer desired are already being deleted: MachineDeployment demo/demo-worker)');
  });

  it('prunes a kind the generation no longer has at all only when asked to list it', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation(true));
    const withoutBootstrap = generation(true).filter((o) => o.kind !== 'KubeadmConfigTemplate');
    expect((await planApply(client, set(withoutBootstrap))).counts.delete).toBe(0);
    const plan = await planApply(client, set(withoutBootstrap), { extraKinds: [{ apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfigTemplate' }] });
    expect(plan.entries.filter((e) => e.action === 'delete').map((e) => e.ref.kind)).toEqual(['KubeadmConfigTemplate']);
  });

  it('lists an extra kind the server does not serve as not served, without failing', async () => {
    const client = new FakeApplyClient();
    client.unserved.add('example.com/Widget');
    const plan = await planApply(client, set(generation()), { extraKinds: [{ apiVersion: 'example.com/v1', kind: 'Widget' }] });
    expect(plan.kindsNotServed).toEqual(['example.com/Widget']);
    expect(plan.kindsListed).not.toContain('example.com/Widget');
  });

  it('never prunes what the topology controller copied from a ClusterClass template, though the copy carries our metadata', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation(true));
    // The controller's copy of a class template keeps the template's labels and annotations, and adds its own label.
    const copy = owned(infra, 'DevMachineTemplate', 'demo-worker-x7k2p', 'demo', { template: { spec: {} } });
    copy.metadata.labels = { ...copy.metadata.labels, 'topology.cluster.x-k8s.io/owned': '' };
    client.put(copy);
    const plan = await planApply(client, set(generation(true)), { extraKinds: workerKinds });
    expect(plan.counts.delete).toBe(0);
    expect(plan.entries.map((e) => e.ref.name)).not.toContain('demo-worker-x7k2p');
    // Without the controller's label the same object would be pruned: the exclusion is that label.
    delete copy.metadata.labels['topology.cluster.x-k8s.io/owned'];
    client.put(copy);
    expect((await planApply(client, set(generation(true)))).counts.delete).toBe(1);
  });

  it('never touches an object with our hash label but another owner in its annotations', async () => {
    const client = new FakeApplyClient();
    const impostor = owned(capi, 'MachineDeployment', 'not-ours', 'demo', {}, otherOwner);
    impostor.metadata.labels = { ...ownershipMetadata(owner).labels }; // our label, their annotations
    client.put(impostor);
    const sameName = owned(capi, 'MachineDeployment', 'not-ours', 'demo', { replicas: 1 });
    const plan = await planApply(client, set([...generation(), sameName]));
    const entry = plan.entries.find((e) => e.ref.name === 'not-ours')!;
    expect(entry.action).toBe('conflict');
    expect(entry.reasons[0]).toContain('demo/other');
    const pruning = await planApply(client, set(generation()));
    expect(pruning.counts.delete).toBe(0);
  });

  it('adopts an existing object in no set, and refuses one that another set owns', async () => {
    const client = new FakeApplyClient();
    client.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } });
    client.put(owned(infra, 'DevCluster', 'demo', 'demo', {}, otherOwner));
    const plan = await planApply(client, set(generation()));
    const byKind = Object.fromEntries(plan.entries.map((e) => [`${e.ref.kind}/${e.ref.name}`, e]));
    expect(byKind['Namespace/demo']).toMatchObject({ action: 'patch', reasons: ['exists outside any desired set: adopting it'] });
    expect(byKind['DevCluster/demo']?.action).toBe('conflict');
    expect(plan.counts).toMatchObject({ create: 6, patch: 1, conflict: 1 });
  });

  it('rejects objects without the owner metadata, and duplicates, naming each', async () => {
    const client = new FakeApplyClient();
    const stray = owned(capi, 'Cluster', 'stray', 'demo');
    delete stray.metadata.labels;
    stray.metadata.annotations![objectSetOwnerNameKey] = 'someone-else';
    const objects = [...generation(), stray, owned('v1', 'Namespace', 'demo', undefined)];
    const error = await planApply(client, set(objects)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const paths = (error as ConfigError).problems.map((p) => p.path);
    expect(paths).toEqual([
      'Cluster demo/stray metadata.annotations["objectset.rio.cattle.io/owner-name"]',
      'Cluster demo/stray metadata.labels["objectset.rio.cattle.io/hash"]',
      'Namespace demo',
    ]);
    expect(client.calls).toHaveLength(0);
  });
});

describe('formatPlan', () => {
  it('writes one line per object and a summary', async () => {
    const client = new FakeApplyClient();
    await applied(client, generation(true));
    const next = generation(false);
    (next[3]!.spec as { replicas: number }).replicas = 3;
    next.push(owned('v1', 'ConfigMap', 'extra', 'demo'));
    const text = formatPlan(await planApply(client, set(next), { extraKinds: workerKinds }));
    expect(text.split('\n')).toEqual([
      '= unchanged Namespace demo',
      '+ create ConfigMap demo/extra',
      '= unchanged DevCluster demo/demo',
      '= unchanged DevMachineTemplate demo/demo-cp-1',
      '~ patch KubeadmControlPlane demo/demo-cp: spec.replicas',
      '= unchanged Cluster demo/demo',
      '- delete MachineDeployment demo/demo-worker',
      '- delete KubeadmConfigTemplate demo/demo-worker-1',
      '- delete DevMachineTemplate demo/demo-worker-1',
      'Plan: 1 to create, 1 to patch, 3 to delete, 4 unchanged.',
      '',
    ]);
    expect(formatPlan(await planApply(client, set(next)), { unchanged: false })).not.toContain('unchanged Namespace');
  });
});
