/**
 * Defaults of the install config. Static defaults are declared in the schema
 * (`defaulted`); the `computed` ones, derived from other fields, are filled here.
 */
import { awsMachineSchema, inMemoryMachineSchema, installConfigSchema, type InstallConfig, type PlatformName } from './install-config.js';
import { applyDefaults } from './schema.js';

/** IAM instance profiles that `clusterawsadm bootstrap iam` creates. */
export const awsControlPlaneInstanceProfile = 'control-plane.cluster-api-provider-aws.sigs.k8s.io';
export const awsNodeInstanceProfile = 'nodes.cluster-api-provider-aws.sigs.k8s.io';

type Loose = Record<string, unknown>;

function isRecord(value: unknown): value is Loose {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Fills every default of a schema-valid document and returns it typed. Call only
 * after `validateNode` found no problem in the parts this reads.
 */
export function withDefaults(document: unknown): InstallConfig {
  // Robust against invalid parts: rules skip broken sections, but defaults run on the whole document.
  const config = applyDefaults(installConfigSchema, document) as Loose;
  const metadata = config.metadata;
  if (isRecord(metadata) && metadata.namespace === undefined) metadata.namespace = metadata.name;

  const platform = isRecord(config.platform) ? config.platform : {};
  const platformName: PlatformName = platform.aws ? 'aws' : 'inmemory';
  const aws = isRecord(platform.aws) ? platform.aws : undefined;

  const pools = Array.isArray(config.machinePools) ? config.machinePools : [];
  for (const pool of pools) {
    if (!isRecord(pool)) continue;
    if (!isRecord(pool.platform)) pool.platform = {};
    const poolPlatform = pool.platform as Loose;
    if (platformName === 'inmemory') {
      poolPlatform.inmemory = applyDefaults(inMemoryMachineSchema, poolPlatform.inmemory ?? {});
    } else if (aws) {
      const machine = applyDefaults(awsMachineSchema, poolPlatform.aws ?? {}) as Loose;
      machine.instanceType ??= aws.defaultInstanceType;
      if (machine.ami === undefined && aws.ami !== undefined) machine.ami = aws.ami;
      const roles = Array.isArray(pool.roles) ? pool.roles : [];
      machine.iamInstanceProfile ??= roles.includes('controlPlane') ? awsControlPlaneInstanceProfile : awsNodeInstanceProfile;
      poolPlatform.aws = machine;
    }
  }
  return config as InstallConfig;
}

/** The schema-valid skeleton of a new install config; `create install-config` fills it from answers. */
export interface NewInstallConfigAnswers {
  name: string;
  platform: PlatformName;
  kubernetesVersion: string;
  controlPlaneReplicas: number;
  /** Machines of the worker pool; 0 makes the control-plane pool schedulable and omits the worker pool. */
  workers: number;
  /** AWS only. */
  region?: string;
  sshKeyName?: string;
  instanceType?: string;
  credentialsFile?: string;
}

/** The document a user would write for these answers (defaults left out, so the file stays short). */
export function newInstallConfigDocument(answers: NewInstallConfigAnswers): Loose {
  const controlPlaneRoles = answers.workers > 0 ? ['etcd', 'controlPlane'] : ['etcd', 'controlPlane', 'worker'];
  const pools: Loose[] = [{ name: 'control-plane', quantity: answers.controlPlaneReplicas, roles: controlPlaneRoles }];
  if (answers.workers > 0) pools.push({ name: 'worker', quantity: answers.workers, roles: ['worker'] });
  let platform: Loose = { inmemory: {} };
  if (answers.platform === 'aws') {
    const aws: Loose = { region: answers.region };
    if (answers.instanceType) aws.defaultInstanceType = answers.instanceType;
    if (answers.sshKeyName) aws.sshKeyName = answers.sshKeyName;
    if (answers.credentialsFile) aws.credentials = { file: answers.credentialsFile };
    platform = { aws };
  }
  return {
    apiVersion: installConfigSchema.fields.apiVersion.node.value,
    kind: installConfigSchema.fields.kind.node.value,
    metadata: { name: answers.name },
    kubernetesVersion: answers.kubernetesVersion,
    networking: { podCIDRs: ['192.168.0.0/16'], serviceCIDRs: ['10.128.0.0/12'], serviceDomain: 'cluster.local' },
    machinePools: pools,
    platform,
  };
}

