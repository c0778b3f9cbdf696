/**
 * Defaults of the install config. Static defaults are declared in the schema
 * (`defaulted`); the `computed` ones, derived from other fields, are filled here, and
 * each pool's machine settings by the cluster platform's section (`machineDefaults`).
 */
import { installConfigApiVersion, installConfigKind, type InstallConfig } from './install-config.js';
import type { InstallConfigSchema, Loose } from './platform-section.js';
import { applyDefaults } from './schema.js';

function isRecord(value: unknown): value is Loose {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Fills every default of a schema-valid document and returns it typed. Call only
 * after `validateNode` found no problem in the parts this reads.
 */
export function withDefaults(document: unknown, schema: InstallConfigSchema): InstallConfig {
  // Robust against invalid parts: rules skip broken sections, but defaults run on the whole document.
  const config = applyDefaults(schema.root, document) as Loose;
  const metadata = config.metadata;
  if (isRecord(metadata) && metadata.namespace === undefined) metadata.namespace = metadata.name;

  const sections = isRecord(config.platform) ? config.platform : {};
  const named = Object.keys(sections).filter((key) => schema.platforms.has(key) && sections[key] !== undefined && sections[key] !== null);
  // No machine defaults while the platform is ambiguous: validation reports `platform` then.
  const platform = named.length === 1 ? schema.platforms.get(named[0]!) : undefined;
  const section = platform && isRecord(sections[platform.name]) ? (sections[platform.name] as Loose) : undefined;

  const pools = Array.isArray(config.machinePools) ? config.machinePools : [];
  for (const pool of pools) {
    if (!isRecord(pool)) continue;
    if (!isRecord(pool.platform)) pool.platform = {};
    if (!platform || !section) continue;
    const poolPlatform = pool.platform as Loose;
    const machine = applyDefaults(platform.machineSchema, poolPlatform[platform.name] ?? {}) as Loose;
    platform.machineDefaults?.(machine, { section, roles: Array.isArray(pool.roles) ? pool.roles : [] });
    poolPlatform[platform.name] = machine;
  }
  return config as InstallConfig;
}

/** The schema-valid skeleton of a new install config; `create install-config` fills it from answers. */
export interface NewInstallConfigAnswers {
  name: string;
  /** The platform's name. */
  platform: string;
  kubernetesVersion: string;
  controlPlaneReplicas: number;
  /** Machines of the worker pool; 0 makes the control-plane pool schedulable and omits the worker pool. */
  workers: number;
  /** Answers to the platform's own questions, by input key (the platform turns them into its section). */
  platformAnswers: Record<string, string>;
}

/** The document a user would write for these answers and the platform's section (defaults left out, so the file stays short). */
export function newInstallConfigDocument(answers: NewInstallConfigAnswers, platformSection: Record<string, unknown>, bootstrap?: Record<string, unknown>): Loose {
  const controlPlaneRoles = answers.workers > 0 ? ['etcd', 'controlPlane'] : ['etcd', 'controlPlane', 'worker'];
  const pools: Loose[] = [{ name: 'control-plane', quantity: answers.controlPlaneReplicas, roles: controlPlaneRoles }];
  if (answers.workers > 0) pools.push({ name: 'worker', quantity: answers.workers, roles: ['worker'] });
  return {
    apiVersion: installConfigApiVersion,
    kind: installConfigKind,
    metadata: { name: answers.name },
    kubernetesVersion: answers.kubernetesVersion,
    networking: { podCIDRs: ['192.168.0.0/16'], serviceCIDRs: ['10.128.0.0/12'], serviceDomain: 'cluster.local' },
    machinePools: pools,
    platform: { [answers.platform]: platformSection },
    ...(bootstrap && Object.keys(bootstrap).length > 0 ? { bootstrap } : {}),
  };
}
