/**
 * The in-memory platform: Cluster API's "dev" infrastructure provider (DevCluster,
 * DevMachineTemplate, group infrastructure.cluster.x-k8s.io/v1beta2) with its `inMemory`
 * backend, served by the bundled `capd-manager` (sigs.k8s.io/cluster-api/test v1.14.0).
 * Machines, etcd members, API servers and Nodes are simulated inside the controller,
 * so a cluster comes up anywhere, with no container runtime and no cloud.
 *
 * The settings are those of the provider's ClusterClass `in-memory`
 * (templates/clusterclass-in-memory.yaml), written as explicit objects.
 */
import { soundPools, type InstallConfig, type MachinePool } from '../../config/index.js';
import { coreControllers, type Platform, type PlatformKubeadm, type TemplateRole } from '../platform.js';
import { capiGroups, capiVersion, type InfrastructureCluster, type InfrastructureMachineTemplate, type UnnamedObject } from '../types.js';

export const inMemoryProviderVersion = 'sigs.k8s.io/cluster-api/test v1.14.0';

interface Provisioning {
  startupDuration: string;
  startupJitter: string;
}

export interface DevCluster extends InfrastructureCluster {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'DevCluster';
  spec: { backend: { inMemory: Record<string, never> } };
}

export interface DevMachineTemplate extends InfrastructureMachineTemplate {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'DevMachineTemplate';
  spec: {
    template: {
      spec: {
        backend: {
          inMemory: {
            vm: { provisioning: Provisioning };
            node: { provisioning: Provisioning };
            apiServer: { provisioning: Provisioning };
            etcd: { provisioning: Provisioning };
          };
        };
      };
    };
  };
}

/** The simulated kubelet never fills its disks; the class sets these so evictions never start. */
const evictionHard = { name: 'eviction-hard', value: 'nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%' };
const criSocket = 'unix:///var/run/containerd/containerd.sock';

export const inMemoryPlatform: Platform = {
  name: 'inmemory',
  description: 'simulated machines in the bundled in-memory provider; runs anywhere, no credentials',
  infrastructure: { apiVersion: `${capiGroups.infrastructure}/${capiVersion}`, clusterKind: 'DevCluster', machineTemplateKind: 'DevMachineTemplate' },
  providerVersion: inMemoryProviderVersion,
  rules: [
    {
      name: 'inmemory-taints-are-simulated',
      reads: ['platform'],
      check(config, report) {
        if (!config.platform.inmemory) return;
        soundPools(config, report).forEach(({ pool, index }) => {
          if (pool.taints.length > 0) {
            report.warn(['machinePools', index, 'taints'], 'in-memory Nodes are simulated: the taints are written to the kubeadm config, but the simulated Nodes do not carry them');
          }
        });
      },
    },
  ],

  infrastructureCluster(): UnnamedObject<DevCluster> {
    return { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DevCluster', spec: { backend: { inMemory: {} } } };
  },

  machineTemplate(_config: InstallConfig, pool: MachinePool): UnnamedObject<DevMachineTemplate> {
    const settings = pool.platform.inmemory;
    if (!settings) throw new Error(`pool ${pool.name} has no inmemory settings; defaults should have set them`);
    const jitter = String(settings.startupJitter);
    const provisioning = (startupDuration: string) => ({ provisioning: { startupDuration, startupJitter: jitter } });
    return {
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
      kind: 'DevMachineTemplate',
      spec: {
        template: {
          spec: {
            backend: {
              inMemory: {
                vm: provisioning(settings.startup.vm),
                node: provisioning(settings.startup.node),
                apiServer: provisioning(settings.startup.apiServer),
                etcd: provisioning(settings.startup.etcd),
              },
            },
          },
        },
      },
    };
  },

  kubeadm(_config: InstallConfig, role: TemplateRole): PlatformKubeadm {
    return {
      ...(role === 'controlPlane'
        ? { clusterConfiguration: { apiServer: { certSANs: ['localhost', '127.0.0.1', '0.0.0.0', 'host.docker.internal'] } } }
        : {}),
      nodeRegistration: { criSocket, kubeletExtraArgs: [evictionHard] },
    };
  },

  controllers() {
    return [...coreControllers(), { binary: 'capd-manager', provider: 'infrastructure-docker', featureGates: {}, bundled: true }];
  },

  credentialFiles() {
    return [];
  },
};
