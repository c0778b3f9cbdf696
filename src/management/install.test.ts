import { describe, expect, it } from 'vitest';
import { describePlan, type ManagementInstallResult } from './install.js';

describe('describePlan (--dry-run)', () => {
  it('names each Deployment and image, the certificates to issue and every object it would create or apply over', () => {
    const result: ManagementInstallResult = {
      providers: [{ provider: 'cluster-api', namespace: 'capi-system', name: 'capi-controller-manager', version: 'v1.14.2', image: 'provisioner.local/capi-manager:v1.14.2' }],
      created: ['Namespace capi-system', 'Deployment capi-system/capi-controller-manager'],
      changed: [],
      unchanged: ['CustomResourceDefinition clusters.cluster.x-k8s.io'],
      certificatesIssued: ['CA', 'capi-system'],
      images: [{ ref: 'provisioner.local/capi-manager:v1.14.2', file: '', loaded: false }],
      dryRun: true,
      timings: { imagesMs: 0, availableMs: 0, totalMs: 1 },
    };
    expect(describePlan(result).split('\n')).toEqual([
      'provider cluster-api v1.14.2: Deployment capi-system/capi-controller-manager running provisioner.local/capi-manager:v1.14.2',
      'image provisioner.local/capi-manager:v1.14.2',
      'certificates to issue: CA, capi-system',
      'create Namespace capi-system',
      'create Deployment capi-system/capi-controller-manager',
      'apply (exists) CustomResourceDefinition clusters.cluster.x-k8s.io',
    ]);
  });
});
