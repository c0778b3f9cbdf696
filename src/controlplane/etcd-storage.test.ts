import { describe, expect, it } from 'vitest';
import { storageKey } from './etcd-storage.js';

describe('storageKey', () => {
  it('is the API server registry key: group, resource, namespace, name; no group segment for core kinds; no namespace for cluster-scoped', () => {
    expect(storageKey({ group: 'cluster.x-k8s.io', resource: 'machines', namespace: 'ns', name: 'm-0' })).toBe('/registry/cluster.x-k8s.io/machines/ns/m-0');
    expect(storageKey({ group: '', resource: 'secrets', namespace: 'ns', name: 'kubeconfig' })).toBe('/registry/secrets/ns/kubeconfig');
    expect(storageKey({ group: 'agent.provisioner.dev', resource: 'hosts', name: 'h1' })).toBe('/registry/agent.provisioner.dev/hosts/h1');
  });
});
