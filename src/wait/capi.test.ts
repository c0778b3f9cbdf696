import { describe, expect, it } from 'vitest';
import { InfrastructureError, MachinesError } from '../errors.js';
import type { KubeObject } from '../kube/client.js';
import { capiCoreApiVersion, kubeadmControlPlaneApiVersion } from '../capi.js';
import { clusterDeleted, clusterReady, clusterRegistered, infrastructureReady, stallError, type Condition } from './capi.js';
import { snapshotKey, type Snapshot, type Verdict } from './waiter.js';

const ns = 'demo-ns';
const clusterLabel = { 'cluster.x-k8s.io/cluster-name': 'demo' };

function snapshotOf(...objects: KubeObject[]): Snapshot {
  const snapshot = new Map<string, Map<string, KubeObject>>();
  for (const obj of objects) {
    const key = `${obj.apiVersion}/${obj.kind}`;
    const byName = snapshot.get(key) ?? new Map<string, KubeObject>();
    byName.set(snapshotKey(obj), obj);
    snapshot.set(key, byName);
  }
  return snapshot;
}

function cluster(options: { provisioned?: boolean; host?: string; conditions?: Condition[] } = {}): KubeObject {
  return {
    apiVersion: capiCoreApiVersion,
    kind: 'Cluster',
    metadata: { name: 'demo', namespace: ns },
    spec: options.host ? { controlPlaneEndpoint: { host: options.host, port: 6443 } } : {},
    status: {
      phase: 'Provisioning',
      ...(options.provisioned !== undefined ? { initialization: { infrastructureProvisioned: options.provisioned } } : {}),
      conditions: options.conditions ?? [],
    },
  };
}

function machine(name: string, options: { node?: boolean; ready?: boolean; phase?: string; labels?: Record<string, string>; conditions?: Condition[] } = {}): KubeObject {
  return {
    apiVersion: capiCoreApiVersion,
    kind: 'Machine',
    metadata: { name, namespace: ns, labels: { ...clusterLabel, ...options.labels } },
    spec: { clusterName: 'demo' },
    status: {
      phase: options.phase ?? 'Running',
      ...(options.node ? { nodeRef: { name: `node-${name}` } } : {}),
      conditions: options.conditions ?? [{ type: 'Ready', status: options.ready ? 'True' : 'False', reason: 'NotReady' }],
    },
  };
}

const available: Condition = { type: 'Available', status: 'True' };

describe('infrastructureReady', () => {
  const evaluate = infrastructureReady('demo');

  it('waits without a Cluster', () => {
    expect(evaluate(snapshotOf()).state).toBe('waiting');
  });

  it('waits while the infrastructure is provisioned but no endpoint is published', () => {
    expect(evaluate(snapshotOf(cluster({ provisioned: true }))).state).toBe('waiting');
  });

  it('waits while the endpoint is set but infrastructureProvisioned is false', () => {
    expect(evaluate(snapshotOf(cluster({ provisioned: false, host: '127.0.0.1' }))).state).toBe('waiting');
  });

  it('is done when provisioned with an endpoint, showing only the Cluster', () => {
    const verdict = evaluate(snapshotOf(cluster({ provisioned: true, host: '127.0.0.1' }), machine('m1')));
    expect(verdict.state).toBe('done');
    expect(verdict.objects.map((o) => o.kind)).toEqual(['Cluster']);
  });

  it('shows the infrastructure cluster blocked by its provider\'s failing condition and message, not its summary Ready', () => {
    const infraKind = { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'ExampleCluster' };
    const infra = {
      ...infraKind,
      metadata: { name: 'demo', namespace: ns },
      status: {
        ready: false,
        conditions: [
          { type: 'Ready', status: 'False', reason: 'NetworkFailed', message: '0 of 8 completed' },
          { type: 'Paused', status: 'False', reason: 'NotPaused' },
          { type: 'NetworkReady', status: 'False', reason: 'NetworkFailed', message: 'failed to describe VPCs: dial tcp: lookup ec2.example: no such host' },
        ],
      },
    } as KubeObject;
    const verdict = infrastructureReady('demo', infraKind)(snapshotOf(cluster({ provisioned: false }), infra));
    expect(verdict.state).toBe('waiting');
    expect(verdict.objects.map((o) => o.kind)).toEqual(['Cluster', 'ExampleCluster']);
    expect(verdict.objects[1]).toMatchObject({ ready: false, parent: 'Cluster/demo', blocking: { condition: 'NetworkReady', message: expect.stringContaining('no such host') } });
  });

  it('ignores another cluster of the same namespace', () => {
    const other = { ...cluster({ provisioned: true, host: '127.0.0.1' }), metadata: { name: 'other', namespace: ns } };
    expect(evaluate(snapshotOf(other)).state).toBe('waiting');
  });

  it('fails when a machine failed', () => {
    const verdict = evaluate(snapshotOf(cluster({ provisioned: true, host: 'h' }), machine('m1', { phase: 'Failed' })));
    expect(verdict.state).toBe('failed');
    expect(verdict.state === 'failed' && verdict.error).toBeInstanceOf(MachinesError);
  });
});

describe('clusterRegistered (a cluster without a pod network)', () => {
  const initialized: Condition = { type: 'ControlPlaneInitialized', status: 'True' };
  it('is done when the control plane is initialized and every expected machine has a node, Ready or not', () => {
    const verdict = clusterRegistered('demo', 2)(snapshotOf(cluster({ conditions: [initialized] }), machine('a', { node: true, ready: false }), machine('b', { node: true, ready: false })));
    expect(verdict.state).toBe('done');
  });

  it('waits for a machine without a node, and for an uninitialized control plane', () => {
    expect(clusterRegistered('demo', 2)(snapshotOf(cluster({ conditions: [initialized] }), machine('a', { node: true }), machine('b', { node: false }))).state).toBe('waiting');
    expect(clusterRegistered('demo', 1)(snapshotOf(cluster(), machine('a', { node: true }))).state).toBe('waiting');
  });
});

describe('clusterReady', () => {
  it('is done when the Cluster is Available and every expected machine has a Ready node', () => {
    const verdict = clusterReady('demo', 2)(snapshotOf(cluster({ conditions: [available] }), machine('a', { node: true, ready: true }), machine('b', { node: true, ready: true })));
    expect(verdict.state).toBe('done');
  });

  it('waits for a machine that is Ready but has no nodeRef', () => {
    const verdict = clusterReady('demo', 2)(snapshotOf(cluster({ conditions: [available] }), machine('a', { node: true, ready: true }), machine('b', { node: false, ready: true })));
    expect(verdict.state).toBe('waiting');
    expect(verdict.objects.find((o) => o.name === 'b')?.ready).toBe(false);
  });

  it('waits for a machine with a node that is not Ready', () => {
    const verdict = clusterReady('demo', 1)(snapshotOf(cluster({ conditions: [available] }), machine('a', { node: true, ready: false })));
    expect(verdict.state).toBe('waiting');
  });

  it('waits while fewer machines exist than expected', () => {
    const verdict = clusterReady('demo', 3)(snapshotOf(cluster({ conditions: [available] }), machine('a', { node: true, ready: true }), machine('b', { node: true, ready: true })));
    expect(verdict.state).toBe('waiting');
  });

  it('waits while the Cluster is not Available even with all machines ready', () => {
    const verdict = clusterReady('demo', 1)(snapshotOf(cluster({ conditions: [{ type: 'Available', status: 'False' }] }), machine('a', { node: true, ready: true })));
    expect(verdict.state).toBe('waiting');
  });

  it('fails at once on a machine in phase Failed, naming it and its failing condition', () => {
    const failed = machine('cp-1', { phase: 'Failed', conditions: [{ type: 'InfrastructureReady', status: 'False', reason: 'VMFailed', message: 'quota exceeded' }] });
    const verdict = clusterReady('demo', 1)(snapshotOf(cluster({ conditions: [available] }), failed));
    expect(verdict.state).toBe('failed');
    if (verdict.state !== 'failed') return;
    expect(verdict.error).toBeInstanceOf(MachinesError);
    expect(verdict.error.message).toContain(`Machine ${ns}/cp-1 failed`);
    expect(verdict.error.message).toContain('InfrastructureReady: VMFailed quota exceeded');
    expect(verdict.error.hint).toMatch(/gather bootstrap/);
  });

  it('names the first failed machine by name order', () => {
    const verdict = clusterReady('demo', 2)(snapshotOf(cluster(), machine('z', { phase: 'Failed' }), machine('b', { phase: 'Failed' })));
    expect(verdict.state === 'failed' && verdict.error.message).toContain(`${ns}/b failed: `);
  });

  it('assigns parents from the control-plane-name and deployment-name labels, else the Cluster', () => {
    const kcp: KubeObject = { apiVersion: kubeadmControlPlaneApiVersion, kind: 'KubeadmControlPlane', metadata: { name: 'demo-cp', namespace: ns, labels: clusterLabel }, status: { conditions: [] } };
    const md: KubeObject = { apiVersion: capiCoreApiVersion, kind: 'MachineDeployment', metadata: { name: 'demo-md', namespace: ns }, spec: { clusterName: 'demo' }, status: {} };
    const verdict = clusterReady('demo', 3)(
      snapshotOf(
        cluster(),
        kcp,
        md,
        machine('m-cp', { labels: { 'cluster.x-k8s.io/control-plane-name': 'demo-cp' } }),
        machine('m-md', { labels: { 'cluster.x-k8s.io/deployment-name': 'demo-md' } }),
        machine('m-lone'),
      ),
    );
    const parents = Object.fromEntries(verdict.objects.map((o) => [`${o.kind}/${o.name}`, o.parent]));
    expect(parents).toEqual({
      'Cluster/demo': undefined,
      'KubeadmControlPlane/demo-cp': 'Cluster/demo',
      'MachineDeployment/demo-md': 'Cluster/demo',
      'Machine/m-cp': 'KubeadmControlPlane/demo-cp',
      'Machine/m-md': 'MachineDeployment/demo-md',
      'Machine/m-lone': 'Cluster/demo',
    });
  });

  it('shows the first non-True condition in order of preference as blocking, not the first listed', () => {
    const c = cluster({
      conditions: [
        { type: 'Available', status: 'False', reason: 'NotAvailable' },
        { type: 'WorkersAvailable', status: 'False', reason: 'NoWorkers' },
        { type: 'InfrastructureReady', status: 'True' },
        { type: 'ControlPlaneInitialized', status: 'False', reason: 'WaitingForKCP', message: 'first line\n\n  second line\nthird line' },
      ],
    });
    const [view] = clusterReady('demo', 0)(snapshotOf(c)).objects;
    expect(view).toMatchObject({ kind: 'Cluster', ready: false, phase: 'Provisioning' });
    // Two first non-empty lines joined; the third dropped.
    expect(view?.blocking).toEqual({ condition: 'ControlPlaneInitialized', reason: 'WaitingForKCP', message: 'first line second line' });
  });

  it('truncates long condition messages to 200 characters', () => {
    const long = 'x'.repeat(500);
    const m = machine('m', { conditions: [{ type: 'BootstrapConfigReady', status: 'False', reason: 'Waiting', message: long }] });
    const view = clusterReady('demo', 1)(snapshotOf(cluster(), m)).objects.find((o) => o.kind === 'Machine');
    expect(view?.blocking?.message).toHaveLength(200);
    expect(view?.blocking?.message?.endsWith('...')).toBe(true);
  });

  it('shows no blocking condition on a ready object', () => {
    const view = clusterReady('demo', 0)(snapshotOf(cluster({ conditions: [available, { type: 'WorkersAvailable', status: 'False' }] }))).objects[0];
    expect(view?.ready).toBe(true);
    expect(view?.blocking).toBeUndefined();
  });
});

describe('clusterDeleted', () => {
  it('waits while any object of the cluster remains, and is done when none does', () => {
    expect(clusterDeleted('demo')(snapshotOf(machine('a'))).state).toBe('waiting');
    expect(clusterDeleted('demo')(snapshotOf(cluster())).state).toBe('waiting');
    const otherCluster = { ...machine('x'), metadata: { name: 'x', namespace: ns, labels: { 'cluster.x-k8s.io/cluster-name': 'other' } }, spec: {} };
    expect(clusterDeleted('demo')(snapshotOf(otherCluster)).state).toBe('done');
  });
});

describe('stallError', () => {
  const last: Verdict = {
    state: 'waiting',
    objects: [
      { type: 'object', kind: 'Cluster', namespace: ns, name: 'demo', ready: true },
      { type: 'object', kind: 'Machine', namespace: ns, name: 'm1', ready: false, blocking: { condition: 'InfrastructureReady', reason: 'Pending', message: 'waiting for VM' } },
      { type: 'object', kind: 'Machine', name: 'm2', ready: false, phase: 'Provisioning' },
    ],
  };

  it('names what stalled, for how long, and every object not ready with its blocking condition', () => {
    const error = stallError('control plane', last, 125_400, 'machines');
    expect(error).toBeInstanceOf(MachinesError);
    expect(error.message).toBe('No progress on control plane for 125 s');
    expect(error.details).toEqual([`Machine ${ns}/m1: InfrastructureReady Pending — waiting for VM`, 'Machine m2: Provisioning']);
  });

  it('is an InfrastructureError for the infrastructure stage', () => {
    expect(stallError('infrastructure', last, 1000, 'infrastructure')).toBeInstanceOf(InfrastructureError);
  });
});
