import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/client.js';
import { orderByOwners, selectObjects } from './graph.js';

const ns = 'demo';
const templateRef = (kind: string, name: string) => ({ apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind, name });

/** A topology Cluster, its ClusterClass, the class's templates (owned by the class, as its controller sets), none labelled with the cluster's name. */
function topologyObjects() {
  const clusterClass: KubeObject = {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'ClusterClass',
    metadata: { name: 'demo-class', namespace: ns, uid: 'u-class' },
    spec: {
      infrastructure: { templateRef: templateRef('DevClusterTemplate', 'demo-cluster-1') },
      controlPlane: { templateRef: { ...templateRef('KubeadmControlPlaneTemplate', 'demo-cp-1'), apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2' }, machineInfrastructure: { templateRef: templateRef('DevMachineTemplate', 'demo-cp-2') } },
    },
  };
  const cluster: KubeObject = { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'demo', namespace: ns, uid: 'u-cluster' }, spec: { topology: { classRef: { name: 'demo-class' }, version: 'v1.36.3' } } };
  const template = (kind: string, name: string, uid: string, ownedByClass: boolean): KubeObject => ({
    apiVersion: kind === 'KubeadmControlPlaneTemplate' ? 'controlplane.cluster.x-k8s.io/v1beta2' : 'infrastructure.cluster.x-k8s.io/v1beta2',
    kind,
    metadata: { name, namespace: ns, uid, ...(ownedByClass ? { ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'ClusterClass', name: 'demo-class', uid: 'u-class' }] } : {}) },
    spec: { template: { spec: {} } },
  });
  const templates = [template('DevClusterTemplate', 'demo-cluster-1', 'u-t1', true), template('KubeadmControlPlaneTemplate', 'demo-cp-1', 'u-t2', false), template('DevMachineTemplate', 'demo-cp-2', 'u-t3', true)];
  const unrelated = template('DevMachineTemplate', 'someone-else', 'u-x', false);
  return { cluster, clusterClass, templates, unrelated };
}

describe('a ClusterClass in a move', () => {
  it('moves with the one Cluster that uses it, with every template it names (owned by it or not), and nothing else', () => {
    const { cluster, clusterClass, templates, unrelated } = topologyObjects();
    const only = selectObjects({ clusters: [cluster], candidates: [clusterClass, ...templates, unrelated], secretsAndConfigMaps: [], onlyTheseClusters: true });
    expect(only.objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'Cluster/demo',
      'ClusterClass/demo-class',
      'DevClusterTemplate/demo-cluster-1',
      'DevMachineTemplate/demo-cp-2',
      'KubeadmControlPlaneTemplate/demo-cp-1',
    ]);
  });

  it('is created before the Clusters that use it, so deleted after them (its webhook refuses to delete a class in use)', () => {
    const { cluster, clusterClass, templates } = topologyObjects();
    const tiers = orderByOwners([cluster, ...templates, clusterClass]);
    const tierOf = (o: KubeObject) => tiers.findIndex((t) => t.includes(o));
    expect(tierOf(clusterClass)).toBe(0);
    expect(tierOf(cluster)).toBeGreaterThan(tierOf(clusterClass));
    expect(tierOf(templates[0]!)).toBeGreaterThan(tierOf(clusterClass));
    // A classic Cluster (no topology) still has no one to wait for.
    const classic: KubeObject = { ...cluster, spec: {} };
    expect(orderByOwners([classic, clusterClass]).map((t) => t.length)).toEqual([2]);
  });
});
