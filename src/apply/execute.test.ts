import { describe, expect, it } from 'vitest';
import { ownershipMetadata, type DesiredSetOwner } from '../config/ownership.js';
import { ConfigError, InfrastructureError, InterruptedError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { KubeApiError, type KubeObject } from '../kube/client.js';
import type { Sleep } from '../concurrency.js';
import {
  ApplyFailedError,
  ApplyInterruptedError,
  ManifestsRejectedError,
  applyResultOf,
  dryRunPlan,
  dryRunStandInNamespace,
  executePlan,
  isRefusal,
  isRetryable,
} from './execute.js';
import { FakeApplyClient } from '../../test/support/fake-apply-client.js';
import { planApply, type DesiredSet } from './plan.js';

const owner: DesiredSetOwner = { setId: 'provisioner-cluster', ownerGvk: 'provisioner.dev/v1alpha1, Kind=InstallConfig', ownerName: 'demo', ownerNamespace: 'demo' };
const capi = 'cluster.x-k8s.io/v1beta2';
const infra = 'infrastructure.cluster.x-k8s.io/v1beta2';

function owned(apiVersion: string, kind: string, name: string, namespace: string | undefined, spec: Record<string, unknown> = {}): KubeObject {
  const meta = ownershipMetadata(owner);
  return { apiVersion, kind, metadata: { name, ...(namespace ? { namespace } : {}), labels: { ...meta.labels }, annotations: { ...meta.annotations } }, spec };
}

function generation(workers = 2): KubeObject[] {
  const objects = [
    owned(capi, 'Cluster', 'demo', 'demo'),
    owned('v1', 'Namespace', 'demo', undefined),
    owned('v1', 'Secret', 'demo-credentials', 'demo'),
    owned(infra, 'DevCluster', 'demo', 'demo'),
    owned('controlplane.cluster.x-k8s.io/v1beta2', 'KubeadmControlPlane', 'demo-cp', 'demo', { replicas: 1 }),
    owned(infra, 'DevMachineTemplate', 'demo-cp-1', 'demo'),
  ];
  for (let i = 0; i < workers; i++) {
    objects.push(owned(capi, 'MachineDeployment', `demo-w${i}`, 'demo', { replicas: 1 }));
    objects.push(owned(infra, 'DevMachineTemplate', `demo-w${i}-1`, 'demo'));
  }
  return objects;
}

const set = (objects: KubeObject[]): DesiredSet => ({ owner, objects });
const extraKinds = [{ apiVersion: capi, kind: 'MachineDeployment' }];

/** Records waits instead of waiting. */
function fakeSleep(): { sleep: Sleep; waits: number[] } {
  const waits: number[] = [];
  return { waits, sleep: async (ms) => void waits.push(ms) };
}

const webhookDown = () => new KubeApiError(500, 'InternalError', 'Internal error occurred: failed calling webhook "validation.devcluster.infrastructure.cluster.x-k8s.io": dial tcp 127.0.0.1:4443: connect: connection refused', 'DevCluster demo/demo');
const invalid = (object: string, message: string) => new KubeApiError(422, 'Invalid', `DevMachineTemplate.infrastructure.cluster.x-k8s.io "x" is invalid: ${message}`, object);

describe('executePlan', () => {
  it('applies rank by rank and deletes last, in reverse rank order', async () => {
    const client = new FakeApplyClient();
    await executePlan(client, await planApply(client, set(generation(2))));
    const firstApplies = client.callsOf('apply').map((c) => c.key.split('/')[1]);
    expect(firstApplies.slice(0, 2)).toEqual(['Namespace', 'Secret']);
    expect(firstApplies.slice(2, 6).every((k) => k === 'DevCluster' || k === 'DevMachineTemplate')).toBe(true);
    expect(firstApplies.slice(6)).toEqual(['KubeadmControlPlane', 'Cluster', 'MachineDeployment', 'MachineDeployment']);

    client.calls.length = 0;
    const shrunk = generation(0);
    shrunk.push(owned(capi, 'MachineHealthCheck', 'demo-mhc', 'demo'));
    const result = await executePlan(client, await planApply(client, set(shrunk), { extraKinds }));
    const writes = client.calls.filter((c) => c.op !== 'list').map((c) => `${c.op} ${c.key.split('/')[1]}`);
    expect(writes).toEqual(['apply MachineHealthCheck', 'delete MachineDeployment', 'delete MachineDeployment', 'delete DevMachineTemplate', 'delete DevMachineTemplate']);
    expect(result.counts).toMatchObject({ created: 1, deleted: 4, unchanged: 6, failed: 0, skipped: 0 });
    expect(result.objects).toHaveLength(11);
  });

  it('runs a rank in parallel, bounded by the concurrency', async () => {
    const client = new FakeApplyClient();
    const many = [owned('v1', 'Namespace', 'demo', undefined), ...Array.from({ length: 30 }, (_, i) => owned('v1', 'ConfigMap', `cm-${i}`, 'demo'))];
    const plan = await planApply(client, set(many));
    client.maxInFlight = 0;
    await executePlan(client, plan, { concurrency: 4 });
    expect(client.maxInFlight).toBe(4);
    expect(client.objects.size).toBe(31);
  });

  it('retries a webhook that is not serving yet, and conflicts, with exponential backoff', async () => {
    const client = new FakeApplyClient();
    client.failure = (call, attempt) => {
      if (call.op !== 'apply') return undefined;
      if (call.key.includes('/DevCluster/') && attempt <= 3) return webhookDown();
      if (call.key.includes('/Cluster/') && attempt === 1) return new KubeApiError(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again');
      return undefined;
    };
    const { sleep, waits } = fakeSleep();
    const sink = new RecordingSink();
    const result = await executePlan(client, await planApply(client, set(generation(1))), { sleep, sink, retry: { initialDelayMs: 100, maxDelayMs: 300 } });
    expect(waits.sort((a, b) => a - b)).toEqual([100, 100, 200, 300]);
    const devCluster = result.objects.find((o) => o.ref.kind === 'DevCluster')!;
    expect(devCluster).toMatchObject({ outcome: 'created', attempts: 4 });
    expect(result.objects.find((o) => o.ref.kind === 'Cluster')).toMatchObject({ outcome: 'created', attempts: 2 });
    expect(sink.ofType('log').filter((l) => l.message.startsWith('retrying DevCluster demo/demo'))).toHaveLength(3);
  });

  it('gives up after the maximum attempts and reports an infrastructure failure', async () => {
    const client = new FakeApplyClient();
    client.failure = (call) => (call.op === 'apply' && call.key.includes('/DevCluster/') ? webhookDown() : undefined);
    const { sleep, waits } = fakeSleep();
    const error = await executePlan(client, await planApply(client, set(generation(1))), { sleep, retry: { maxAttempts: 3 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyFailedError);
    expect(error).toBeInstanceOf(InfrastructureError);
    expect(waits).toHaveLength(2);
    const result = applyResultOf(error)!;
    expect(result.objects.find((o) => o.ref.kind === 'DevCluster')).toMatchObject({ outcome: 'failed', attempts: 3, error: { statusCode: 500, refused: false } });
    expect((error as ApplyFailedError).details).toEqual([expect.stringMatching(/^DevCluster demo\/demo: Internal error occurred: failed calling webhook/)]);
  });

  it('reports refused objects one by one as a ConfigError, finishing their rank and skipping the rest', async () => {
    const client = new FakeApplyClient();
    const before = await planApply(client, set(generation(2)));
    await executePlan(client, before);
    // The next generation changes two templates' contents and removes a worker pool.
    const next = generation(1).map((o) => (o.kind === 'DevMachineTemplate' || o.kind === 'KubeadmControlPlane' ? { ...o, spec: { edited: true } } : o));
    client.failure = (call) => {
      if (call.op !== 'apply') return undefined;
      if (call.key.endsWith('/demo-cp-1')) return invalid('DevMachineTemplate demo/demo-cp-1', 'spec.template.spec: Invalid value: "object": DevMachineTemplate spec.template.spec field is immutable');
      if (call.key.endsWith('/demo-w0-1')) return invalid('DevMachineTemplate demo/demo-w0-1', 'spec.edited: field not declared in schema');
      return undefined;
    };
    const { sleep, waits } = fakeSleep();
    const plan = await planApply(client, set(next), { extraKinds });
    expect(plan.counts).toMatchObject({ patch: 3, delete: 2 });
    const error = await executePlan(client, plan, { sleep }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ManifestsRejectedError);
    expect(error).toBeInstanceOf(ConfigError);
    expect(waits).toEqual([]); // a refusal is final: no retry
    const rejected = error as ManifestsRejectedError;
    expect(rejected.message).toBe('2 of 10 objects failed to apply (at apply templates and infrastructure); 3 later object(s) and deletes not attempted');
    expect(rejected.details).toEqual([
      'DevMachineTemplate demo/demo-cp-1: DevMachineTemplate.infrastructure.cluster.x-k8s.io "x" is invalid: spec.template.spec: Invalid value: "object": DevMachineTemplate spec.template.spec field is immutable',
      'DevMachineTemplate demo/demo-w0-1: DevMachineTemplate.infrastructure.cluster.x-k8s.io "x" is invalid: spec.edited: field not declared in schema',
    ]);
    const outcomes = Object.fromEntries(rejected.result.objects.map((o) => [`${o.ref.kind} ${o.ref.name}`, o.outcome]));
    expect(outcomes).toEqual({
      'Namespace demo': 'unchanged',
      'Secret demo-credentials': 'unchanged',
      'DevCluster demo': 'unchanged',
      'DevMachineTemplate demo-cp-1': 'failed',
      'DevMachineTemplate demo-w0-1': 'failed',
      'KubeadmControlPlane demo-cp': 'skipped',
      'Cluster demo': 'unchanged',
      'MachineDeployment demo-w0': 'unchanged',
      'MachineDeployment demo-w1': 'skipped',
      'DevMachineTemplate demo-w1-1': 'skipped',
    });
    expect(rejected.result.objects).toHaveLength(10);
    // Nothing was pruned.
    expect(client.get(owned(capi, 'MachineDeployment', 'demo-w1', 'demo'))).toBeDefined();
  });

  it('calls a mix of refusals and server failures an infrastructure failure, with every object in the details', async () => {
    const client = new FakeApplyClient();
    client.failure = (call) => {
      if (call.op !== 'apply') return undefined;
      if (call.key.endsWith('/demo-cp-1')) return invalid('DevMachineTemplate demo/demo-cp-1', 'bad');
      if (call.key.includes('/DevCluster/')) return new KubeApiError(0, 'ConnectionError', 'connect ECONNREFUSED 127.0.0.1:6443', 'DevCluster demo/demo');
      return undefined;
    };
    const error = await executePlan(client, await planApply(client, set(generation(0))), { sleep: fakeSleep().sleep }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyFailedError);
    expect((error as ApplyFailedError).details).toHaveLength(2);
  });

  it('emits object progress and a debug line per object', async () => {
    const client = new FakeApplyClient();
    const sink = new RecordingSink();
    await executePlan(client, await planApply(client, set(generation(1))), { sink });
    const progress = sink.ofType('progress');
    expect(progress.every((p) => p.unit === 'objects' && p.total === 8)).toBe(true);
    expect(progress.at(-1)).toMatchObject({ current: 8, done: true });
    expect(progress.map((p) => p.current)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 8]);
    const perObject = sink.ofType('log').filter((l) => l.level === 'debug' && l.fields?.outcome === 'created');
    expect(perObject).toHaveLength(8);
    expect(perObject[0]).toMatchObject({ message: 'created Namespace demo', fields: { kind: 'Namespace', name: 'demo', attempts: 1 } });
  });

  it('stops at an abort, reporting what was not applied', async () => {
    const client = new FakeApplyClient();
    const controller = new AbortController();
    client.failure = (call) => {
      if (call.op === 'apply' && call.key.includes('/DevCluster/')) controller.abort();
      return undefined;
    };
    const plan = await planApply(client, set(generation(1)));
    const error = await executePlan(client, plan, { signal: controller.signal, concurrency: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyInterruptedError);
    expect(error).toBeInstanceOf(InterruptedError);
    const result = applyResultOf(error)!;
    expect(result.counts.created).toBe(3); // Namespace, Secret, and the DevCluster in flight
    expect(result.counts.skipped).toBe(5);
    expect(client.objects.size).toBe(3);
  });

  it('never applies an object in conflict, and fails it', async () => {
    const client = new FakeApplyClient();
    const foreign = owned(infra, 'DevCluster', 'demo', 'demo');
    foreign.metadata.annotations!['objectset.rio.cattle.io/owner-name'] = 'other';
    client.put(foreign);
    const plan = await planApply(client, set(generation(0)));
    expect(plan.counts.conflict).toBe(1);
    const error = await executePlan(client, plan).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ManifestsRejectedError);
    expect((error as ConfigError).details[0]).toMatch(/^DevCluster demo\/demo: not applied: belongs to desired set "provisioner-cluster" of .* demo\/other$/);
    expect(client.callsOf('apply').some((c) => c.key.includes('/DevCluster/'))).toBe(false);
    expect(client.get(foreign)?.metadata.annotations?.['objectset.rio.cattle.io/owner-name']).toBe('other');
  });

  it('fails an object still being deleted as a state of the cluster, not of the manifests', async () => {
    const client = new FakeApplyClient();
    const going = owned(infra, 'DevCluster', 'demo', 'demo');
    client.put({ ...going, metadata: { ...going.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } });
    const error = await executePlan(client, await planApply(client, set(generation(0)))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyFailedError);
    expect((error as ApplyFailedError).details[0]).toMatch(/^DevCluster demo\/demo: not applied: is being deleted since 2026-01-01T00:00:00Z/);
    expect(applyResultOf(error)?.objects.find((o) => o.ref.kind === 'DevCluster')?.error).toMatchObject({ reason: 'BeingDeleted', refused: false });
  });
});

describe('dryRunPlan', () => {
  it('reports every refused object without writing, checking objects of a new namespace in a stand-in', async () => {
    const client = new FakeApplyClient();
    client.failure = (call) => {
      if (call.op === 'apply' && call.key.endsWith('/demo-w0-1')) return invalid('DevMachineTemplate demo/demo-w0-1', 'spec.bad: field not declared in schema');
      if (call.op === 'apply' && call.key.endsWith('/demo-cp-1')) return invalid('DevMachineTemplate demo/demo-cp-1', 'spec.worse: Required value');
      return undefined;
    };
    const plan = await planApply(client, set(generation(1)));
    const report = await dryRunPlan(client, plan, { sleep: fakeSleep().sleep });
    expect(report.checked).toBe(8);
    expect(report.problems.map((p) => `${p.ref.name}: ${p.message}`)).toEqual([
      'demo-cp-1: DevMachineTemplate.infrastructure.cluster.x-k8s.io "x" is invalid: spec.worse: Required value',
      'demo-w0-1: DevMachineTemplate.infrastructure.cluster.x-k8s.io "x" is invalid: spec.bad: field not declared in schema',
    ]);
    expect(report.problems[0]).toMatchObject({ statusCode: 422, reason: 'Invalid', checkedInNamespace: dryRunStandInNamespace });
    expect(client.objects.size).toBe(0);
    const applies = client.callsOf('apply');
    expect(applies.every((c) => c.dryRun)).toBe(true);
    expect(applies.filter((c) => c.key.includes(`/${dryRunStandInNamespace}/`))).toHaveLength(7);
  });

  it('throws when objects could not be checked at all', async () => {
    const client = new FakeApplyClient();
    client.failure = (call) => (call.op === 'apply' ? new KubeApiError(503, 'ServiceUnavailable', 'the server is currently unable to handle the request') : undefined);
    const plan = await planApply(client, set(generation(0)));
    const error = await dryRunPlan(client, plan, { sleep: fakeSleep().sleep, retry: { maxAttempts: 2 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InfrastructureError);
    expect((error as InfrastructureError).details).toHaveLength(6);
  });
});

describe('error classes', () => {
  it('treats a webhook denial as final and a webhook that cannot be called as transient', () => {
    const denied = new KubeApiError(403, 'Forbidden', 'admission webhook "validation.machinedeployment.cluster.x-k8s.io" denied the request: spec.selector: Invalid value');
    const deniedInvalid = new KubeApiError(422, 'Invalid', 'admission webhook "x" denied the request: spec: Forbidden');
    expect([isRefusal(denied), isRetryable(denied)]).toEqual([true, false]);
    expect([isRefusal(deniedInvalid), isRetryable(deniedInvalid)]).toEqual([true, false]);
    expect([isRefusal(webhookDown()), isRetryable(webhookDown())]).toEqual([false, true]);
    expect(isRetryable(new KubeApiError(409, 'Conflict', 'modified'))).toBe(true);
    expect(isRetryable(new KubeApiError(403, 'Forbidden', 'User "x" cannot patch'))).toBe(false);
    expect(isRetryable(new Error('bug'))).toBe(false);
  });

  it("treats server-side apply's 500 for a field the schema lacks as a refusal", () => {
    const typedPatch = new KubeApiError(500, 'Internal Server Error', 'failed to create typed patch object (ns/c; infrastructure.cluster.x-k8s.io/v1beta2, Kind=DevCluster): .spec.bogus: field not declared in schema');
    expect([isRefusal(typedPatch), isRetryable(typedPatch)]).toEqual([true, false]);
  });

  it('writes a multi-line server message on one detail line', async () => {
    const client = new FakeApplyClient();
    client.failure = (call) => (call.op === 'apply' && call.key.includes('/DevCluster/') ? invalid('DevCluster demo/demo', 'is immutable. Diff: {\n-  a: 1,\n+  a: 2,\n}') : undefined);
    const error = (await executePlan(client, await planApply(client, set(generation(0)))).catch((e: unknown) => e)) as ManifestsRejectedError;
    expect(error.details).toEqual(['DevCluster demo/demo: DevMachineTemplate.infrastructure.cluster.x-k8s.io "x" is invalid: is immutable. Diff: { - a: 1, + a: 2, }']);
    expect(error.result.objects.find((o) => o.outcome === 'failed')?.error?.message).toContain('\n-  a: 1,');
  });
});
