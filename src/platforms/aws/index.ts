/**
 * The AWS platform: Cluster API Provider AWS. Objects follow the v1beta2 API of
 * CAPA v2.13.0 (sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0, CRDs under
 * config/crd/bases), shaped like the provider's own cluster-template.yaml: an NLB in
 * front of the API servers, the external cloud provider on every kubelet, node names
 * from EC2 metadata, and the controller's own identity (AWSClusterControllerIdentity
 * `default`, which CAPA creates itself with its AutoControllerIdentityCreator gate).
 *
 * Not generated: the cloud-controller-manager and CSI add-ons (the provider's template
 * ships them as ClusterResourceSets); the cluster needs a CCM before nodes become Ready.
 */
import { machineSection, platformSection, resolveConfigPath, type InstallConfig, type MachinePool } from '../../config/index.js';
import { coreControllers, type ControllerRequirement, type Platform, type PlatformKubeadm, type TemplateRole } from '../platform.js';
import { awsConfig, awsDefaultCredentialsFile, awsName, awsPlatformSchema } from './config.js';
import { checkCredentialsFile } from './credentials.js';
import { releaseUnprovisionedAws } from './unprovisioned.js';
import { capiGroups, capiVersion, type InfrastructureCluster, type InfrastructureClusterTemplate, type InfrastructureMachineTemplate, type UnnamedObject } from '../types.js';

/** The CAPA release these objects were written against. */
const awsProviderVersion = 'sigs.k8s.io/cluster-api-provider-aws/v2 v2.13.0';

export interface AWSCluster extends InfrastructureCluster {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'AWSCluster';
  spec: {
    region: string;
    sshKeyName?: string;
    identityRef: { kind: 'AWSClusterControllerIdentity'; name: string };
    controlPlaneLoadBalancer: { loadBalancerType: 'nlb'; healthCheckProtocol: 'HTTPS' };
    network?: { vpc: { id?: string; cidrBlock?: string }; subnets?: { id: string }[] };
    additionalTags?: Record<string, string>;
  };
}

/** The ClusterClass layout's infrastructure cluster template: CAPA's AWSClusterTemplate, whose spec.template.spec is an AWSCluster's spec. */
export interface AWSClusterTemplate extends InfrastructureClusterTemplate {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'AWSClusterTemplate';
  spec: { template: { spec: AWSCluster['spec'] } };
}

export interface AWSMachineTemplate extends InfrastructureMachineTemplate {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2';
  kind: 'AWSMachineTemplate';
  spec: {
    template: {
      spec: {
        instanceType: string;
        iamInstanceProfile: string;
        sshKeyName?: string;
        ami?: { id: string };
        subnet?: { id: string };
        rootVolume: { size: number };
      };
    };
  };
}

/** EC2 metadata hostname: AWS nodes must register under it for the cloud provider to find them. */
const nodeNameFromMetadata = '{{ ds.meta_data.local_hostname }}';
const externalCloudProvider = { name: 'cloud-provider', value: 'external' };

function awsSection(config: InstallConfig) {
  const aws = platformSection(config, awsConfig);
  if (!aws) throw new Error('the aws platform was asked to generate for a config without platform.aws');
  return aws;
}

const infrastructureApiVersion = `${capiGroups.infrastructure}/${capiVersion}`;
const aws = awsPlatformSchema.fields;

/**
 * The controller that provisions AWS (CAPA's gates: sigs.k8s.io/cluster-api-provider-aws/v2
 * feature/feature.go). A one-off installer of self-managed clusters turns EKS and
 * MachinePool off, as openshift-install does, and keeps AutoControllerIdentityCreator on:
 * it creates the AWSClusterControllerIdentity `default` our AWSCluster names.
 */
const capa: ControllerRequirement = {
  binary: 'capa-manager',
  provider: 'infrastructure-aws',
  featureGates: { AutoControllerIdentityCreator: true, EKS: false, MachinePool: false },
  bundled: true,
};

export const awsPlatform: Platform = {
  name: awsName,
  description: 'EC2 machines through Cluster API Provider AWS; needs AWS credentials (by file)',
  installConfig: awsConfig,
  inputs: [
    { key: 'region', valueName: 'region', description: 'AWS region', label: 'AWS region', required: true, node: aws.region.node },
    { key: 'instanceType', valueName: 'type', description: `EC2 instance type (default ${String(aws.defaultInstanceType.default)})`, label: 'Instance type', initial: String(aws.defaultInstanceType.default), node: aws.defaultInstanceType.node },
    { key: 'sshKeyName', valueName: 'name', description: 'EC2 key pair installed on machines (default none)', label: 'EC2 key pair name (empty: none)', node: aws.sshKeyName.node },
    // Referenced, never copied.
    { key: 'credentialsFile', valueName: 'path', description: `AWS shared credentials file (default ${awsDefaultCredentialsFile})`, label: 'AWS credentials file', initial: awsDefaultCredentialsFile },
  ],
  newSection(answers) {
    return {
      region: answers.region,
      ...(answers.instanceType ? { defaultInstanceType: answers.instanceType } : {}),
      ...(answers.sshKeyName ? { sshKeyName: answers.sshKeyName } : {}),
      ...(answers.credentialsFile ? { credentials: { file: answers.credentialsFile } } : {}),
    };
  },
  infrastructure: { apiVersion: infrastructureApiVersion, clusterKind: 'AWSCluster', machineTemplateKind: 'AWSMachineTemplate' },
  providerVersion: awsProviderVersion,
  prunableKinds: [
    { apiVersion: infrastructureApiVersion, kind: 'AWSMachineTemplate' },
    { apiVersion: infrastructureApiVersion, kind: 'AWSClusterTemplate' },
  ],
  lifecycle: {
    machinesInController: false,
    stateKinds: [
      { apiVersion: infrastructureApiVersion, kind: 'AWSCluster' },
      { apiVersion: infrastructureApiVersion, kind: 'AWSMachine' },
    ],
  },

  infrastructureCluster(config: InstallConfig): UnnamedObject<AWSCluster> {
    const aws = awsSection(config);
    const spec: AWSCluster['spec'] = {
      region: aws.region,
      ...(aws.sshKeyName ? { sshKeyName: aws.sshKeyName } : {}),
      identityRef: { kind: 'AWSClusterControllerIdentity', name: 'default' },
      controlPlaneLoadBalancer: { loadBalancerType: 'nlb', healthCheckProtocol: 'HTTPS' },
    };
    if (aws.vpcID) spec.network = { vpc: { id: aws.vpcID }, subnets: (aws.subnets ?? []).map((id) => ({ id })) };
    else if (aws.vpcCIDR) spec.network = { vpc: { cidrBlock: aws.vpcCIDR } };
    if (aws.additionalTags && Object.keys(aws.additionalTags).length > 0) spec.additionalTags = aws.additionalTags;
    return { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'AWSCluster', spec };
  },

  clusterClass: {
    clusterTemplateKind: 'AWSClusterTemplate',
    infrastructureClusterTemplate(config: InstallConfig): UnnamedObject<AWSClusterTemplate> {
      const { spec } = awsPlatform.infrastructureCluster(config) as UnnamedObject<AWSCluster>;
      return { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'AWSClusterTemplate', spec: { template: { spec } } };
    },
  },

  machineTemplate(config: InstallConfig, pool: MachinePool): UnnamedObject<AWSMachineTemplate> {
    const aws = awsSection(config);
    const machine = machineSection(pool, awsConfig);
    if (!machine) throw new Error(`pool ${pool.name} has no aws settings; defaults should have set them`);
    return {
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
      kind: 'AWSMachineTemplate',
      spec: {
        template: {
          spec: {
            instanceType: machine.instanceType,
            iamInstanceProfile: machine.iamInstanceProfile,
            ...(aws.sshKeyName ? { sshKeyName: aws.sshKeyName } : {}),
            ...(machine.ami ? { ami: { id: machine.ami } } : {}),
            ...(machine.subnet ? { subnet: { id: machine.subnet } } : {}),
            rootVolume: { size: machine.rootVolumeSize },
          },
        },
      },
    };
  },

  kubeadm(_config: InstallConfig, role: TemplateRole): PlatformKubeadm {
    return {
      ...(role === 'controlPlane' ? { clusterConfiguration: { controllerManager: { extraArgs: [externalCloudProvider] } } } : {}),
      nodeRegistration: { name: nodeNameFromMetadata, kubeletExtraArgs: [externalCloudProvider] },
    };
  },

  controllers: [...coreControllers(), capa],

  credentialFiles(config: InstallConfig, installDir: string) {
    const aws = awsSection(config);
    const credentials = aws.credentials;
    const settings: Record<string, string> = { AWS_PROFILE: credentials.profile, AWS_REGION: aws.region, ...(aws.endpointURL ? { AWS_ENDPOINT_URL: aws.endpointURL } : {}) };
    return [{ path: resolveConfigPath(installDir, credentials.file), fileEnv: 'AWS_SHARED_CREDENTIALS_FILE', settings, controllers: [capa.binary] }];
  },

  hooks: {
    /** Lets go of the AWSCluster and AWSMachines being deleted when CAPA recorded nothing in AWS and never reached it (./unprovisioned.ts). */
    releaseUnprovisioned: (context) => releaseUnprovisionedAws(context, { apiVersion: infrastructureApiVersion, cluster: 'AWSCluster', machine: 'AWSMachine' }),
    /** What can be known without AWS: the credentials file is readable and has the profile's keys (the region's form is a schema rule). */
    async preProvision({ config, dir }) {
      const credentials = awsSection(config).credentials;
      await checkCredentialsFile(resolveConfigPath(dir, credentials.file), credentials.profile, 'platform.aws.credentials.file');
    },
  },
};
