/**
 * The in-memory platform: Cluster API's "dev" infrastructure provider (DevCluster,
 * DevMachineTemplate, group infrastructure.cluster.x-k8s.io/v1beta2) with its `inMemory`
 * backend, served by the bundled `capi-manager` (its development provider, from sigs.k8s.io/cluster-api/test v1.14.0).
 * Machines, etcd members, API servers and Nodes are simulated inside the controller,
 * so a cluster comes up anywhere, with no container runtime and no cloud.
 *
 * The settings are those of the provider's ClusterClass `in-memory`
 * (templates/clusterclass-in-memory.yaml), written as explicit objects.
 */
import { machineSection, type InstallConfig, type MachinePool } from '../../config/index.js';
import { clusterTopologyGate, coreControllers, type ControllerRequirement, type Platform, type PlatformKubeadm, type TemplateRole } from '../platform.js';
import { inMemoryConfig, inMemoryName } from './config.js';
import { capiGroups, capiVersion, type InfrastructureCluster, type InfrastructureClusterTemplate, type InfrastructureMachineTemplate, type UnnamedObject } from '../types.js';

const inMemoryProviderVersion = 'sigs.k8s.io/cluster-api/test v1.14.0';

interface Provisioning {
  startupDuration: string;
  startupJitter: string;
}

export interface DevCluster extends InfrastructureCluster {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'DevCluster';
  spec: { backend: { inMemory: Record<string, never> } };
}

/** The ClusterClass layout's infrastructure cluster template (the provider's ClusterClass `in-memory` has the same). */
export interface DevClusterTemplate extends InfrastructureClusterTemplate {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'DevClusterTemplate';
  spec: { template: { spec: DevCluster['spec'] } };
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
/** Every listener of the local control plane is on loopback, the simulated workload API servers too. */
const loopback = '127.0.0.1';

const infrastructureApiVersion = `${capiGroups.infrastructure}/${capiVersion}`;

/** The dev provider, which serves the in-memory backend: run by the same process as the core providers. */
const capd: ControllerRequirement = {
  binary: 'capi-manager',
  provider: 'infrastructure-docker',
  // Its DevClusterTemplate webhook refuses the ClusterClass layout's template without the gate.
  featureGates: { ...clusterTopologyGate },
  env: {
    // The in-memory backend publishes the simulated control-plane endpoints on this address.
    POD_IP: loopback,
    // Its debug server: any free port (upstream fixes 19000, which two control planes would share; a bundle patch reads this).
    PROVISIONER_INMEMORY_DEBUG_PORT: '0',
  },
  bundled: true,
};

export const inMemoryPlatform: Platform = {
  name: inMemoryName,
  description: 'simulated machines in the bundled in-memory provider; runs anywhere, no credentials',
  installConfig: inMemoryConfig,
  inputs: [],
  newSection: () => ({}),
  infrastructure: { apiVersion: infrastructureApiVersion, clusterKind: 'DevCluster', machineTemplateKind: 'DevMachineTemplate' },
  providerVersion: inMemoryProviderVersion,
  prunableKinds: [
    { apiVersion: infrastructureApiVersion, kind: 'DevMachineTemplate' },
    { apiVersion: infrastructureApiVersion, kind: 'DevClusterTemplate' },
  ],
  lifecycle: {
    // The provider's in-memory backend holds the VMs, etcd members and API servers in its process.
    machinesInController: true,
    stateKinds: [
      { apiVersion: infrastructureApiVersion, kind: 'DevCluster' },
      { apiVersion: infrastructureApiVersion, kind: 'DevMachine' },
    ],
  },

  infrastructureCluster(): UnnamedObject<DevCluster> {
    return { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DevCluster', spec: { backend: { inMemory: {} } } };
  },

  clusterClass: {
    clusterTemplateKind: 'DevClusterTemplate',
    infrastructureClusterTemplate(): UnnamedObject<DevClusterTemplate> {
      return { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DevClusterTemplate', spec: { template: { spec: { backend: { inMemory: {} } } } } };
    },
  },

  machineTemplate(_config: InstallConfig, pool: MachinePool): UnnamedObject<DevMachineTemplate> {
    const settings = machineSection(pool, inMemoryConfig);
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

  controllers: [...coreControllers(), capd],

  credentialFiles() {
    return [];
  },
};
