import { describe, expect, it } from 'vitest';
import type { KubeObject, OwnerReference } from '../kube/client.js';
import { contentDifference, copiedContent, copyBody, keyOf, mergePatchBetween, orderByOwners, remapOwnerReferences, sameContent, selectObjects, statusForCopy, statusRebuiltByControllers } from './graph.js';

function obj(kind: string, name: string, uid: string, owners: string[] = [], extra: Partial<KubeObject> = {}, labels: Record<string, string> = {}): KubeObject {
  const ownerReferences: OwnerReference[] = owners.map((o) => ({ apiVersion: 'x/v1', kind: 'Owner', name: o, uid: o }));
  return {
    apiVersion: kind === 'Secret' || kind === 'ConfigMap' ? 'v1' : 'cluster.x-k8s.io/v1beta2',
    kind,
    metadata: { name, namespace: 'ns', uid, labels, ...(ownerReferences.length ? { ownerReferences } : {}) },
    ...extra,
  };
}

describe('orderByOwners', () => {
  it('puts owners in earlier tiers than their dependents', () => {
    const cluster = obj('Cluster', 'c', 'u-cluster');
    const md = obj('MachineDeployment', 'md', 'u-md', ['u-cluster']);
    const ms = obj('MachineSet', 'ms', 'u-ms', ['u-md']);
    const machine = obj('Machine', 'm', 'u-m', ['u-ms']);
    const secret = obj('Secret', 'c-kubeconfig', 'u-s', ['u-cluster']);
    const foreign = obj('ConfigMap', 'x', 'u-x', ['not-in-set']);
    const tiers = orderByOwners([machine, secret, ms, foreign, md, cluster]);
    const tierOf = (o: KubeObject) => tiers.findIndex((t) => t.includes(o));
    expect(tierOf(cluster)).toBe(0);
    expect(tierOf(foreign)).toBe(0);
    expect(tierOf(md)).toBeGreaterThan(tierOf(cluster));
    expect(tierOf(secret)).toBeGreaterThan(tierOf(cluster));
    expect(tierOf(ms)).toBeGreaterThan(tierOf(md));
    expect(tierOf(machine)).toBeGreaterThan(tierOf(ms));
    expect(tiers.flat()).toHaveLength(6);
  });

  it('puts an owner cycle in a last tier instead of looping', () => {
    const a = obj('A', 'a', 'ua', ['ub']);
    const b = obj('B', 'b', 'ub', ['ua']);
    const root = obj('Cluster', 'c', 'uc');
    const tiers = orderByOwners([a, b, root]);
    expect(tiers).toHaveLength(2);
    expect(tiers[1]!.map((o) => o.metadata.name).sort()).toEqual(['a', 'b']);
  });
});

describe('remapOwnerReferences', () => {
  it('replaces source UIDs with target UIDs and drops unknown owners', () => {
    const refs: OwnerReference[] = [
      { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', name: 'c', uid: 'src-1', controller: true },
      { apiVersion: 'v1', kind: 'Other', name: 'o', uid: 'src-unknown' },
    ];
    const { refs: out, complete } = remapOwnerReferences(refs, new Map([['src-1', 'dst-1']]));
    expect(out).toEqual([{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', name: 'c', uid: 'dst-1', controller: true }]);
    expect(complete).toBe(false);
    expect(remapOwnerReferences(refs.slice(0, 1), new Map([['src-1', 'dst-1']])).complete).toBe(true);
  });
});

describe('copyBody and sameContent', () => {
  it('strips server metadata and status, keeps spec, adds the annotation', () => {
    const source = obj('Cluster', 'c', 'u1', [], { spec: { paused: true, x: 1 }, status: { phase: 'Provisioned' } });
    source.metadata.resourceVersion = '42';
    source.metadata.creationTimestamp = '2026-01-01T00:00:00Z';
    const body = copyBody(source, [], { 'a/b': 'u1' });
    expect(body.metadata.uid).toBeUndefined();
    expect(body.metadata.resourceVersion).toBeUndefined();
    expect(body['status']).toBeUndefined();
    expect(body['spec']).toEqual({ paused: true, x: 1 });
    expect(body.metadata.annotations).toEqual({ 'a/b': 'u1' });
    const target = { ...body, metadata: { ...body.metadata, uid: 'u2' }, spec: { x: 1, paused: false } };
    expect(sameContent(source, target, true)).toBe(true);
    expect(sameContent(source, target, false)).toBe(false);
    expect(sameContent(source, { ...target, spec: { x: 2 } }, true)).toBe(false);
  });
});

describe('selectObjects', () => {
  it('takes owned and named Secrets, the cluster Secrets, and move-labelled ones; leaves the rest', () => {
    const cluster = obj('Cluster', 'c', 'uc', [], { spec: {} });
    const machine = obj('Machine', 'm', 'um', ['uc'], { spec: { bootstrap: { dataSecretName: 'm-bootstrap' } } });
    const other = obj('Machine', 'other', 'uo', [], {}, { 'cluster.x-k8s.io/cluster-name': 'd' });
    const secrets = [
      obj('Secret', 'c-kubeconfig', 's1'),
      obj('Secret', 'c-ca', 's2'),
      obj('Secret', 'm-bootstrap', 's3'),
      obj('Secret', 'owned', 's4', ['um']),
      obj('ConfigMap', 'labelled', 's5', [], {}, { 'clusterctl.cluster.x-k8s.io/move': '' }),
      obj('Secret', 'unrelated', 's6'),
    ];
    const all = selectObjects({ clusters: [cluster], candidates: [machine, other], secretsAndConfigMaps: secrets });
    expect(all.objects.map((o) => o.metadata.name).sort()).toEqual(['c', 'c-ca', 'c-kubeconfig', 'labelled', 'm', 'm-bootstrap', 'other', 'owned']);
    const only = selectObjects({ clusters: [cluster], candidates: [machine, other], secretsAndConfigMaps: secrets, onlyTheseClusters: true });
    expect(only.objects.map(keyOf)).not.toContain(keyOf(other));
    expect(only.objects.map((o) => o.metadata.name)).toContain('m');
  });
});

describe('contentDifference', () => {
  it('names the first differing path, and nothing for equal content in another key order', () => {
    const a = obj('Machine', 'm', 'u1', [], { spec: { clusterName: 'c', version: 'v1' } }, { x: '1' });
    const b = obj('Machine', 'm', 'u2', [], { spec: { version: 'v1', clusterName: 'c' } }, { x: '1' });
    expect(contentDifference(a, b)).toBeUndefined();
    expect(contentDifference(a, { ...b, spec: { clusterName: 'c', version: 'v2' } })).toBe('spec.version');
    expect(contentDifference(a, { ...b, metadata: { ...b.metadata, labels: { x: '2' } } })).toBe('labels.x');
  });
});

describe('statusRebuiltByControllers', () => {
  it('is true for the groups of Cluster API providers (clusterctl contract: status is never restored), false for any other', () => {
    for (const group of ['cluster.x-k8s.io', 'infrastructure.cluster.x-k8s.io', 'bootstrap.cluster.x-k8s.io', 'controlplane.cluster.x-k8s.io', 'ipam.cluster.x-k8s.io']) expect(statusRebuiltByControllers(group), group).toBe(true);
    for (const group of ['agent.provisioner.dev', '', 'example.com', 'notcluster.x-k8s.io']) expect(statusRebuiltByControllers(group), group).toBe(false);
  });
});

describe('statusForCopy', () => {
  const plan = (generation: number, status: Record<string, unknown>): KubeObject => ({
    apiVersion: 'agent.provisioner.dev/v1alpha1',
    kind: 'NodePlan',
    metadata: { name: 'day2', namespace: 'host-h0', generation },
    status,
  });

  it("rewrites an observedGeneration that was current in the source to the copy's, the status's own and each condition's", () => {
    const source = plan(3, { phase: 'Applied', observedGeneration: 3, conditions: [{ type: 'Applied', status: 'True', observedGeneration: 3 }, { type: 'Other', status: 'True' }] });
    const copied = statusForCopy(source, 1);
    expect(copied['status']).toEqual({ phase: 'Applied', observedGeneration: 1, conditions: [{ type: 'Applied', status: 'True', observedGeneration: 1 }, { type: 'Other', status: 'True' }] });
    expect(source['status']).toMatchObject({ observedGeneration: 3 }); // the source's object is left as it was
  });

  it('keeps a status that lagged its spec behind the copy too, so the new spec is still acted on', () => {
    expect(statusForCopy(plan(3, { phase: 'Applied', observedGeneration: 2 }), 1)['status']).toEqual({ phase: 'Applied', observedGeneration: 0 });
  });

  it('leaves an object alone without a status, a generation or an observedGeneration', () => {
    const noStatus = plan(2, {});
    delete noStatus['status'];
    expect(statusForCopy(noStatus, 1)).toBe(noStatus);
    expect(statusForCopy(plan(2, { phase: 'Applied' }), 1)['status']).toEqual({ phase: 'Applied' });
    const secret: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'ns' } };
    expect(statusForCopy(secret, undefined)).toBe(secret);
  });
});

describe('mergePatchBetween', () => {
  it('sets what changed or was added, nulls what was removed, replaces arrays whole, and is undefined when equal', () => {
    const current = { spec: { replicas: 1, gone: 'x', nested: { keep: 1, drop: 2 } }, metadata: { labels: { a: '1', b: '2' }, ownerReferences: [{ uid: 'u1' }, { uid: 'u2' }] } };
    const desired = { spec: { replicas: 3, nested: { keep: 1 }, added: true }, metadata: { labels: { a: '1' }, ownerReferences: [{ uid: 'u2' }] } };
    expect(mergePatchBetween(current, desired)).toEqual({
      spec: { replicas: 3, gone: null, nested: { drop: null }, added: true },
      metadata: { labels: { b: null }, ownerReferences: [{ uid: 'u2' }] },
    });
    expect(mergePatchBetween({ a: { x: 1, y: [1, { b: 2, a: 1 }] } }, { a: { y: [1, { a: 1, b: 2 }], x: 1 } })).toBeUndefined();
  });

  it('levels a stale copy with its source: applying the patch to the copy gives the source content', () => {
    const source = obj('Machine', 'm', 'u1', [], { spec: { clusterName: 'c', providerID: 'p-1' } }, { 'cluster.x-k8s.io/set-name': 'ms' });
    const copy = obj('Machine', 'm', 'u9', [], { spec: { clusterName: 'c', failureDomain: 'old' } }, { stale: 'yes' });
    const patch = mergePatchBetween(copiedContent(copy), copiedContent(source)) as Record<string, unknown>;
    const applyMerge = (target: unknown, p: unknown): unknown => {
      if (!p || typeof p !== 'object' || Array.isArray(p)) return p;
      const out: Record<string, unknown> = { ...((target && typeof target === 'object' && !Array.isArray(target) ? target : {}) as Record<string, unknown>) };
      for (const [k, v] of Object.entries(p)) {
        if (v === null) delete out[k];
        else out[k] = applyMerge(out[k], v);
      }
      return out;
    };
    expect(applyMerge(copiedContent(copy), patch)).toEqual(copiedContent(source));
  });
});
