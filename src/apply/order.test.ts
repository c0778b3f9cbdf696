import { describe, expect, it } from 'vitest';
import { applyRanks, rankName, rankOf, unknownKindRank } from './order.js';

describe('rankOf', () => {
  it('orders namespaces, configuration, templates, control plane, cluster, machines', () => {
    const ordered = [
      rankOf('v1', 'Namespace'),
      rankOf('v1', 'Secret'),
      rankOf('infrastructure.cluster.x-k8s.io/v1beta2', 'DevMachineTemplate'),
      rankOf('controlplane.cluster.x-k8s.io/v1beta2', 'KubeadmControlPlane'),
      rankOf('cluster.x-k8s.io/v1beta2', 'Cluster'),
      rankOf('cluster.x-k8s.io/v1beta2', 'MachineDeployment'),
    ];
    expect(ordered).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('puts the infrastructure cluster and bootstrap templates with the templates', () => {
    expect(rankOf('infrastructure.cluster.x-k8s.io/v1beta2', 'DevCluster')).toBe(2);
    expect(rankOf('bootstrap.cluster.x-k8s.io/v1beta2', 'KubeadmConfigTemplate')).toBe(2);
  });

  it('prefers a suffix pattern over a whole group: a control-plane template is a template', () => {
    expect(rankOf('controlplane.cluster.x-k8s.io/v1beta2', 'KubeadmControlPlaneTemplate')).toBe(2);
  });

  it('matches by group, not version, and only the core group for core kinds', () => {
    expect(rankOf('cluster.x-k8s.io/v1beta1', 'Cluster')).toBe(4);
    expect(rankOf('example.com/v1', 'Namespace')).toBe(unknownKindRank);
    expect(rankOf('example.com/v1', 'Widget')).toBe(unknownKindRank);
  });

  it('names every rank of the table', () => {
    expect(applyRanks.map((r) => r.rank)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(rankName(4)).toBe('cluster');
    expect(rankName(9)).toBe('rank 9');
  });
});
