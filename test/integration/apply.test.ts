/**
 * The desired-set apply engine against the real local control plane (etcd, kube-apiserver,
 * the provider CRDs, webhooks and controllers from the bundle), with the manifests the
 * generator makes for a default in-memory install config: one control-plane machine and
 * a worker pool of one. The tests run in order on one control plane and one set.
 * Fails (never skips) when the bundle is missing: loadCatalog throws with the hint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ManifestsRejectedError,
  dryRunPlan,
  dryRunStandInNamespace,
  executePlan,
  formatPlan,
  planApply,
  type DesiredSet,
  type KindRef,
} from '../../src/apply/index.js';
import { defaultKubernetesVersion, desiredSetSelector, newInstallConfigDocument, validateInstallConfigDocument } from '../../src/config/index.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { ConfigError } from '../../src/errors.js';
import { RecordingSink } from '../support/recording-sink.js';
import { fieldManager, type KubeObject } from '../../src/kube/client.js';
import { generateManifests, type GeneratedManifest } from '../../src/platforms/generate.js';
import { defaultPlatform, installConfigSchema } from '../../src/platforms/registry.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { removeInstallDir, tempInstallDir, waitFor } from './support/controlplane.js';

const clusterName = 'apply-it';

function generate() {
  const document = newInstallConfigDocument({ name: clusterName, platform: defaultPlatform.name, kubernetesVersion: defaultKubernetesVersion, controlPlaneReplicas: 1, workers: 1, platformAnswers: {} }, {});
  return generateManifests(validateInstallConfigDocument(document, { schema: installConfigSchema }).config);
}

const manifestSet = generate();
const objectsOf = (manifests: readonly GeneratedManifest[]): KubeObject[] => manifests.map((m) => structuredClone(m.object) as unknown as KubeObject);
const fullSet = (): DesiredSet => ({ owner: manifestSet.owner, objects: objectsOf(manifestSet.manifests) });
const withoutWorkers = (): DesiredSet => ({ owner: manifestSet.owner, objects: objectsOf(manifestSet.manifests.filter((m) => m.pool !== 'worker')) });
/** Every kind the platform generates: a generation without workers has no MachineDeployment at all, yet the old one must be pruned. */
const platformKinds: KindRef[] = [...new Map(manifestSet.manifests.map((m) => [`${m.object.apiVersion}/${m.object.kind}`, { apiVersion: m.object.apiVersion, kind: m.object.kind }])).values()];
const describeManifest = (m: GeneratedManifest) => `${m.object.kind} ${m.object.metadata.namespace ? `${m.object.metadata.namespace}/` : ''}${m.object.metadata.name}`;

describe('desired-set apply against the real local control plane', () => {
  let dir = '';
  const sink = new RecordingSink();
  const abort = new AbortController();
  let cp: LocalControlPlane | undefined;

  const kube = () => {
    if (!cp) throw new Error('no control plane: the boot failed');
    return cp.kube;
  };
  /** Every live object of the set, as `Kind ns/name`, sorted. */
  const liveSet = async (): Promise<string[]> => {
    const selector = desiredSetSelector(manifestSet.owner);
    const found: string[] = [];
    for (const { apiVersion, kind } of platformKinds) {
      for (const item of await kube().list(apiVersion, kind, { labelSelector: selector })) {
        if (!item.metadata.deletionTimestamp) found.push(`${kind} ${item.metadata.namespace ? `${item.metadata.namespace}/` : ''}${item.metadata.name}`);
      }
    }
    return found.sort();
  };

  beforeAll(async () => {
    expect(manifestSet.manifests.map((m) => m.object.kind)).toEqual(['Namespace', 'Cluster', 'DevCluster', 'DevMachineTemplate', 'KubeadmControlPlane', 'DevMachineTemplate', 'KubeadmConfigTemplate', 'MachineDeployment']);
    dir = await tempInstallDir('apply');
    cp = await prepareLocalControlPlane({ dir, detached: false, sink, signal: abort.signal });
    await cp.start();
  });

  afterAll(async () => {
    await cp?.stop().catch(() => undefined);
    abort.abort();
    await removeInstallDir(dir);
  });

  it('dry-runs the first generation against the real CRDs and webhooks without writing anything', async () => {
    const plan = await planApply(kube(), fullSet(), { extraKinds: platformKinds });
    expect(plan.counts).toEqual({ create: 8, patch: 0, unchanged: 0, delete: 0, conflict: 0 });
    const report = await dryRunPlan(kube(), plan);
    expect(report).toMatchObject({ checked: 8, problems: [] });
    expect(await kube().get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: manifestSet.namespace } })).toBeUndefined();
    expect(await kube().list('cluster.x-k8s.io/v1beta2', 'Cluster', { namespace: dryRunStandInNamespace })).toEqual([]);
  });

  it('creates every object on the first apply, in dependency order', async () => {
    const plan = await planApply(kube(), fullSet(), { extraKinds: platformKinds });
    expect(formatPlan(plan).split('\n').slice(0, 3)).toEqual([`+ create Namespace ${clusterName}`, `+ create DevCluster ${clusterName}/${clusterName}`, expect.stringMatching(/^\+ create DevMachineTemplate /)]);
    const result = await executePlan(kube(), plan, { sink });
    expect(result.counts).toMatchObject({ created: 8, failed: 0, skipped: 0 });
    expect(result.objects.map((o) => o.ref.kind)).toEqual(['Namespace', 'DevCluster', 'DevMachineTemplate', 'DevMachineTemplate', 'KubeadmConfigTemplate', 'KubeadmControlPlane', 'Cluster', 'MachineDeployment']);
    expect(await liveSet()).toEqual(manifestSet.manifests.map(describeManifest).sort());
    const progress = sink.ofType('progress').filter((p) => p.task === 'apply:objects');
    expect(progress.at(-1)).toMatchObject({ current: 8, total: 8, unit: 'objects', done: true });
  });

  it('plans all unchanged on a second apply, after the controllers and webhooks have written to the objects', async () => {
    // The Cluster controller adds its finalizer and owner references on the parts; wait for that so the comparison sees their writes.
    await waitFor(
      'the Cluster controller to reconcile',
      async () => (await kube().get({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: clusterName, namespace: manifestSet.namespace } }))?.metadata.finalizers?.length,
      120_000,
    );
    const plan = await planApply(kube(), fullSet(), { extraKinds: platformKinds });
    expect(formatPlan(plan, { unchanged: false })).toBe('Plan: 0 to create, 0 to patch, 0 to delete, 8 unchanged.\n');
    const result = await executePlan(kube(), plan);
    expect(result.counts.unchanged).toBe(8);
  });

  it('deletes exactly the worker pool (MachineDeployment and its two templates) when the pool leaves the set', async () => {
    const plan = await planApply(kube(), withoutWorkers(), { extraKinds: platformKinds });
    const workerObjects = manifestSet.manifests.filter((m) => m.pool === 'worker');
    expect(plan.counts).toEqual({ create: 0, patch: 0, unchanged: 5, delete: 3, conflict: 0 });
    expect(plan.entries.filter((e) => e.action === 'delete').map((e) => `${e.ref.kind} ${e.ref.namespace}/${e.ref.name}`).sort()).toEqual(workerObjects.map(describeManifest).sort());
    expect(plan.entries.at(0)?.action).not.toBe('delete');
    expect(plan.entries.slice(-3).map((e) => e.ref.kind)[0]).toBe('MachineDeployment'); // machines first among the deletes
    const result = await executePlan(kube(), plan);
    expect(result.counts).toMatchObject({ deleted: 3, unchanged: 5, failed: 0 });
    const remaining = manifestSet.manifests.filter((m) => m.pool !== 'worker').map(describeManifest).sort();
    // The MachineDeployment has a finalizer: gone (or terminating) once its controller let go.
    await waitFor('the worker pool to be gone', async () => JSON.stringify(await liveSet()) === JSON.stringify(remaining), 120_000);
    expect(await liveSet()).toEqual(remaining);
  });

  describe('a manifest edited to be invalid', () => {
    const invalidSet = (): DesiredSet => {
      const set = withoutWorkers();
      const objects = set.objects.map((obj) => {
        // A type error against the DevCluster CRD schema.
        if (obj.kind === 'DevCluster') return { ...obj, spec: { backend: { inMemory: 'not an object' } } };
        // A change to an immutable template, which the DevMachineTemplate webhook refuses.
        if (obj.kind === 'DevMachineTemplate') return { ...obj, spec: { template: { spec: { backend: { inMemory: { vm: { provisioning: { startupDuration: '99s' } } } } } } } };
        return obj;
      });
      return { ...set, objects };
    };

    it('is reported by the dry-run object by object, with nothing written', async () => {
      const before = await Promise.all(invalidSet().objects.map((o) => kube().get(o)));
      const plan = await planApply(kube(), invalidSet(), { extraKinds: platformKinds });
      expect(plan.counts).toEqual({ create: 0, patch: 2, unchanged: 3, delete: 0, conflict: 0 });
      const report = await dryRunPlan(kube(), plan);
      expect(report.checked).toBe(2);
      const byKind = Object.fromEntries(report.problems.map((p) => [p.ref.kind, p]));
      expect(Object.keys(byKind).sort()).toEqual(['DevCluster', 'DevMachineTemplate']);
      // Server-side apply reports a value of the wrong type as a 500 (kubernetes/kubernetes#139253): still the manifest's fault.
      expect(byKind.DevCluster?.statusCode).toBe(500);
      expect(byKind.DevCluster?.message).toContain('failed to create typed patch object');
      expect(byKind.DevCluster?.message).toContain('.spec.backend.inMemory: expected map');
      expect(byKind.DevMachineTemplate?.statusCode).toBe(422);
      expect(byKind.DevMachineTemplate?.message).toMatch(/denied the request.*immutable|immutable.*denied the request|field is immutable/i);
      const after = await Promise.all(invalidSet().objects.map((o) => kube().get(o)));
      // What the apply's field manager owns, not resourceVersion, generation or the whole spec:
      // the running controllers write into these objects meanwhile (status, conditions, and the
      // Cluster's spec.controlPlaneEndpoint, which its controller copies from the DevCluster
      // once that is ready), and that is not the apply writing.
      const applied = (o: KubeObject | undefined) => (o?.metadata['managedFields'] as { manager?: string }[] | undefined)?.filter((f) => f.manager === fieldManager);
      expect(after.map(applied)).toEqual(before.map(applied));
      expect(after.every((o) => (applied(o)?.length ?? 0) === 1)).toBe(true);
      // And neither refused value is in the cluster.
      const devCluster = after.find((o) => o?.kind === 'DevCluster') as (KubeObject & { spec: { backend: { inMemory: unknown } } }) | undefined;
      expect(typeof devCluster?.spec.backend.inMemory).toBe('object');
      const machineTemplate = after.find((o) => o?.kind === 'DevMachineTemplate');
      expect(JSON.stringify(machineTemplate?.spec)).not.toContain('99s');
    });

    it('fails the apply with a ConfigError carrying each object with the server message', async () => {
      const plan = await planApply(kube(), invalidSet(), { extraKinds: platformKinds });
      const error = await executePlan(kube(), plan).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ManifestsRejectedError);
      expect(error).toBeInstanceOf(ConfigError);
      const rejected = error as ManifestsRejectedError;
      expect(rejected.details).toHaveLength(2);
      expect(rejected.details.find((d) => d.startsWith(`DevCluster ${clusterName}/${clusterName}: `))).toContain('spec.backend.inMemory');
      expect(rejected.details.find((d) => d.startsWith('DevMachineTemplate '))).toMatch(/immutable/i);
      expect(rejected.result.objects.filter((o) => o.outcome === 'failed').map((o) => o.ref.kind).sort()).toEqual(['DevCluster', 'DevMachineTemplate']);
      expect(rejected.result.objects).toHaveLength(5);
      // And the valid set still applies as unchanged: the refused writes changed nothing.
      expect((await planApply(kube(), withoutWorkers(), { extraKinds: platformKinds })).counts.unchanged).toBe(5);
    });
  });
});
