/**
 * `generateManifests(config)`: the Cluster API objects for an install config, typed,
 * in apply order, each with a stable file name and desired-set ownership metadata.
 * Pure: no I/O, same input gives the same output (byte for byte once serialized).
 *
 * Two layouts (`manifests.layout`). `classic`: the Cluster, the infrastructure cluster,
 * the KubeadmControlPlane and one MachineDeployment per worker pool, with their
 * templates. `topology`: the templates, a ClusterClass naming them, and a Cluster whose
 * `spec.topology` names the class; Cluster API's topology controller creates the
 * infrastructure cluster, the control plane and the MachineDeployments (the class's
 * naming templates give them the classic layout's names, so waits and destroy find them
 * alike).
 *
 * Object names: the Cluster, infrastructure cluster and ClusterClass take the cluster
 * name; the KubeadmControlPlane and MachineDeployments take `<cluster>-<pool>`.
 * Templates are immutable in Cluster API (DevMachineTemplate's webhook rejects spec
 * changes, as do most providers', KubeadmControlPlaneTemplate's too), so they are named
 * `<cluster>-<pool>-<hash of spec>`: a changed template becomes a new object, its owner
 * (or the ClusterClass) rolls out to it, and the next apply prunes the old one.
 */
import { createHash } from 'node:crypto';
import {
  controlPlanePool,
  hasRole,
  installConfigOwner,
  nodeSyncedLabelDomains,
  ownershipMetadata,
  workerPools,
  type DesiredSetOwner,
  type InstallConfig,
  type MachinePool,
} from '../config/index.js';
import { flannelObjects } from '../addons/pod-network.js';
import { effectiveCni, platformFor } from './registry.js';
import type { Platform, PlatformKubeadm, TemplateRole } from './platform.js';
import {
  clusterNameLabel,
  deploymentNameLabel,
  machinePoolLabel,
  type Cluster,
  type ClusterClass,
  type ClusterConfiguration,
  type ClusterNetwork,
  type ClusterResourceSet,
  type ConfigMap,
  type ContractReference,
  type InfrastructureCluster,
  type InfrastructureClusterTemplate,
  type InfrastructureMachineTemplate,
  type KubeadmConfigSpec,
  type KubeadmConfigTemplate,
  type KubeadmControlPlane,
  type KubeadmControlPlaneTemplate,
  type KubeadmPhaseSettings,
  type KubeadmTaint,
  type KubeletArg,
  type KubeObject,
  type MachineDeployment,
  type Namespace,
  type NodeRegistration,
  type ObjectMeta,
  type TemplateReference,
  type TopologyCluster,
  type UnnamedObject,
} from './types.js';

export type ManifestObject =
  | Namespace
  | ConfigMap
  | ClusterResourceSet
  | Cluster
  | TopologyCluster
  | ClusterClass
  | KubeadmControlPlane
  | KubeadmControlPlaneTemplate
  | KubeadmConfigTemplate
  | MachineDeployment
  | InfrastructureCluster
  | InfrastructureClusterTemplate
  | InfrastructureMachineTemplate
  /** A platform's other objects (Platform.infrastructureResources). */
  | KubeObject;

export type ManifestRole =
  | 'namespace'
  | 'cluster'
  | 'infrastructure-cluster'
  | 'infrastructure-cluster-template'
  /** A platform's object besides the infrastructure cluster (Platform.infrastructureResources). */
  | 'infrastructure-resource'
  | 'control-plane-machine-template'
  | 'control-plane'
  | 'control-plane-template'
  | 'cluster-class'
  | 'machine-template'
  | 'bootstrap-template'
  | 'machine-deployment'
  | 'pod-network-resources'
  | 'pod-network';

export interface GeneratedManifest {
  /** File name under `cluster-api/`: sorting the names gives the apply order; a pool's files keep their names. */
  file: string;
  role: ManifestRole;
  /** The machine pool this object belongs to (pool objects only). */
  pool?: string;
  object: ManifestObject;
}

export interface ManifestSet {
  owner: DesiredSetOwner;
  /** The platform's name. */
  platform: string;
  namespace: string;
  /** In file-name (apply) order. */
  manifests: GeneratedManifest[];
}

/** The kubeadm control-plane taint, which kubeadm adds unless told otherwise. */
const controlPlaneTaint: KubeadmTaint = { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' };

/** File name of each object of a pool: `10_pool-<name>_<n>-<role>.yaml` (pool names have no `_`, so a pool's files stay together). */
function poolFileName(pool: string, role: 'machine-template' | 'bootstrap-template' | 'machine-deployment'): string {
  const step = { 'machine-template': 1, 'bootstrap-template': 2, 'machine-deployment': 3 }[role];
  return `10_pool-${pool}_${step}-${role}.yaml`;
}

const fixedFileNames = {
  namespace: '00_namespace.yaml',
  cluster: '01_cluster.yaml',
  'infrastructure-cluster': '02_infrastructure-cluster.yaml',
  'infrastructure-cluster-template': '02_infrastructure-cluster-template.yaml',
  'control-plane-machine-template': '03_control-plane-machine-template.yaml',
  'control-plane': '04_control-plane.yaml',
  'control-plane-template': '04_control-plane-template.yaml',
  'cluster-class': '05_cluster-class.yaml',
  'pod-network-resources': '06_pod-network-resources.yaml',
  'pod-network': '07_pod-network.yaml',
} as const;

/**
 * Naming templates of the ClusterClass layout (Go templates the topology controller
 * renders): the classic layout's names, so the objects it creates are found alike.
 */
const topologyNames = {
  infrastructureCluster: '{{ .cluster.name }}',
  controlPlane: (pool: string) => `{{ .cluster.name }}-${pool}`,
  machineDeployment: '{{ .cluster.name }}-{{ .machineDeployment.topologyName }}',
};

/** Generates every object for `config` (validated and defaulted), in the layout it asks for. */
export function generateManifests(config: InstallConfig): ManifestSet {
  const platform = platformFor(config);
  const owner = installConfigOwner(config);
  const ownership = ownershipMetadata(owner);
  const clusterName = config.metadata.name;
  const namespace = config.metadata.namespace;

  const meta = (name: string, extraLabels: Record<string, string> = {}, namespaced = true): ObjectMeta => ({
    name,
    ...(namespaced ? { namespace } : {}),
    labels: sortKeys({ [clusterNameLabel]: clusterName, ...extraLabels, ...ownership.labels }),
    annotations: sortKeys({ ...ownership.annotations }),
  });
  const context: GenerationContext = { config, platform, clusterName, meta };

  // Cluster-scoped, and carries only the ownership: the namespace must exist before anything in it.
  const ns: Namespace = {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace, labels: sortKeys({ ...ownership.labels }), annotations: sortKeys({ ...ownership.annotations }) },
  };
  const namespaceManifest: GeneratedManifest = { file: fixedFileNames.namespace, role: 'namespace', object: ns };
  const manifests: GeneratedManifest[] = [
    namespaceManifest,
    ...(config.manifests.layout === 'topology' ? topologyLayout(context) : classicLayout(context)),
    ...infrastructureResources(context),
    ...podNetwork(context),
  ].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));

  // Independent objects: builders share constants (kubelet args), and callers may edit what they get.
  for (const manifest of manifests) manifest.object = structuredClone(manifest.object);
  return { owner, platform: platform.name, namespace, manifests };
}

interface GenerationContext {
  config: InstallConfig;
  platform: Platform;
  clusterName: string;
  /** Metadata of a generated object: cluster label, extra labels, ownership. */
  meta(name: string, extraLabels?: Record<string, string>): ObjectMeta;
}

function named<T extends KubeObject>(object: UnnamedObject<T>, metadata: ObjectMeta): T {
  return { apiVersion: object.apiVersion, kind: object.kind, metadata, ...withoutTypeMeta(object) } as unknown as T;
}

function clusterNetwork(config: InstallConfig): ClusterNetwork {
  return {
    pods: { cidrBlocks: [...config.networking.podCIDRs] },
    services: { cidrBlocks: [...config.networking.serviceCIDRs] },
    serviceDomain: config.networking.serviceDomain,
  };
}

/** Worker pools in file-name order (`m_` sorts after `m24_`), so that the list order is the apply order. */
function sortedWorkerPools(config: InstallConfig): MachinePool[] {
  const fileKey = (pool: MachinePool) => poolFileName(pool.name, 'machine-template');
  return [...workerPools(config)].sort((a, b) => (fileKey(a) < fileKey(b) ? -1 : fileKey(a) > fileKey(b) ? 1 : 0));
}

/** A pool's machine template and bootstrap template, named by the hash of their specs. */
function workerTemplates({ config, platform, clusterName, meta }: GenerationContext, pool: MachinePool): { template: InfrastructureMachineTemplate; bootstrap: KubeadmConfigTemplate } {
  const poolLabels = { [machinePoolLabel]: pool.name };
  const template = nameTemplate(named<InfrastructureMachineTemplate>(platform.machineTemplate(config, pool, 'worker'), meta('', poolLabels)), clusterName, pool.name);
  const bootstrap = nameTemplate(buildBootstrapTemplate(config, platform, pool, meta('', poolLabels)), clusterName, pool.name);
  return { template, bootstrap };
}

/** The Cluster, the infrastructure cluster, the KubeadmControlPlane and each worker pool's MachineDeployment, with their templates. */
function classicLayout(context: GenerationContext): GeneratedManifest[] {
  const { config, platform, clusterName, meta } = context;
  const infraCluster = named<InfrastructureCluster>(platform.infrastructureCluster(config), meta(clusterName));
  const cpPool = controlPlanePool(config);
  const cpTemplate = nameTemplate(named<InfrastructureMachineTemplate>(platform.machineTemplate(config, cpPool, 'controlPlane'), meta('', { [machinePoolLabel]: cpPool.name })), clusterName, cpPool.name);
  const controlPlane = buildControlPlane(config, platform, cpPool, meta(`${clusterName}-${cpPool.name}`, { [machinePoolLabel]: cpPool.name }), ref(cpTemplate));

  const cluster: Cluster = {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: meta(clusterName),
    spec: { clusterNetwork: clusterNetwork(config), controlPlaneRef: ref(controlPlane), infrastructureRef: ref(infraCluster) },
  };
  const manifests: GeneratedManifest[] = [
    { file: fixedFileNames.cluster, role: 'cluster', object: cluster },
    { file: fixedFileNames['infrastructure-cluster'], role: 'infrastructure-cluster', object: infraCluster },
    { file: fixedFileNames['control-plane-machine-template'], role: 'control-plane-machine-template', pool: cpPool.name, object: cpTemplate },
    { file: fixedFileNames['control-plane'], role: 'control-plane', pool: cpPool.name, object: controlPlane },
  ];
  for (const pool of sortedWorkerPools(config)) {
    const { template, bootstrap } = workerTemplates(context, pool);
    const deployment = buildMachineDeployment(config, pool, meta(`${clusterName}-${pool.name}`, { [machinePoolLabel]: pool.name }), ref(bootstrap), ref(template));
    manifests.push({ file: poolFileName(pool.name, 'machine-template'), role: 'machine-template', pool: pool.name, object: template });
    manifests.push({ file: poolFileName(pool.name, 'bootstrap-template'), role: 'bootstrap-template', pool: pool.name, object: bootstrap });
    manifests.push({ file: poolFileName(pool.name, 'machine-deployment'), role: 'machine-deployment', pool: pool.name, object: deployment });
  }
  return manifests;
}

/**
 * The ClusterClass layout: the infrastructure cluster template (from the platform), the
 * KubeadmControlPlaneTemplate, the machine templates and KubeadmConfigTemplates (as in
 * the classic layout), a ClusterClass that names them — one machineDeployment class per
 * worker pool, named after it — and a Cluster whose topology asks for the pools' replicas.
 */
function topologyLayout(context: GenerationContext): GeneratedManifest[] {
  const { config, platform, clusterName, meta } = context;
  if (!platform.clusterClass) throw new Error(`the ${platform.name} platform has no ClusterClass layout; validation should have refused manifests.layout`);
  const infraTemplate = nameTemplate(named<InfrastructureClusterTemplate>(platform.clusterClass.infrastructureClusterTemplate(config), meta('')), clusterName, 'cluster');
  const cpPool = controlPlanePool(config);
  const cpLabels = { [machinePoolLabel]: cpPool.name };
  const cpMachineTemplate = nameTemplate(named<InfrastructureMachineTemplate>(platform.machineTemplate(config, cpPool, 'controlPlane'), meta('', cpLabels)), clusterName, cpPool.name);
  const cpTemplate = nameTemplate(buildControlPlaneTemplate(config, platform, cpPool, meta('', cpLabels)), clusterName, cpPool.name);

  const pools = sortedWorkerPools(config).map((pool) => ({ pool, ...workerTemplates(context, pool) }));
  const clusterClass: ClusterClass = {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'ClusterClass',
    metadata: meta(clusterName),
    spec: {
      infrastructure: { templateRef: templateRef(infraTemplate), naming: { template: topologyNames.infrastructureCluster } },
      controlPlane: {
        templateRef: templateRef(cpTemplate),
        machineInfrastructure: { templateRef: templateRef(cpMachineTemplate) },
        naming: { template: topologyNames.controlPlane(cpPool.name) },
      },
      ...(pools.length > 0
        ? {
            workers: {
              machineDeployments: pools.map(({ pool, template, bootstrap }) => ({
                class: pool.name,
                bootstrap: { templateRef: templateRef(bootstrap) },
                infrastructure: { templateRef: templateRef(template) },
                naming: { template: topologyNames.machineDeployment },
              })),
            },
          }
        : {}),
    },
  };

  const cpMetadata = machineTemplateMetadata(cpPool);
  const cluster: TopologyCluster = {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: meta(clusterName),
    spec: {
      clusterNetwork: clusterNetwork(config),
      topology: {
        classRef: { name: clusterClass.metadata.name },
        version: config.kubernetesVersion,
        controlPlane: { replicas: cpPool.quantity, ...(cpMetadata ? { metadata: cpMetadata } : {}) },
        ...(pools.length > 0
          ? {
              workers: {
                machineDeployments: pools.map(({ pool }) => {
                  const metadata = machineTemplateMetadata(pool);
                  return { class: pool.name, name: pool.name, replicas: pool.quantity, ...(metadata ? { metadata } : {}) };
                }),
              },
            }
          : {}),
      },
    },
  };

  const manifests: GeneratedManifest[] = [
    { file: fixedFileNames.cluster, role: 'cluster', object: cluster },
    { file: fixedFileNames['infrastructure-cluster-template'], role: 'infrastructure-cluster-template', object: infraTemplate },
    { file: fixedFileNames['control-plane-machine-template'], role: 'control-plane-machine-template', pool: cpPool.name, object: cpMachineTemplate },
    { file: fixedFileNames['control-plane-template'], role: 'control-plane-template', pool: cpPool.name, object: cpTemplate },
    { file: fixedFileNames['cluster-class'], role: 'cluster-class', object: clusterClass },
  ];
  for (const { pool, template, bootstrap } of pools) {
    manifests.push({ file: poolFileName(pool.name, 'machine-template'), role: 'machine-template', pool: pool.name, object: template });
    manifests.push({ file: poolFileName(pool.name, 'bootstrap-template'), role: 'bootstrap-template', pool: pool.name, object: bootstrap });
  }
  return manifests;
}

/** The platform's other objects (an address pool), one file each: `02_infrastructure-resource_<kind>-<name>.yaml`, applied before the machine templates that name them. */
function infrastructureResources({ config, platform, meta }: GenerationContext): GeneratedManifest[] {
  return (platform.infrastructureResources?.(config) ?? []).map((object) => ({
    file: `02_infrastructure-resource_${object.kind.toLowerCase()}-${object.metadata.name}.yaml`,
    role: 'infrastructure-resource' as const,
    object: named<KubeObject>(object, meta(object.metadata.name)),
  }));
}

/**
 * The bundled pod network (networking.cni: flannel): its objects in a ConfigMap, and a
 * ClusterResourceSet that has the management cluster's core manager apply them to this
 * cluster once its API answers. Cluster API keeps the set with the cluster (a pivot moves
 * it), and nodes that join later get the DaemonSet's pod like any node.
 */
function podNetwork({ config, platform, clusterName, meta }: GenerationContext): GeneratedManifest[] {
  if (effectiveCni(config) !== 'flannel' || !platform.bundledAddons) return [];
  const podCidr = config.networking.podCIDRs.find((cidr) => cidr.includes('.'))!;
  const objects = flannelObjects({ podCidr, image: platform.bundledAddons.flannelImage, imagePullPolicy: 'Never' });
  const resources: ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta(`${clusterName}-pod-network`),
    // One JSON document per object (JSON is YAML): what the ClusterResourceSet controller splits and applies.
    data: { 'flannel.yaml': `${objects.map((o) => JSON.stringify(o)).join('\n---\n')}\n` },
  };
  const resourceSet: ClusterResourceSet = {
    apiVersion: 'addons.cluster.x-k8s.io/v1beta2',
    kind: 'ClusterResourceSet',
    metadata: meta(`${clusterName}-pod-network`),
    spec: {
      clusterSelector: { matchLabels: { [clusterNameLabel]: clusterName } },
      resources: [{ kind: 'ConfigMap', name: resources.metadata.name }],
      strategy: 'Reconcile',
    },
  };
  return [
    { file: fixedFileNames['pod-network-resources'], role: 'pod-network-resources', object: resources },
    { file: fixedFileNames['pod-network'], role: 'pod-network', object: resourceSet },
  ];
}

function withoutTypeMeta<T extends KubeObject>(object: UnnamedObject<T>): Record<string, unknown> {
  const { apiVersion: _apiVersion, kind: _kind, metadata: _metadata, ...rest } = object as UnnamedObject<T> & Record<string, unknown>;
  return rest;
}

/** A ClusterClass's reference to a template: with the version (unlike a contract reference). */
function templateRef(object: KubeObject): TemplateReference {
  return { apiVersion: object.apiVersion, kind: object.kind, name: object.metadata.name };
}

function ref(object: KubeObject): ContractReference {
  const group = object.apiVersion.includes('/') ? object.apiVersion.slice(0, object.apiVersion.indexOf('/')) : '';
  return { apiGroup: group, kind: object.kind, name: object.metadata.name };
}

/** Names a template `<cluster>-<pool>-<8 hex of sha256(spec)>`. */
function nameTemplate<T extends KubeObject & { spec: unknown }>(template: T, clusterName: string, pool: string): T {
  const digest = createHash('sha256').update(canonicalJson(template.spec)).digest('hex').slice(0, 8);
  template.metadata.name = `${clusterName}-${pool}-${digest}`;
  return template;
}

/** JSON with object keys sorted, so equal values hash equally whatever their construction order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function sortKeys(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Labels the kubelet may set itself (`--node-labels`): those outside the domains Cluster API syncs to Nodes. */
function kubeletLabels(pool: MachinePool): string | undefined {
  const synced = (key: string) => nodeSyncedLabelDomains.some((d) => key.startsWith(`${d}/`));
  const entries = Object.entries(pool.labels)
    .filter(([key]) => !synced(key))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(',') : undefined;
}

function poolTaints(pool: MachinePool): KubeadmTaint[] {
  return pool.taints.map((t) => ({ key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect }));
}

/**
 * Node registration: the platform's settings plus the pool's taints and kubelet labels.
 * Control-plane machines keep kubeadm's default taint unless the pool also has the
 * worker role (then they are schedulable) or sets taints of its own (then the default
 * is written out, since any explicit list replaces it).
 */
function nodeRegistration(platform: Platform, config: InstallConfig, pool: MachinePool, role: TemplateRole): NodeRegistration | undefined {
  const base = platform.kubeadm(config, role).nodeRegistration;
  const args = [...(base.kubeletExtraArgs ?? [])];
  const labels = kubeletLabels(pool);
  if (labels) args.push({ name: 'node-labels', value: labels });
  let taints: KubeadmTaint[] | undefined = poolTaints(pool);
  if (role === 'controlPlane') {
    if (hasRole(pool, 'worker')) taints = taints.filter((t) => t.key !== controlPlaneTaint.key);
    else if (taints.length > 0) taints = [controlPlaneTaint, ...taints.filter((t) => !(t.key === controlPlaneTaint.key && t.effect === controlPlaneTaint.effect))];
    else taints = undefined;
  } else if (taints.length === 0) {
    taints = undefined;
  }
  const registration: NodeRegistration = {
    ...(base.name ? { name: base.name } : {}),
    ...(base.criSocket ? { criSocket: base.criSocket } : {}),
    ...(args.length ? { kubeletExtraArgs: args } : {}),
    ...(taints !== undefined ? { taints } : {}),
    ...(base.ignorePreflightErrors?.length ? { ignorePreflightErrors: [...base.ignorePreflightErrors] } : {}),
    ...(base.imagePullPolicy ? { imagePullPolicy: base.imagePullPolicy } : {}),
  };
  return Object.keys(registration).length ? registration : undefined;
}

function machineTemplateMetadata(pool: MachinePool, extra: Record<string, string> = {}): { labels?: Record<string, string> } | undefined {
  const labels = sortKeys({ ...pool.labels, ...extra });
  return Object.keys(labels).length ? { labels } : undefined;
}

/**
 * kube-controller-manager's client rate, 150 requests a second with bursts of 300 (upstream:
 * 20 and 30; OpenShift runs its controller manager at 150 and 300). At its start the
 * controller manager makes a ServiceAccount for each of its controllers through that one
 * client, about three requests each, so at upstream's rate its controllers started 5 s after
 * it became leader, with the machine idle; the DaemonSets' pods (the pod network, so the first
 * node's Ready) and the bootstrap-token signature a joining node's discovery waits for came
 * that much later. A platform's own value for either flag wins.
 */
export const controllerManagerClientRate: readonly KubeletArg[] = [
  { name: 'kube-api-qps', value: '150' },
  { name: 'kube-api-burst', value: '300' },
];

/** The platform's cluster configuration with `controllerManagerClientRate` added where the platform names neither flag. */
export function withControllerManagerDefaults(clusterConfiguration: ClusterConfiguration | undefined): ClusterConfiguration {
  const own = clusterConfiguration?.controllerManager?.extraArgs ?? [];
  const added = controllerManagerClientRate.filter((arg) => !own.some((o) => o.name === arg.name));
  return { ...clusterConfiguration, controllerManager: { ...clusterConfiguration?.controllerManager, extraArgs: [...own, ...added] } };
}

/** The control plane's kubeadm settings: the platform's cluster configuration (`withControllerManagerDefaults`) and node registration on init and join. */
function controlPlaneKubeadmConfig(config: InstallConfig, platform: Platform, pool: MachinePool): KubeadmConfigSpec {
  const registration = nodeRegistration(platform, config, pool, 'controlPlane');
  const kubeadm = platform.kubeadm(config, 'controlPlane');
  const init = phaseSettings(kubeadm, registration, 'init');
  const join = phaseSettings(kubeadm, registration && structuredClone(registration), 'control-plane-join');
  return {
    clusterConfiguration: withControllerManagerDefaults(kubeadm.clusterConfiguration),
    ...(init ? { initConfiguration: init } : {}),
    ...(join ? { joinConfiguration: join } : {}),
    ...machineSetup(kubeadm),
  };
}

/**
 * Init or join settings: the node registration, and the platform's skipped phases (init)
 * and advertise address (init, and a control-plane join); undefined when there are none.
 */
function phaseSettings(kubeadm: PlatformKubeadm, registration: NodeRegistration | undefined, phase: 'init' | 'join' | 'control-plane-join'): KubeadmPhaseSettings | undefined {
  const endpoint = kubeadm.advertiseAddress ? { advertiseAddress: kubeadm.advertiseAddress } : undefined;
  const settings: KubeadmPhaseSettings = {
    ...(registration ? { nodeRegistration: registration } : {}),
    ...(phase === 'init' && kubeadm.skipPhases?.length ? { skipPhases: [...kubeadm.skipPhases] } : {}),
    ...(phase === 'init' && endpoint ? { localAPIEndpoint: endpoint } : {}),
    ...(phase === 'control-plane-join' && endpoint ? { controlPlane: { localAPIEndpoint: endpoint } } : {}),
  };
  return Object.keys(settings).length ? settings : undefined;
}

/** The platform's files and commands before kubeadm (cloud-config write_files and runcmd). */
function machineSetup(kubeadm: PlatformKubeadm): Pick<KubeadmConfigSpec, 'files' | 'preKubeadmCommands'> {
  return {
    ...(kubeadm.files?.length ? { files: kubeadm.files.map((f) => ({ ...f })) } : {}),
    ...(kubeadm.preKubeadmCommands?.length ? { preKubeadmCommands: [...kubeadm.preKubeadmCommands] } : {}),
  };
}

/** The ClusterClass's control plane: the kubeadm settings only (replicas, version and labels come from the Cluster's topology). */
function buildControlPlaneTemplate(config: InstallConfig, platform: Platform, pool: MachinePool, metadata: ObjectMeta): KubeadmControlPlaneTemplate {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlaneTemplate',
    metadata,
    spec: { template: { spec: { kubeadmConfigSpec: controlPlaneKubeadmConfig(config, platform, pool) } } },
  };
}

function buildControlPlane(config: InstallConfig, platform: Platform, pool: MachinePool, metadata: ObjectMeta, infrastructureRef: ContractReference): KubeadmControlPlane {
  const kubeadmConfigSpec = controlPlaneKubeadmConfig(config, platform, pool);
  const templateMetadata = machineTemplateMetadata(pool);
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata,
    spec: {
      replicas: pool.quantity,
      version: config.kubernetesVersion,
      machineTemplate: {
        ...(templateMetadata ? { metadata: templateMetadata } : {}),
        spec: { infrastructureRef },
      },
      kubeadmConfigSpec,
    },
  };
}

/**
 * Cluster API's annotation that names MachineSet preflight checks to skip; a MachineSet reads
 * it from its bootstrap config template too, so one place covers both layouts.
 */
const skipPreflightChecksAnnotation = 'machineset.cluster.x-k8s.io/skip-preflight-checks';

/**
 * The worker pools skip ControlPlaneIsStable: with it, Cluster API creates no worker Machine
 * while the control plane is provisioning, so a worker host could not download and import
 * its images (or a cloud VM boot) beside the first control plane's; its join waits for the
 * control plane's join data anyway. The version-skew checks stay (docs/architecture.md,
 * "Cluster API settings for a new cluster's pace").
 */
const skippedWorkerPreflightChecks = 'ControlPlaneIsStable';

function buildBootstrapTemplate(config: InstallConfig, platform: Platform, pool: MachinePool, metadata: ObjectMeta): KubeadmConfigTemplate {
  const registration = nodeRegistration(platform, config, pool, 'worker');
  const kubeadm = platform.kubeadm(config, 'worker');
  return {
    apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmConfigTemplate',
    metadata: { ...metadata, annotations: sortKeys({ ...metadata.annotations, [skipPreflightChecksAnnotation]: skippedWorkerPreflightChecks }) },
    // The CRD needs at least one field in the spec: joinConfiguration is always there.
    spec: { template: { spec: { joinConfiguration: phaseSettings(kubeadm, registration, 'join') ?? {}, ...machineSetup(kubeadm) } } },
  };
}

function buildMachineDeployment(
  config: InstallConfig,
  pool: MachinePool,
  metadata: ObjectMeta,
  configRef: ContractReference,
  infrastructureRef: ContractReference,
): MachineDeployment {
  const clusterName = config.metadata.name;
  const selector = { [clusterNameLabel]: clusterName, [deploymentNameLabel]: metadata.name };
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'MachineDeployment',
    metadata,
    spec: {
      clusterName,
      replicas: pool.quantity,
      selector: { matchLabels: selector },
      template: {
        metadata: machineTemplateMetadata(pool, selector) ?? { labels: selector },
        spec: {
          clusterName,
          version: config.kubernetesVersion,
          bootstrap: { configRef },
          infrastructureRef,
        },
      },
    },
  };
}

