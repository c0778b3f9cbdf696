import { describe, expect, it } from 'vitest';
import { controllerProcesses } from './controller-processes.js';
import type { ProviderSpec } from './local-controlplane.js';

const spec = (provider: string, controller: string | undefined, extra: Partial<ProviderSpec> = {}): ProviderSpec => ({
  provider,
  namespace: `${provider}-system`,
  componentsFile: `/b/components/${provider}.yaml`,
  ...(controller ? { controller, binaryPath: `/b/bin/${controller}` } : {}),
  ...extra,
});

describe('controllerProcesses', () => {
  it('runs one process for the providers one binary serves, told which by --providers, with their gates and environment merged', () => {
    const processes = controllerProcesses([
      spec('cluster-api', 'capi-manager', { selectsProviders: true, featureGates: { ClusterTopology: true } }),
      spec('bootstrap-kubeadm', 'capi-manager', { selectsProviders: true }),
      spec('infrastructure-docker', 'capi-manager', { selectsProviders: true, featureGates: { ClusterTopology: true }, env: { POD_IP: '127.0.0.1' } }),
      spec('infrastructure-aws', 'capa-manager', { featureGates: { EKS: false }, env: { AWS_PROFILE: 'ops' } }),
      spec('infrastructure-crd-only', undefined),
    ]);
    expect(processes).toEqual([
      {
        name: 'capi-manager',
        binaryPath: '/b/bin/capi-manager',
        providers: ['cluster-api', 'bootstrap-kubeadm', 'infrastructure-docker'],
        featureGates: { ClusterTopology: true },
        args: { providers: 'cluster-api,bootstrap-kubeadm,infrastructure-docker' },
        env: { POD_IP: '127.0.0.1' },
      },
      // A binary of one provider takes no --providers flag (capa-manager has none).
      { name: 'capa-manager', binaryPath: '/b/bin/capa-manager', providers: ['infrastructure-aws'], featureGates: { EKS: false }, args: {}, env: { AWS_PROFILE: 'ops' } },
    ]);
  });

  it('names the gate and the provider when two providers of one process want it set differently', () => {
    expect(() =>
      controllerProcesses([
        spec('cluster-api', 'capi-manager', { selectsProviders: true, featureGates: { MachinePool: true } }),
        spec('control-plane-kubeadm', 'capi-manager', { selectsProviders: true, featureGates: { MachinePool: false } }),
      ]),
    ).toThrow('capi-manager: feature gate MachinePool: control-plane-kubeadm needs false, another provider of the same process true');
  });
});
