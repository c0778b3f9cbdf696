/**
 * The vSphere platform: Cluster API Provider vSphere. Objects follow the v1beta2 API of
 * CAPV v1.16.1 (sigs.k8s.io/cluster-api-provider-vsphere@v1.16.1, CRDs under
 * config/default/crd), shaped like the provider's
 * templates/cluster-template-external-loadbalancer.yaml: machines cloned from a template
 * with one NIC (DHCP, or an address from platform.vsphere.network.addressPool: an
 * AddressPool of provider/ that CAPV's addressesFromPools claims from), the external cloud provider on every kubelet, node names from the
 * guest's hostname, and the manager's own vCenter user (no identityRef: CAPV reads the
 * user from its --credentials-file).
 *
 * Not generated: a virtual IP for the control plane (the provider's default template runs
 * kube-vip as a static pod; here the endpoint is an address the user provides), and the
 * vSphere cloud-controller-manager and CSI add-ons, which the cluster needs before its
 * nodes become Ready.
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { machineSection, platformSection, resolveConfigPath, type InstallConfig, type MachinePool } from '../../config/index.js';
import { ConfigError, messageOf } from '../../errors.js';
import { addressPoolApiVersion, addressPoolKind, addressPoolObject, releaseClusterAddresses, type AddressPoolSettings } from './address-pool.js';
import { addressPoolController, coreControllers, type ControllerRequirement, type Platform, type PlatformKubeadm, type TemplateRole } from '../platform.js';
import { capiGroups, capiVersion, type InfrastructureCluster, type InfrastructureClusterTemplate, type InfrastructureMachineTemplate, type UnnamedObject } from '../types.js';
import { vsphereConfig, vsphereDefaultCredentialsFile, vsphereName, vspherePlatformSchema } from './config.js';

/** The CAPV release these objects were written against. */
const vsphereProviderVersion = 'sigs.k8s.io/cluster-api-provider-vsphere v1.16.1';

export interface VSphereCluster extends InfrastructureCluster {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'VSphereCluster';
  spec: {
    server: string;
    thumbprint?: string;
    controlPlaneEndpoint: { host: string; port: number };
  };
}

/** The ClusterClass layout's infrastructure cluster template: CAPV's VSphereClusterTemplate, whose spec.template.spec is a VSphereCluster's spec. */
export interface VSphereClusterTemplate extends InfrastructureClusterTemplate {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'VSphereClusterTemplate';
  spec: { template: { spec: VSphereCluster['spec'] } };
}

/** A machine's NIC (CAPV's NetworkDeviceSpec): DHCP, or addresses claimed from pools. */
export interface VSphereNetworkDevice {
  networkName: string;
  dhcp4: boolean;
  dhcp6: boolean;
  /** CAPV creates an IPAddressClaim per pool and machine, and writes the bound address into the machine's network config. */
  addressesFromPools?: { apiGroup: string; kind: string; name: string }[];
  nameservers?: string[];
}

export interface VSphereMachineTemplate extends InfrastructureMachineTemplate {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'VSphereMachineTemplate';
  spec: {
    template: {
      spec: {
        server: string;
        thumbprint?: string;
        datacenter: string;
        datastore: string;
        folder: string;
        resourcePool: string;
        network: { devices: VSphereNetworkDevice[] };
        template: string;
        cloneMode?: 'fullClone' | 'linkedClone';
        numCPUs: number;
        memoryMiB: number;
        diskGiB: number;
        os: 'Linux';
        powerOffMode: 'trySoft';
      };
    };
  };
}

/** The guest's hostname, which CAPV sets from the machine's name through cloud-init metadata. */
const nodeNameFromHostname = '{{ local_hostname }}';
const externalCloudProvider = { name: 'cloud-provider', value: 'external' };
const criSocket = '/var/run/containerd/containerd.sock';

const infrastructureApiVersion = `${capiGroups.infrastructure}/${capiVersion}`;
const vsphere = vspherePlatformSchema.fields;

/** The controller that provisions vSphere; its vCenter user comes from the file given by --credentials-file. */
const capv: ControllerRequirement = { binary: 'capv-manager', provider: 'infrastructure-vsphere', featureGates: {}, bundled: true };

/** The machines' NIC: DHCP, or one address from the cluster's pool (named like the cluster) with the pool's nameservers. */
function networkDevice(config: InstallConfig, network: { name: string; addressPool?: AddressPoolSettings }): VSphereNetworkDevice {
  const pool = network.addressPool;
  if (!pool) return { networkName: network.name, dhcp4: true, dhcp6: false };
  return {
    networkName: network.name,
    dhcp4: false,
    dhcp6: false,
    addressesFromPools: [{ apiGroup: addressPoolApiVersion.split('/')[0]!, kind: addressPoolKind, name: config.metadata.name }],
    ...(pool.nameservers.length > 0 ? { nameservers: [...pool.nameservers] } : {}),
  };
}

function vsphereSection(config: InstallConfig) {
  const section = platformSection(config, vsphereConfig);
  if (!section) throw new Error('the vsphere platform was asked to generate for a config without platform.vsphere');
  return section;
}

/** Throws a ConfigError on platform.vsphere.credentials.file unless the file is YAML with a username and a password (their values are never shown). */
async function checkVsphereCredentialsFile(file: string): Promise<void> {
  const field = 'platform.vsphere.credentials.file';
  const fail = (message: string, hint: string): never => {
    throw new ConfigError(`The vSphere credentials file cannot be used: ${message}`, [{ path: field, message, hint }], { hint });
  };
  let document: unknown;
  try {
    document = parse(await readFile(file, 'utf8'));
  } catch (error) {
    // A YAML error quotes the text around it, which may be the password: only its kind is shown.
    const reason = error instanceof Error && error.name === 'YAMLParseError' ? 'it is not YAML' : messageOf(error);
    return fail(`${file} cannot be read (${reason})`, 'write it with two lines, username: <user> and password: <password>, mode 0600');
  }
  const record = typeof document === 'object' && document !== null ? (document as Record<string, unknown>) : {};
  const missing = ['username', 'password'].filter((key) => typeof record[key] !== 'string' || record[key] === '');
  if (missing.length > 0) fail(`${file} has no ${missing.join(' and no ')}`, 'CAPV reads a YAML map with the keys username and password');
}

export const vspherePlatform: Platform = {
  name: vsphereName,
  description: 'VMs cloned in vCenter through Cluster API Provider vSphere; needs a vCenter user (by file)',
  installConfig: vsphereConfig,
  inputs: [
    { key: 'server', valueName: 'host', description: 'vCenter address', label: 'vCenter address', required: true, node: vsphere.server.node },
    { key: 'thumbprint', valueName: 'fingerprint', description: 'fingerprint of vCenter\'s TLS certificate (default: trust the system CAs)', label: 'vCenter certificate fingerprint (empty: system CAs)', node: vsphere.thumbprint.node },
    { key: 'datacenter', valueName: 'name', description: 'vSphere datacenter', label: 'Datacenter', required: true, node: vsphere.datacenter.node },
    { key: 'datastore', valueName: 'name', description: 'vSphere datastore', label: 'Datastore', required: true, node: vsphere.datastore.node },
    { key: 'network', valueName: 'name', description: 'vSphere network (port group) of the machines', label: 'Network', required: true, node: vsphere.network.node.fields.name.node },
    { key: 'resourcePool', valueName: 'path', description: 'vSphere resource pool', label: 'Resource pool', required: true, node: vsphere.resourcePool.node },
    { key: 'folder', valueName: 'path', description: 'vSphere VM folder', label: 'VM folder', required: true, node: vsphere.folder.node },
    { key: 'template', valueName: 'name', description: 'VM template the machines are cloned from', label: 'VM template', required: true, node: vsphere.template.node },
    { key: 'endpointHost', valueName: 'address', description: 'control-plane endpoint: a load balancer or VIP you provide', label: 'Control-plane endpoint address', required: true, node: vsphere.controlPlaneEndpoint.node.fields.host.node },
    // Referenced, never copied.
    { key: 'vsphereCredentialsFile', valueName: 'path', description: `vCenter credentials file (YAML username/password; default ${vsphereDefaultCredentialsFile})`, label: 'vCenter credentials file', initial: vsphereDefaultCredentialsFile },
  ],
  newSection(answers) {
    return {
      server: answers.server,
      ...(answers.thumbprint ? { thumbprint: answers.thumbprint } : {}),
      datacenter: answers.datacenter,
      datastore: answers.datastore,
      network: { name: answers.network },
      resourcePool: answers.resourcePool,
      folder: answers.folder,
      template: answers.template,
      controlPlaneEndpoint: { host: answers.endpointHost },
      ...(answers.vsphereCredentialsFile ? { credentials: { file: answers.vsphereCredentialsFile } } : {}),
    };
  },
  infrastructure: { apiVersion: infrastructureApiVersion, clusterKind: 'VSphereCluster', machineTemplateKind: 'VSphereMachineTemplate' },
  providerVersion: vsphereProviderVersion,
  prunableKinds: [
    { apiVersion: infrastructureApiVersion, kind: 'VSphereMachineTemplate' },
    { apiVersion: infrastructureApiVersion, kind: 'VSphereClusterTemplate' },
  ],
  lifecycle: {
    machinesInController: false,
    stateKinds: [
      { apiVersion: infrastructureApiVersion, kind: 'VSphereCluster' },
      { apiVersion: infrastructureApiVersion, kind: 'VSphereMachine' },
      { apiVersion: infrastructureApiVersion, kind: 'VSphereVM' },
    ],
  },

  infrastructureCluster(config: InstallConfig): UnnamedObject<VSphereCluster> {
    const section = vsphereSection(config);
    return {
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
      kind: 'VSphereCluster',
      spec: {
        server: section.server,
        ...(section.thumbprint ? { thumbprint: section.thumbprint } : {}),
        controlPlaneEndpoint: { host: section.controlPlaneEndpoint.host, port: section.controlPlaneEndpoint.port },
      },
    };
  },

  clusterClass: {
    clusterTemplateKind: 'VSphereClusterTemplate',
    infrastructureClusterTemplate(config: InstallConfig): UnnamedObject<VSphereClusterTemplate> {
      const { spec } = vspherePlatform.infrastructureCluster(config) as UnnamedObject<VSphereCluster>;
      return { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'VSphereClusterTemplate', spec: { template: { spec } } };
    },
  },

  machineTemplate(config: InstallConfig, pool: MachinePool): UnnamedObject<VSphereMachineTemplate> {
    const section = vsphereSection(config);
    const machine = machineSection(pool, vsphereConfig);
    if (!machine) throw new Error(`pool ${pool.name} has no vsphere settings; defaults should have set them`);
    return {
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
      kind: 'VSphereMachineTemplate',
      spec: {
        template: {
          spec: {
            server: section.server,
            ...(section.thumbprint ? { thumbprint: section.thumbprint } : {}),
            datacenter: section.datacenter,
            datastore: section.datastore,
            folder: section.folder,
            resourcePool: section.resourcePool,
            network: { devices: [networkDevice(config, section.network)] },
            template: machine.template,
            ...(machine.cloneMode ? { cloneMode: machine.cloneMode } : {}),
            numCPUs: machine.numCPUs,
            memoryMiB: machine.memoryMiB,
            diskGiB: machine.diskGiB,
            os: 'Linux',
            powerOffMode: 'trySoft',
          },
        },
      },
    };
  },

  kubeadm(_config: InstallConfig, role: TemplateRole): PlatformKubeadm {
    return {
      ...(role === 'controlPlane' ? { clusterConfiguration: { controllerManager: { extraArgs: [externalCloudProvider] } } } : {}),
      nodeRegistration: { name: nodeNameFromHostname, criSocket, kubeletExtraArgs: [externalCloudProvider] },
    };
  },

  controllers: [...coreControllers(), capv],

  /** With an address pool, the manager that allocates from it runs too. */
  configControllers(config: InstallConfig) {
    return vsphereSection(config).network.addressPool ? [addressPoolController()] : [];
  },

  /** The address pool (platform.vsphere.network.addressPool), named like the cluster: the machine templates' devices name it. */
  infrastructureResources(config: InstallConfig) {
    const pool = vsphereSection(config).network.addressPool;
    return pool ? [addressPoolObject(config.metadata.name, pool)] : [];
  },

  credentialFiles(config: InstallConfig, installDir: string) {
    const file = resolveConfigPath(installDir, vsphereSection(config).credentials.file);
    return [{ path: file, fileFlag: 'credentials-file', settings: {}, controllers: [capv.binary] }];
  },

  hooks: {
    /** What can be known without vCenter: the credentials file is readable and names a user and a password. */
    async preProvision({ config, dir }) {
      await checkVsphereCredentialsFile(resolveConfigPath(dir, vsphereSection(config).credentials.file));
    },
    /** With an address pool: destroy waits for the cluster's address claims to be released, and says so. */
    async clusterDeletion(context) {
      return vsphereSection(context.config).network.addressPool ? releaseClusterAddresses(context) : async () => {};
    },
  },
};
