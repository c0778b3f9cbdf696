import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/client.js';
import { followTokenName, handoverSecret, isAgentHost, movingHosts, planNamespace, planNamespaceObjects } from './agents.js';

const host = (name: string, labels: Record<string, string> = {}): KubeObject => ({ apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name, uid: `u-${name}`, labels } });
const cluster = (name: string): KubeObject => ({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace: name } });
const inNs = (kind: string, name: string, namespace: string, extra: Partial<KubeObject> = {}): KubeObject => ({
  apiVersion: kind === 'NodePlan' ? 'agent.provisioner.dev/v1alpha1' : 'v1',
  kind,
  metadata: { name, namespace, uid: `u-${namespace}-${name}` },
  ...extra,
});

describe('movingHosts', () => {
  it('takes the Hosts labelled with a moved cluster, leaves unclaimed and other clusters\' hosts', () => {
    const claimed = host('h0', { 'cluster.x-k8s.io/cluster-name': 'c1', 'infrastructure.provisioner.dev/claimed-by': 'c1.c1-cp-abc' });
    const other = host('h1', { 'cluster.x-k8s.io/cluster-name': 'c2' });
    const free = host('h2');
    expect(movingHosts([claimed, other, free], [cluster('c1')]).map((h) => h.metadata.name)).toEqual(['h0']);
    expect(movingHosts([claimed, other, free], [cluster('c1'), cluster('c2')]).map((h) => h.metadata.name)).toEqual(['h0', 'h1']);
    expect(movingHosts([free], [cluster('c1')])).toEqual([]);
  });

  it('takes only the hosts held from the moved cluster\'s namespace when a same-named cluster lives in another', () => {
    const ours = host('h0', { 'cluster.x-k8s.io/cluster-name': 'c1', 'infrastructure.provisioner.dev/claimed-by': 'c1.c1-cp-abc' });
    const reserved = host('h3', { 'cluster.x-k8s.io/cluster-name': 'c1', 'infrastructure.provisioner.dev/endpoint-of': 'c1.c1' });
    const theirs = host('h1', { 'cluster.x-k8s.io/cluster-name': 'c1', 'infrastructure.provisioner.dev/claimed-by': 'team-b.c1-cp-xyz' });
    expect(movingHosts([ours, reserved, theirs], [cluster('c1')]).map((h) => h.metadata.name)).toEqual(['h0', 'h3']);
    const long = 'n'.repeat(50);
    const cut = host('h4', { 'cluster.x-k8s.io/cluster-name': 'c1', 'infrastructure.provisioner.dev/claimed-by': `${`${long}.c1-cp-abc`.slice(0, 46)}-0123456789abcdef` });
    expect(movingHosts([cut, theirs], [{ ...cluster('c1'), metadata: { name: 'c1', namespace: long } }]).map((h) => h.metadata.name)).toEqual(['h4']);
  });

  it('tells the agent\'s Host from other kinds named Host', () => {
    expect(isAgentHost(host('h'))).toBe(true);
    expect(isAgentHost({ apiVersion: 'example.com/v1', kind: 'Host' })).toBe(false);
  });
});

describe('planNamespaceObjects', () => {
  it('takes every plan and the Secrets and ConfigMaps a plan names or owns, never the hand-over Secret or unrelated ones', () => {
    const ns = planNamespace('h0');
    const plan = inNs('NodePlan', 'bootstrap', ns, { spec: { files: [{ path: '/x', contentRef: { secretKeyRef: { name: 'bootstrap-files', key: 'k' } } }, { path: '/y', contentRef: { configMapKeyRef: { name: 'cm', key: 'k' } } }] } });
    const reset = inNs('NodePlan', 'reset', ns, { spec: { instructions: [{ name: 'stop', command: '/bin/true' }] } });
    const files = inNs('Secret', 'bootstrap-files', ns);
    const cm = inNs('ConfigMap', 'cm', ns);
    const owned = { ...inNs('Secret', 'owned', ns), metadata: { name: 'owned', namespace: ns, ownerReferences: [{ apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'NodePlan', name: 'reset', uid: reset.metadata.uid! }] } };
    const handover = inNs('Secret', handoverSecret, ns, { data: { token: 'x' } });
    const unrelated = inNs('Secret', 'someone-else', ns);
    const picked = planNamespaceObjects([plan, reset], [files, cm, owned, handover, unrelated]).map((o) => `${o.kind}/${o.metadata.name}`);
    expect(picked.sort()).toEqual(['ConfigMap/cm', 'NodePlan/bootstrap', 'NodePlan/reset', 'Secret/bootstrap-files', 'Secret/owned']);
  });

  it('names the follow token after the host, so a resumed hand-over finds it', () => {
    expect(followTokenName('h0')).toBe('follow-h0');
    expect(planNamespace('h0')).toBe('host-h0');
  });
});
