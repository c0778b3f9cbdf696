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
import { cidrsOverlap, parseCidr, resolveConfigPath, soundPools, type InstallConfig, type MachinePool, type Rule } from '../../config/index.js';
import { coreControllers, type Platform, type PlatformKubeadm, type TemplateRole } from '../platform.js';
import { capiGroups, capiVersion, type InfrastructureCluster, type InfrastructureMachineTemplate, type UnnamedObject } from '../types.js';

/** The CAPA release these objects were written against. */
export const awsProviderVersion = 'sigs.k8s.io/cluster-api-provider-aws/v2 v2.13.0';

/** CAPA's default VPC block when none is given. */
export const awsDefaultVpcCidr = '10.0.0.0/16';

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

const awsRules: Rule[] = [
  {
    name: 'aws-vpc-and-subnets',
    reads: ['platform'],
    check(config, report) {
      const aws = config.platform.aws;
      if (!aws) return;
      if (aws.subnets && !aws.vpcID) {
        report.error(['platform', 'aws', 'vpcID'], 'subnets are set but vpcID is not', 'existing subnets belong to an existing VPC: set vpcID to it, or remove subnets to let the provider create both');
      }
      if (aws.vpcID && !aws.subnets) {
        report.error(['platform', 'aws', 'subnets'], 'vpcID is set but subnets are not', 'list the subnets of the VPC to use, or remove vpcID to let the provider create a VPC');
      }
      if (aws.vpcID && aws.vpcCIDR) {
        report.error(['platform', 'aws', 'vpcCIDR'], 'vpcCIDR applies only to a VPC the provider creates; vpcID names an existing one', 'remove vpcCIDR, or remove vpcID and subnets');
      }
    },
  },
  {
    name: 'aws-vpc-cidr-disjoint',
    reads: ['platform', 'networking'],
    check(config, report) {
      const aws = config.platform.aws;
      if (!aws || aws.vpcID) return;
      const vpc = parseCidr(aws.vpcCIDR ?? awsDefaultVpcCidr);
      if (!vpc.ok) return;
      const lists = { podCIDRs: config.networking.podCIDRs, serviceCIDRs: config.networking.serviceCIDRs };
      for (const [field, list] of Object.entries(lists)) {
        list.forEach((text, index) => {
          const other = parseCidr(text);
          if (other.ok && cidrsOverlap(vpc.cidr, other.cidr)) {
            const at = aws.vpcCIDR ? ['platform', 'aws', 'vpcCIDR'] : ['networking', field, index];
            report.error(at, `the VPC block ${vpc.cidr.text} overlaps networking.${field}[${index}] (${text})`, 'machine, pod and service networks must be disjoint');
          }
        });
      }
    },
  },
  {
    name: 'aws-pool-subnet-known',
    reads: ['platform'],
    check(config, report) {
      const aws = config.platform.aws;
      if (!aws?.subnets) return;
      soundPools(config, report).forEach(({ pool, index }) => {
        const subnet = pool.platform.aws?.subnet;
        if (subnet && !aws.subnets?.includes(subnet)) {
          report.error(['machinePools', index, 'platform', 'aws', 'subnet'], `${subnet} is not one of platform.aws.subnets`, `use one of: ${aws.subnets?.join(', ')}`);
        }
      });
    },
  },
  {
    name: 'aws-ssh-key',
    reads: ['platform'],
    check(config, report) {
      if (config.platform.aws && !config.platform.aws.sshKeyName) {
        report.warn(['platform', 'aws', 'sshKeyName'], 'no SSH key: you will not be able to log in to machines to debug them', 'set sshKeyName to an EC2 key pair in the region');
      }
    },
  },
];

function awsSection(config: InstallConfig) {
  const aws = config.platform.aws;
  if (!aws) throw new Error('the aws platform was asked to generate for a config without platform.aws');
  return aws;
}

export const awsPlatform: Platform = {
  name: 'aws',
  description: 'EC2 machines through Cluster API Provider AWS; needs AWS credentials (by file)',
  infrastructure: { apiVersion: `${capiGroups.infrastructure}/${capiVersion}`, clusterKind: 'AWSCluster', machineTemplateKind: 'AWSMachineTemplate' },
  providerVersion: awsProviderVersion,
  rules: awsRules,

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

  machineTemplate(config: InstallConfig, pool: MachinePool): UnnamedObject<AWSMachineTemplate> {
    const aws = awsSection(config);
    const machine = pool.platform.aws;
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

  controllers() {
    return [...coreControllers(), { binary: 'capa-manager', provider: 'infrastructure-aws', featureGates: { AutoControllerIdentityCreator: true }, bundled: false }];
  },

  credentialFiles(config: InstallConfig, installDir: string) {
    const credentials = awsSection(config).credentials;
    return [{ path: resolveConfigPath(installDir, credentials.file), fileEnv: 'AWS_SHARED_CREDENTIALS_FILE', settings: { AWS_PROFILE: credentials.profile } }];
  },
};
