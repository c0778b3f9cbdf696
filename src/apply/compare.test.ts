import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/client.js';
import { appliedHash, appliedHashKey, applyContent, canonicalJson, driftPaths, withAppliedHash } from './compare.js';

const base = (): KubeObject => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'MachineDeployment',
  metadata: { name: 'md', namespace: 'ns', labels: { 'a/b': 'c' } },
  spec: { replicas: 2, template: { spec: { items: [{ name: 'x', value: 1 }] } } },
});

describe('applied hash', () => {
  it('ignores key order, server metadata, status and its own annotation', () => {
    const a = base();
    const b: KubeObject = {
      spec: { template: { spec: { items: [{ value: 1, name: 'x' }] } }, replicas: 2 },
      metadata: { namespace: 'ns', name: 'md', labels: { 'a/b': 'c' }, resourceVersion: '9', uid: 'u', annotations: { [appliedHashKey]: 'old' } },
      kind: 'MachineDeployment',
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      status: { ready: true },
    };
    expect(appliedHash(a)).toBe(appliedHash(b));
    expect(applyContent(b).metadata).toEqual({ namespace: 'ns', name: 'md', labels: { 'a/b': 'c' } });
  });

  it('changes when a field is removed', () => {
    const removed = base();
    delete (removed.spec as { replicas?: number }).replicas;
    expect(appliedHash(removed)).not.toBe(appliedHash(base()));
  });

  it('is carried by the object to send', () => {
    const send = withAppliedHash(base());
    expect(send.metadata.annotations?.[appliedHashKey]).toBe(appliedHash(base()));
    expect(appliedHash(send)).toBe(appliedHash(base()));
  });

  it('canonical JSON drops undefined and sorts keys', () => {
    expect(canonicalJson({ b: 1, a: undefined, c: [undefined, { z: 1, y: 2 }] })).toBe('{"b":1,"c":[null,{"y":2,"z":1}]}');
  });
});

describe('driftPaths', () => {
  it('is empty when the live object holds every field we set, whatever others added', () => {
    const live: KubeObject = { ...base(), status: { phase: 'Running' }, metadata: { ...base().metadata, uid: 'u', finalizers: ['f'], labels: { 'a/b': 'c', other: 'x' } } };
    (live.spec as Record<string, unknown>).strategy = { type: 'RollingUpdate' };
    expect(driftPaths(base(), live)).toEqual([]);
  });

  it('names changed, missing and resized fields', () => {
    const live = base();
    (live.spec as { replicas: number }).replicas = 3;
    live.metadata.labels = {};
    (live.spec as { template: { spec: { items: unknown[] } } }).template.spec.items.push({ name: 'y' });
    expect(driftPaths(base(), live)).toEqual(['metadata.labels["a/b"]', 'spec.replicas', 'spec.template.spec.items']);
  });

  it('stops at the limit', () => {
    const live = base();
    live.metadata.labels = {};
    (live.spec as { replicas: number }).replicas = 9;
    expect(driftPaths(base(), live, 1)).toHaveLength(1);
  });
});
