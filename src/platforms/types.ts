/**
 * Typed Kubernetes objects that the manifests contain: Namespace and the Cluster API
 * v1beta2 core, kubeadm bootstrap and kubeadm control-plane kinds (field names checked
 * against the v1.14.2 CRDs). Only the fields we generate are typed; the rest of each
 * API exists on the server and may be added by user edits.
 */

export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
}

/** An object before the generator names it and stamps ownership. */
export type UnnamedObject<T extends KubeObject> = Omit<T, 'metadata'> & { metadata?: Partial<ObjectMeta> };

/** v1beta2 contract reference: group and kind, no version (CAPI resolves the served version). */
export interface ContractReference {
  apiGroup: string;
  kind: string;
  name: string;
}

export { capiGroups, capiVersion } from '../capi.js';

/** Labels Cluster API reads. */
export const clusterNameLabel = 'cluster.x-k8s.io/cluster-name';
export const deploymentNameLabel = 'cluster.x-k8s.io/deployment-name';
/** Our label naming the machine pool an object belongs to. */
export const machinePoolLabel = 'provisioner.dev/machine-pool';

export interface Namespace extends KubeObject {
  apiVersion: 'v1';
  kind: 'Namespace';
}

export interface ConfigMap extends KubeObject {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  data: Record<string, string>;
}

/**
 * Cluster API's ClusterResourceSet (addons.cluster.x-k8s.io/v1beta2): the objects in its
 * ConfigMaps are applied to every workload cluster its selector matches, by the core
 * manager of whichever management cluster holds it (so a pivot takes it along).
 */
export interface ClusterResourceSet extends KubeObject {
  apiVersion: 'addons.cluster.x-k8s.io/v1beta2';
  kind: 'ClusterResourceSet';
  spec: {
    clusterSelector: { matchLabels: Record<string, string> };
    resources: { kind: 'ConfigMap' | 'Secret'; name: string }[];
    strategy: 'ApplyOnce' | 'Reconcile';
  };
}

export interface ClusterNetwork {
  pods: { cidrBlocks: string[] };
  services: { cidrBlocks: string[] };
  serviceDomain: string;
}

export interface Cluster extends KubeObject {
  apiVersion: 'cluster.x-k8s.io/v1beta2';
  kind: 'Cluster';
  spec: {
    clusterNetwork: ClusterNetwork;
    controlPlaneRef: ContractReference;
    infrastructureRef: ContractReference;
  };
}

/** The metadata Cluster API puts on a topology's control plane or MachineDeployment and on their Machines. */
export interface TopologyMetadata {
  labels?: Record<string, string>;
}

/** A Cluster of the ClusterClass layout: the topology controller creates the objects its class describes. */
export interface TopologyCluster extends KubeObject {
  apiVersion: 'cluster.x-k8s.io/v1beta2';
  kind: 'Cluster';
  spec: {
    clusterNetwork: ClusterNetwork;
    topology: {
      classRef: { name: string };
      version: string;
      controlPlane: { replicas: number; metadata?: TopologyMetadata };
      workers?: { machineDeployments: { class: string; name: string; replicas: number; metadata?: TopologyMetadata }[] };
    };
  };
}

/** v1beta2 ClusterClass template reference: unlike a contract reference, it names the version. */
export interface TemplateReference {
  apiVersion: string;
  kind: string;
  name: string;
}

export interface ClusterClass extends KubeObject {
  apiVersion: 'cluster.x-k8s.io/v1beta2';
  kind: 'ClusterClass';
  spec: {
    infrastructure: { templateRef: TemplateReference; naming: { template: string } };
    controlPlane: { templateRef: TemplateReference; machineInfrastructure: { templateRef: TemplateReference }; naming: { template: string } };
    workers?: {
      machineDeployments: { class: string; bootstrap: { templateRef: TemplateReference }; infrastructure: { templateRef: TemplateReference }; naming: { template: string } }[];
    };
  };
}

export interface KubeletArg {
  name: string;
  value: string;
}

export interface KubeadmTaint {
  key: string;
  value?: string;
  effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
}

export interface NodeRegistration {
  name?: string;
  criSocket?: string;
  kubeletExtraArgs?: KubeletArg[];
  /** Absent: kubeadm's default (the control-plane taint on control-plane nodes). Empty: no taint. */
  taints?: KubeadmTaint[];
  /** Preflight checks kubeadm reports as warnings instead of errors. */
  ignorePreflightErrors?: string[];
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
}

export interface ClusterConfiguration {
  /** Registry of the control-plane images (kubeadm's default: registry.k8s.io). */
  imageRepository?: string;
  /** Key type of the cluster's certificates (kubeadm's field); unset: kubeadm's and Cluster API's default, RSA-2048. */
  encryptionAlgorithm?: 'RSA-2048' | 'RSA-3072' | 'RSA-4096' | 'ECDSA-P256' | 'ECDSA-P384';
  etcd?: { local?: { imageTag?: string } };
  /** CoreDNS's image (kubeadm's addon/coredns phase); unset: kubeadm's default tag in imageRepository. */
  dns?: { imageRepository?: string; imageTag?: string };
  apiServer?: { certSANs?: string[]; extraArgs?: KubeletArg[] };
  controllerManager?: { extraArgs?: KubeletArg[] };
}

/** A file the bootstrap data writes before kubeadm runs (cloud-config write_files). */
export interface KubeadmFile {
  path: string;
  content: string;
  /** Octal mode as text, e.g. `0755`. */
  permissions?: string;
  owner?: string;
}

/** Where a control-plane node's API server listens. */
export interface LocalApiEndpoint {
  advertiseAddress: string;
  bindPort?: number;
}

/** Init and join settings beyond node registration. */
export interface KubeadmPhaseSettings {
  nodeRegistration?: NodeRegistration;
  /** kubeadm phases not run, e.g. `addon/coredns`. */
  skipPhases?: string[];
  /** Init only. */
  localAPIEndpoint?: LocalApiEndpoint;
  /** Join only: the machine joins as a control-plane node here. */
  controlPlane?: { localAPIEndpoint?: LocalApiEndpoint };
}

export interface KubeadmConfigSpec {
  clusterConfiguration?: ClusterConfiguration;
  initConfiguration?: KubeadmPhaseSettings;
  joinConfiguration?: KubeadmPhaseSettings;
  files?: KubeadmFile[];
  preKubeadmCommands?: string[];
}

export interface MachineTemplateMetadata {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface KubeadmControlPlane extends KubeObject {
  apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2';
  kind: 'KubeadmControlPlane';
  spec: {
    replicas: number;
    version: string;
    machineTemplate: {
      metadata?: MachineTemplateMetadata;
      spec: { infrastructureRef: ContractReference };
    };
    kubeadmConfigSpec: KubeadmConfigSpec;
  };
}

/** The control plane of a ClusterClass: a KubeadmControlPlane without replicas, version or machine template reference (the topology sets them). */
export interface KubeadmControlPlaneTemplate extends KubeObject {
  apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2';
  kind: 'KubeadmControlPlaneTemplate';
  spec: { template: { spec: { kubeadmConfigSpec: KubeadmConfigSpec } } };
}

export interface KubeadmConfigTemplate extends KubeObject {
  apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2';
  kind: 'KubeadmConfigTemplate';
  spec: { template: { spec: KubeadmConfigSpec } };
}

export interface MachineDeployment extends KubeObject {
  apiVersion: 'cluster.x-k8s.io/v1beta2';
  kind: 'MachineDeployment';
  spec: {
    clusterName: string;
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: MachineTemplateMetadata;
      spec: {
        clusterName: string;
        version: string;
        bootstrap: { configRef: ContractReference };
        infrastructureRef: ContractReference;
      };
    };
  };
}

/** An infrastructure cluster (its provider's kind): provider-specific spec. */
export interface InfrastructureCluster extends KubeObject {
  spec: object;
}

/** An infrastructure cluster template of a ClusterClass: the provider's cluster spec, under `spec.template.spec`. */
export interface InfrastructureClusterTemplate extends KubeObject {
  spec: { template: { spec: object } };
}

/** An infrastructure machine template (its provider's kind). */
export interface InfrastructureMachineTemplate extends KubeObject {
  spec: { template: { spec: object } };
}
