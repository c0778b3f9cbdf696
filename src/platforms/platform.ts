/**
 * What a platform contributes. Everything platform-specific lives in one folder,
 * src/platforms/<name>/, behind this interface, and the registry (./registry.ts) lists
 * the folders; services, config and cli only ever go through the registry, so they never
 * name a platform (src/platforms/no-platform-names.test.ts checks it).
 *
 * A platform supplies:
 *   - its install-config sections (`installConfig`: schema, defaults, rules, `explain`
 *     text, file checks) and the flags and prompt questions of `create install-config`
 *     (`inputs`, `newSection`);
 *   - its manifests: the infrastructure cluster and machine templates, and the kubeadm
 *     settings its machines need (the common Cluster API objects are built once in
 *     ./generate.ts);
 *   - the controllers that provision it and the credentials files they read, handed over
 *     by path in the controller's environment, never by content;
 *   - the templates of the ClusterClass layout (`clusterClass`, optional);
 *   - what the lifecycle needs to know (`lifecycle`) and optional hooks the stages of
 *     `create cluster` and `destroy cluster` call (`hooks`).
 */
import type { InstallConfig, MachinePool, PlatformConfigSection, SchemaNode } from '../config/index.js';
import type { EventSink } from '../events.js';
import type { ClusterConfiguration, InfrastructureCluster, KubeObject, InfrastructureClusterTemplate, InfrastructureMachineTemplate, KubeadmFile, NodeRegistration, UnnamedObject } from './types.js';

/** An object with its name, before the generator adds the namespace, labels and ownership. */
export type NamedObject = UnnamedObject<KubeObject> & { metadata: { name: string } };

/** A bundled controller's executable name, e.g. `capi-manager`. */
export type ControllerBinary = string;

export interface ControllerRequirement {
  binary: ControllerBinary;
  /** Provider name as clusterctl knows it, e.g. `infrastructure-docker`: its CRDs and webhooks are installed with it. */
  provider: string;
  /** Feature gates to pass as `--feature-gates`, by gate name. Empty: the controller's defaults. */
  featureGates: Record<string, boolean>;
  /** Extra flags, by flag name without dashes. Default: none. */
  args?: Record<string, string | number | boolean>;
  /** Non-secret environment the controller needs, e.g. its debug server's port. Default: none. */
  env?: Record<string, string>;
  /**
   * The bundle must carry the binary: a bundle without it is an error. False: it may
   * not yet (the bundle has the provider's CRDs only): then the CRDs are installed (the
   * manifests can be validated) and nothing runs it. Whenever the bundle carries the
   * binary, it runs.
   */
  bundled: boolean;
}

/** A credentials file a platform's controllers read, and how to point them at it. */
export interface CredentialFileReference {
  /** Absolute path, resolved from the install config. */
  path: string;
  /** Environment variable (of the controller) that names the file, e.g. AWS_SHARED_CREDENTIALS_FILE. Default: none (then fileFlag). */
  fileEnv?: string;
  /** Flag (without dashes) that names the file, for a controller that reads no environment, e.g. CAPV's `credentials-file`. Default: none. */
  fileFlag?: string;
  /** Extra non-secret settings, e.g. { AWS_PROFILE: 'default' }. */
  settings: Record<string, string>;
  /** Binaries of the controllers that read it (from `controllers()`). */
  controllers: readonly ControllerBinary[];
}

/** The role a machine template is for: control-plane machines or a worker pool. */
export type TemplateRole = 'controlPlane' | 'worker';

/** Kubeadm settings the platform needs on its machines. */
export interface PlatformKubeadm {
  /** Merged into KubeadmControlPlane's clusterConfiguration. */
  clusterConfiguration?: ClusterConfiguration;
  /** Node registration of every machine (init and join); taints and labels are added by the generator. */
  nodeRegistration: NodeRegistration;
  /** kubeadm phases `kubeadm init` skips (e.g. an addon whose image the platform cannot provide; join has no addon phases). Default: none. */
  skipPhases?: string[];
  /** The API server's advertise address on control-plane machines, for init and a control-plane join (may be a cloud-config variable). Default: kubeadm's (the default route's address). */
  advertiseAddress?: string;
  /** Files written before kubeadm runs. Default: none. */
  files?: KubeadmFile[];
  /** Commands run before kubeadm, in order. Default: none. */
  preKubeadmCommands?: string[];
}

/** A group/version and kind. */
export interface KindRef {
  apiVersion: string;
  kind: string;
}

/**
 * One answer `create install-config` takes for the platform: a flag (`--<flag>`, with the
 * environment twin `PROVISIONER_<FLAG>`) on any terminal, a question on an interactive one.
 * Platforms may share an input (same key, same meaning): the flag is declared once.
 */
export interface PlatformInput {
  /** Answer key, camelCase; the flag is its kebab-case form: `sshKeyName` → `--ssh-key-name`. */
  key: string;
  /** Placeholder of the value in --help, e.g. `region`. */
  valueName: string;
  /** One line for --help. */
  description: string;
  /** The prompt's question. */
  label: string;
  /** Must be answered: without a terminal the flag is required. Default false (empty leaves the field's default). */
  required?: boolean;
  /** Pre-filled answer of the question (Enter accepts it). Default: none. */
  initial?: string;
  /** The schema node the answer must satisfy, checked as it is typed. Default: any text. */
  node?: SchemaNode;
}

/** Facts about where a platform's machines live, which the stages of the lifecycle act on. */
export interface PlatformLifecycle {
  /**
   * Machines live inside an infrastructure controller's process (simulated): the control
   * plane that runs it must outlive `create cluster` (it starts detached and stays up as
   * the cluster's management), and a pivot stops the source before the target takes over.
   * False: the temporary control plane stops after the hand-off.
   */
  machinesInController: boolean;
  /** Infrastructure kinds the hand-off records in cluster-state.yaml, besides the Cluster API core ones. */
  stateKinds: readonly KindRef[];
  /**
   * What `destroy bootstrap` removes besides the local control plane and its data
   * (e.g. a cloud resource that served only the bootstrap), in one line for the docs.
   * Default: nothing else.
   */
  bootstrapResources?: string;
}

/** A file the local control plane serves for machines to download (node binaries, image archives). */
export interface ServedArtifact {
  /** Path below the served directory, `/`-separated, e.g. `node/bin/kubelet`. */
  path: string;
  /** Hex sha256 of the content. */
  sha256: string;
  /** Where machines GET it; undefined when the control plane serves no listen address. */
  url: string | undefined;
}

/**
 * What a cluster runs to serve its own machines' downloads (`ServedArtifact`s) once it manages
 * itself and the local control plane that served them is gone: `management install --dir D`
 * applies it into D's cluster.
 */
export interface InClusterArtifacts {
  /** Bundled binaries whose images the objects run; built and loaded like the providers'. */
  readonly binaries: readonly string[];
  /**
   * The objects to apply (the Deployments among them are waited for), given each binary's
   * image ref, what the management cluster serves now, and the URL of the cluster's API
   * server as its machines reach it.
   */
  render(input: { images: Readonly<Record<string, string>>; served: readonly ServedArtifact[]; server: string }): {
    objects: InClusterObject[];
    deployments: { namespace: string; name: string }[];
  };
}

/** An object `InClusterArtifacts` applies. */
export interface InClusterObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** What a hook is given: the install directory and a kubeconfig of the management cluster. */
export interface PlatformHookContext {
  config: InstallConfig;
  /** Absolute install directory. */
  dir: string;
  /** Kubeconfig of the (local or existing) management cluster. */
  kubeconfig: string;
  signal: AbortSignal;
  /** One line of progress for the user. */
  log(message: string): void;
  /** Typed events (progress, results) for the user. */
  events: EventSink;
  /** The command's no-progress timeout (`--no-progress-timeout`), for a hook that waits. Default: the hook's own. */
  noProgressTimeoutMs?: number;
  /**
   * Prepares what the local control plane serves for machines to download and lists it.
   * Absent: the management cluster serves nothing (an existing one named by flag).
   */
  nodeArtifacts?(): Promise<ServedArtifact[]>;
}

/**
 * Lifecycle hooks, each optional, called by the stages of `create cluster` (before the
 * user's hooks of the same stage). A hook that throws fails its stage; it must be safe to
 * call again on a resume.
 */
export interface PlatformHooks {
  /** Before any infrastructure object is applied: checks that need no cloud (credentials file readable and well-formed, region known). */
  preProvision?(context: PlatformHookContext): Promise<void>;
  /** The infrastructure is ready and the control-plane endpoint is known. */
  infraReady?(context: PlatformHookContext): Promise<void>;
  /** Bootstrap data exists, before the machines are created. */
  bootstrapData?(context: PlatformHookContext): Promise<void>;
  /** The control plane and nodes are ready, before the hand-off. */
  postProvision?(context: PlatformHookContext): Promise<void>;
  /** `destroy bootstrap`: removes `lifecycle.bootstrapResources`, after the local control plane is gone. */
  destroyBootstrap?(context: Omit<PlatformHookContext, 'kubeconfig' | 'events'>): Promise<void>;
  /**
   * `destroy cluster`, when the deletion of a cluster made no progress for the no-progress
   * timeout: the provider's objects being deleted may be released (their finalizers
   * removed) when what the provider recorded shows that nothing of them was ever created
   * outside the management cluster, so there is nothing its controller could still delete.
   * Returns what it released (empty: nothing, and destroy fails as it would without the hook).
   */
  releaseUnprovisioned?(context: PlatformDestroyContext): Promise<ReleasedObject[]>;
  /**
   * `create cluster`, while it waits for the machines: watches what the platform's
   * provider records and rejects, with a MachinesError naming the machine and the cause,
   * when one failed for good (the wait then fails at once instead of after the
   * no-progress timeout). Stopped through the context's signal.
   */
  machineFailures?(context: PlatformHookContext): Promise<never>;
  /**
   * `destroy cluster`, before its Clusters are deleted: returns what to run once every
   * Cluster API object of them is gone (e.g. report what the provider released).
   */
  clusterDeletion?(context: PlatformHookContext & { clusterName: string; namespace: string }): Promise<() => Promise<void>>;
  /**
   * `images load`: puts `images` (image archives the local control plane serves) onto every
   * node of the cluster, and onto nodes that join later. Absent: the platform's nodes pull
   * from registries, and the command is refused.
   */
  loadImages?(context: PlatformHookContext, images: readonly ServedArtifact[]): Promise<void>;
}

/**
 * What the ClusterClass layout (`manifests.layout: topology`) needs of a platform: its
 * provider's infrastructure cluster template. The machine templates are the classic
 * layout's (`machineTemplate`), which a ClusterClass names as they are.
 */
export interface PlatformClusterClass {
  /** Kind of the infrastructure cluster template (group and version: `infrastructure.apiVersion`). */
  readonly clusterTemplateKind: string;
  /** The template every Cluster of the class gets its infrastructure cluster from: the classic infrastructure cluster's spec under `spec.template.spec`. */
  infrastructureClusterTemplate(config: InstallConfig): UnnamedObject<InfrastructureClusterTemplate>;
}

/** An object of the platform's provider as a destroy-time hook reads it: JSON as the API server returns it. */
export interface ProviderObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; deletionTimestamp?: string; finalizers?: string[] };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** An object whose finalizers a platform released, and why, for the user. */
export interface ReleasedObject {
  kind: string;
  namespace: string;
  name: string;
  /** One line: what the provider recorded that shows nothing of it exists outside the management cluster. */
  reason: string;
}

/** What `destroy cluster` gives a platform's `releaseUnprovisioned` hook. */
export interface PlatformDestroyContext {
  config: InstallConfig;
  clusterName: string;
  namespace: string;
  /** The objects of `kind` in the cluster's namespace. */
  list(apiVersion: string, kind: string): Promise<ProviderObject[]>;
  /** Removes the finalizers of an object that is being deleted. */
  releaseFinalizers(object: ProviderObject): Promise<void>;
  /** One line for the user: why nothing was released. */
  log(message: string): void;
}

export interface Platform {
  readonly name: string;
  /** One line for `--help`, the prompt's platform choice and `explain`. */
  readonly description: string;
  /** Its sections of the install config. */
  readonly installConfig: PlatformConfigSection;
  /** Flags and prompt questions of `create install-config`. */
  readonly inputs: readonly PlatformInput[];
  /** The `platform.<name>` section a user would write for these answers (keys of `inputs`; absent: not given). */
  newSection(answers: Readonly<Record<string, string>>): Record<string, unknown>;
  /** Fields outside `platform` the platform needs for these answers, e.g. `bootstrap.listenAddress`. Default: none. */
  newBootstrapSection?(answers: Readonly<Record<string, string>>): { listenAddress?: string } | undefined;
  /** Group/kinds of the infrastructure objects (group infrastructure.cluster.x-k8s.io). */
  readonly infrastructure: { apiVersion: string; clusterKind: string; machineTemplateKind: string };
  /** Provider version the objects were written against, for the record. */
  readonly providerVersion: string;
  /** The infrastructure cluster's spec (its provider's kind). */
  infrastructureCluster(config: InstallConfig): UnnamedObject<InfrastructureCluster>;
  /** The infrastructure machine template of a pool; the generator names it by a hash of its spec. */
  machineTemplate(config: InstallConfig, pool: MachinePool, role: TemplateRole): UnnamedObject<InfrastructureMachineTemplate>;
  /** The ClusterClass layout's templates. Absent: the platform refuses `manifests.layout: topology` (a config error naming the field). */
  readonly clusterClass?: PlatformClusterClass;
  /** Kubeadm settings for the machines of `role`. */
  kubeadm(config: InstallConfig, role: TemplateRole): PlatformKubeadm;
  /** Kinds apply lists for pruning even when the new generation has none of them (a removed last pool's templates). */
  readonly prunableKinds: readonly KindRef[];
  /** Controllers that must run to provision this platform; `create cluster` starts these and those of `configControllers`. */
  readonly controllers: readonly ControllerRequirement[];
  /** Controllers a particular install config needs besides `controllers` (e.g. the address pool's manager when the config has a pool). Default: none. */
  configControllers?(config: InstallConfig): ControllerRequirement[];
  /**
   * Objects of the platform besides the infrastructure cluster and machine templates, each
   * named (e.g. an address pool the machine templates name); the generator adds the
   * namespace, the cluster label and the ownership. Default: none.
   */
  infrastructureResources?(config: InstallConfig): NamedObject[];
  /** Credentials files the controllers read (never their content). */
  credentialFiles(config: InstallConfig, installDir: string): CredentialFileReference[];
  readonly lifecycle: PlatformLifecycle;
  readonly hooks?: PlatformHooks;
  /** How the platform's cluster serves its machines' downloads itself (a self-managed cluster). Absent: its machines download nothing from the management cluster. */
  readonly inClusterArtifacts?: InClusterArtifacts;
  /**
   * The images of the bundled add-ons on this platform's nodes, which import the bundle's
   * images instead of pulling them: with it, networking.cni defaults to the bundled flannel.
   * Absent (the default): the nodes pull from registries, networking.cni defaults to none
   * and flannel is refused, naming the field.
   */
  readonly bundledAddons?: { flannelImage: string };
}

/** Kinds of the Cluster API core and kubeadm providers that apply may prune, whatever the platform. */
export const corePrunableKinds: readonly KindRef[] = [
  { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineDeployment' },
  { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfigTemplate' },
  // The ClusterClass layout's control-plane template, replaced (new name) when its spec changes.
  { apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2', kind: 'KubeadmControlPlaneTemplate' },
];

/**
 * Cluster API's ClusterTopology gate (off by default): ClusterClass and `Cluster.spec.topology`,
 * which the webhooks refuse without it. The core manager serves the topology and its
 * webhooks; the kubeadm control-plane manager's webhooks and remediation read the gate too,
 * and so does an infrastructure provider built on Cluster API's feature package, whose
 * cluster-template webhook refuses its template without it.
 */
export const clusterTopologyGate = { ClusterTopology: true } as const;
const clusterTopology = clusterTopologyGate;

/**
 * The node agent's provider (provider/: registration, NodePlans, and the infrastructure
 * provider of machines on registered hosts), served by capi-manager beside Cluster API's
 * own. Not one platform's alone: `provisioner hosts` and `plan` use it on any management
 * cluster, so a platform that needs it declares it through this function, and the rule
 * that nothing outside src/platforms names a platform leaves its names alone.
 */
export function agentController(): ControllerRequirement {
  return { binary: 'capi-manager', provider: 'agent-provisioner', featureGates: {}, bundled: true };
}

/**
 * The controller of address pools (ipam.provisioner.dev AddressPool): the agent manager,
 * whose IPAddressClaim controller serves Cluster API's IPAM contract from the pools. A
 * platform whose machines take addresses from a pool declares it through this function.
 */
export function addressPoolController(): ControllerRequirement {
  return agentController();
}

/** The controllers a local control plane runs for `config` on `platform`: the platform's, and those the config asks for. */
export function platformControllers(platform: Platform, config: InstallConfig): ControllerRequirement[] {
  return [...platform.controllers, ...(platform.configControllers?.(config) ?? [])];
}

/** Controllers more than one feature uses; their names are not a platform's (src/platforms/no-platform-names.test.ts). */
export function sharedControllers(): ControllerRequirement[] {
  return [agentController()];
}

/**
 * How often at most Cluster API's controllers reconcile one object in a local control plane
 * (capi-manager's --reconcile-rate-limit-interval; upstream's fixed 1 s stays in a cluster
 * `management install` writes). With a handful of objects, the second-long pauses after each
 * object's own write were about 4 s of a hosts `create cluster` (docs/benchmarks.md, "hosts").
 */
export const localReconcileRateLimitInterval = '100ms';

/** The core, bootstrap and control-plane providers every platform needs, all served by one process (capi-manager, which serves the agent provider too). */
export function coreControllers(): ControllerRequirement[] {
  return [
    {
      binary: 'capi-manager',
      provider: 'cluster-api',
      featureGates: { ...clusterTopology },
      args: { 'reconcile-rate-limit-interval': localReconcileRateLimitInterval },
      bundled: true,
    },
    { binary: 'capi-manager', provider: 'bootstrap-kubeadm', featureGates: {}, bundled: true },
    { binary: 'capi-manager', provider: 'control-plane-kubeadm', featureGates: { ...clusterTopology }, bundled: true },
  ];
}
