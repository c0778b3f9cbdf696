/**
 * What a platform contributes. The common Cluster API objects (Cluster, KubeadmControlPlane,
 * KubeadmConfigTemplate, MachineDeployment) are built once in ./generate.ts; a platform
 * supplies its infrastructure objects, the kubeadm settings its machines need, its
 * validation rules, and which controllers (bundle binary names) with which feature
 * gates must run.
 *
 * Lifecycle hooks (pre-provision, infra-ready, bootstrap data, post-provision) are to be
 * added to this interface as optional members, so platforms without them stay valid.
 */
import type { InstallConfig, MachinePool, PlatformName, Rule } from '../config/index.js';
import type { ClusterConfiguration, InfrastructureCluster, InfrastructureMachineTemplate, NodeRegistration, UnnamedObject } from './types.js';

/** Executable names of controllers, as in the bundle. */
export type ControllerBinary = 'capi-manager' | 'kubeadm-bootstrap-manager' | 'kubeadm-control-plane-manager' | 'capd-manager' | 'capa-manager';

export interface ControllerRequirement {
  binary: ControllerBinary;
  /** Provider name as clusterctl knows it, e.g. `infrastructure-docker`. */
  provider: string;
  /** Feature gates to pass as `--feature-gates`, by gate name. Empty: the controller's defaults. */
  featureGates: Record<string, boolean>;
  /** False when the bundle does not carry this binary (the platform's manifests can still be generated and validated). */
  bundled: boolean;
}

/** A credentials file a platform's controllers read, and how to point them at it. */
export interface CredentialFileReference {
  /** Absolute path, resolved from the install config. */
  path: string;
  /** Environment variable (of the controller) that names the file, e.g. AWS_SHARED_CREDENTIALS_FILE. */
  fileEnv: string;
  /** Extra non-secret settings, e.g. { AWS_PROFILE: 'default' }. */
  settings: Record<string, string>;
}

/** The role a machine template is for: control-plane machines or a worker pool. */
export type TemplateRole = 'controlPlane' | 'worker';

/** Kubeadm settings the platform needs on its machines. */
export interface PlatformKubeadm {
  /** Merged into KubeadmControlPlane's clusterConfiguration. */
  clusterConfiguration?: ClusterConfiguration;
  /** Node registration of every machine (init and join); taints and labels are added by the generator. */
  nodeRegistration: NodeRegistration;
}

export interface Platform {
  readonly name: PlatformName;
  /** One line for `--help` and prompts. */
  readonly description: string;
  /** Group/kinds of the infrastructure objects (group infrastructure.cluster.x-k8s.io). */
  readonly infrastructure: { apiVersion: string; clusterKind: string; machineTemplateKind: string };
  /** Provider version the objects were written against, for the record. */
  readonly providerVersion: string;
  /** Checks of the platform section and the pools' machine settings; run with the install config's own rules. */
  readonly rules: readonly Rule[];
  /** The infrastructure cluster's spec (DevCluster, AWSCluster). */
  infrastructureCluster(config: InstallConfig): UnnamedObject<InfrastructureCluster>;
  /** The infrastructure machine template of a pool; the generator names it by a hash of its spec. */
  machineTemplate(config: InstallConfig, pool: MachinePool, role: TemplateRole): UnnamedObject<InfrastructureMachineTemplate>;
  /** Kubeadm settings for the machines of `role`. */
  kubeadm(config: InstallConfig, role: TemplateRole): PlatformKubeadm;
  /** Controllers that must run to provision this platform. */
  controllers(config: InstallConfig): ControllerRequirement[];
  /** Credentials files the controllers read (never their content). */
  credentialFiles(config: InstallConfig, installDir: string): CredentialFileReference[];
}

/** The core, bootstrap and control-plane controllers every platform needs. */
export function coreControllers(): ControllerRequirement[] {
  return [
    { binary: 'capi-manager', provider: 'cluster-api', featureGates: {}, bundled: true },
    { binary: 'kubeadm-bootstrap-manager', provider: 'bootstrap-kubeadm', featureGates: {}, bundled: true },
    { binary: 'kubeadm-control-plane-manager', provider: 'control-plane-kubeadm', featureGates: {}, bundled: true },
  ];
}
