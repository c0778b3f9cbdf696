/**
 * The hosts platform: real kubeadm clusters on machines that already exist (bare metal,
 * VMs from anywhere, or the namespace test hosts of test/support/netns.ts), each running
 * the node agent (`provisioner hosts registration-command`). Our own infrastructure
 * provider (provider/api/infrastructure, served by capi-manager) claims a registered
 * Host for each HostMachine by its pool's selector and role, and turns the Machine's
 * kubeadm bootstrap data (cloud-config) into a NodePlan the host's agent runs; deleting a
 * HostMachine runs a reset plan and frees the host.
 *
 * The kubeadm settings (./node-settings.ts) make kubeadm work without systemd, on cgroup
 * v1, with images imported from archives of the bundle instead of pulled.
 */
import { controlPlanePool, hasRole, listenAddressSchema, machineSection, platformSection, type InstallConfig, type MachinePool } from '../../config/index.js';
import { agentController, coreControllers, type Platform, type PlatformKubeadm, type TemplateRole } from '../platform.js';
import type { InfrastructureCluster, InfrastructureClusterTemplate, InfrastructureMachineTemplate, UnnamedObject } from '../types.js';
import { hostsConfig, hostsName, hostsPlatformSchema, type HostsMachine } from './config.js';
import { loadImagesOnHosts } from './images.js';
import { hostsInClusterArtifacts } from './in-cluster-artifacts.js';
import { destroyHostsCluster, waitForHosts, watchHostPlans } from './registration.js';
import * as node from './node-settings.js';

const hostsApiVersion = 'infrastructure.provisioner.dev/v1alpha1';
/** Written against the provider of this repository (provider/api/infrastructure/v1alpha1). */
const hostsProviderVersion = 'provisioner.dev/provider infrastructure.provisioner.dev/v1alpha1';

interface LabelSelector {
  matchLabels?: Record<string, string>;
}

export interface HostCluster extends InfrastructureCluster {
  apiVersion: typeof hostsApiVersion;
  kind: 'HostCluster';
  spec: {
    /** Set by the user; absent: the provider sets it to the first control-plane host's address. */
    controlPlaneEndpoint?: { host: string; port: number };
    /** Which hosts the default endpoint may be taken from: the control-plane pool's selector. */
    controlPlaneHostSelector?: LabelSelector;
  };
}

export interface HostClusterTemplate extends InfrastructureClusterTemplate {
  apiVersion: typeof hostsApiVersion;
  kind: 'HostClusterTemplate';
  spec: { template: { spec: HostCluster['spec'] } };
}

export interface HostMachineTemplate extends InfrastructureMachineTemplate {
  apiVersion: typeof hostsApiVersion;
  kind: 'HostMachineTemplate';
  /** prepareCommands: what a claimed Host runs in its prepare plan, before the Machine's bootstrap data exists (the image imports). */
  spec: { template: { spec: { hostSelector: LabelSelector; prepareCommands: string[] } } };
}

function hostsSection(config: InstallConfig) {
  const section = platformSection(config, hostsConfig);
  if (!section) throw new Error('the hosts platform was asked to generate for a config without platform.hosts');
  return section;
}

/** A pool's label selector, keys sorted (the template's name hashes its spec). */
function poolSelector(pool: MachinePool): LabelSelector {
  const machine: HostsMachine | undefined = machineSection(pool, hostsConfig);
  const labels = Object.entries(machine?.hostSelector.matchLabels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return labels.length ? { matchLabels: Object.fromEntries(labels) } : {};
}

const kubeadmFiles = [{ path: node.kubeletRunScript.path, content: node.kubeletRunScript.content, permissions: '0755', owner: 'root:root' }];

const hostsEndpoint = hostsPlatformSchema.fields.controlPlaneEndpoint.node.fields.host.node;

export const hostsPlatform: Platform = {
  name: hostsName,
  description: 'Machines you already have, each running the node agent: real kubeadm, kubelet and containerd, images from the bundle (no registry)',
  installConfig: hostsConfig,
  inputs: [
    // Written to bootstrap.listenAddress (newBootstrapSection), which this platform requires.
    { key: 'listenAddress', valueName: 'ip', description: 'address of this machine the hosts reach the local control plane at (bootstrap.listenAddress)', label: 'Address of this machine the hosts reach', required: true, node: listenAddressSchema },
    { key: 'hostsEndpoint', valueName: 'address', description: 'control-plane endpoint of a hosts cluster (default: the first control-plane host\'s address)', label: 'Control-plane endpoint (empty: the first control-plane host)', node: hostsEndpoint },
  ],
  newSection(answers) {
    return answers.hostsEndpoint ? { controlPlaneEndpoint: { host: answers.hostsEndpoint } } : {};
  },
  newBootstrapSection(answers) {
    return answers.listenAddress ? { listenAddress: answers.listenAddress } : undefined;
  },
  infrastructure: { apiVersion: hostsApiVersion, clusterKind: 'HostCluster', machineTemplateKind: 'HostMachineTemplate' },
  providerVersion: hostsProviderVersion,
  prunableKinds: [
    { apiVersion: hostsApiVersion, kind: 'HostMachineTemplate' },
    { apiVersion: hostsApiVersion, kind: 'HostClusterTemplate' },
  ],
  lifecycle: {
    // The hosts' agents, and the reset plans destroy runs, need the manager: the control plane stays up as the cluster's management.
    machinesInController: true,
    stateKinds: [
      { apiVersion: hostsApiVersion, kind: 'HostCluster' },
      { apiVersion: hostsApiVersion, kind: 'HostMachine' },
    ],
  },

  infrastructureCluster(config: InstallConfig): UnnamedObject<HostCluster> {
    const endpoint = hostsSection(config).controlPlaneEndpoint;
    return {
      apiVersion: hostsApiVersion,
      kind: 'HostCluster',
      spec: endpoint ? { controlPlaneEndpoint: { host: endpoint.host, port: endpoint.port } } : { controlPlaneHostSelector: poolSelector(controlPlanePool(config)) },
    };
  },

  clusterClass: {
    clusterTemplateKind: 'HostClusterTemplate',
    infrastructureClusterTemplate(config: InstallConfig): UnnamedObject<HostClusterTemplate> {
      const { spec } = hostsPlatform.infrastructureCluster(config) as UnnamedObject<HostCluster>;
      return { apiVersion: hostsApiVersion, kind: 'HostClusterTemplate', spec: { template: { spec } } };
    },
  },

  machineTemplate(_config: InstallConfig, pool: MachinePool): UnnamedObject<HostMachineTemplate> {
    // The role's images are imported in the prepare plan, which a Host runs as soon as it is claimed: a worker's
    // imports do not wait for the control plane to be initialized (its bootstrap data does), nor a control plane's
    // for Cluster API's certificates.
    const prepareCommands = [node.importImages(hasRole(pool, 'controlPlane') ? 'controlPlane' : 'worker')];
    return { apiVersion: hostsApiVersion, kind: 'HostMachineTemplate', spec: { template: { spec: { hostSelector: poolSelector(pool), prepareCommands } } } };
  },

  kubeadm(_config: InstallConfig, role: TemplateRole): PlatformKubeadm {
    const controlPlane = role === 'controlPlane';
    return {
      ...(controlPlane ? { clusterConfiguration: node.clusterConfiguration(), advertiseAddress: node.hostAddress } : {}),
      nodeRegistration: {
        name: node.hostName,
        criSocket: `unix://${node.containerdSocket}`,
        imagePullPolicy: node.imagePullPolicy,
        ignorePreflightErrors: [...node.ignoredPreflightErrors],
        kubeletExtraArgs: node.kubeletExtraArgs.map((a) => ({ ...a })),
      },
      files: kubeadmFiles.map((f) => ({ ...f })),
      // A worker's half-done join undone, then the kubelet's supervisor. The images kubeadm's preflight looks for (nothing
      // is pulled) were imported by the Host's prepare plan (machineTemplate's prepareCommands), before this plan.
      // The pod network comes with the cluster's add-ons (networking.cni), not from the node.
      preKubeadmCommands: [...(controlPlane ? [node.appendKubeProxyConfiguration] : [node.undoUnfinishedJoin]), node.startKubelet],
    };
  },

  controllers: [...coreControllers(), agentController()],

  // Nodes import the bundle's images (never pull), so the bundled pod network runs here.
  bundledAddons: { flannelImage: node.flannelImage },

  credentialFiles() {
    // The agents authenticate with credentials the manager issues at registration; nothing is read from a file here.
    return [];
  },

  hooks: {
    /** Before any object of the cluster exists: the registration command, then until every pool can be filled by registered hosts. */
    preProvision: waitForHosts,
    machineFailures: watchHostPlans,
    clusterDeletion: destroyHostsCluster,
    loadImages: loadImagesOnHosts,
  },
  inClusterArtifacts: hostsInClusterArtifacts,
};
