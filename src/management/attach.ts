/**
 * Attaches an install's management cluster, one way for every command (`attachManagement`):
 * an existing (external) management cluster, checked and recorded; or the install's local
 * control plane, adopted when running, else started from its data as create cluster ran it:
 * the platform's controllers with their credentials files, the listen address and its
 * forwarder, detached when it must outlive the command; every local one carries the fence a
 * pivot uses. Below it, `prepareLocalControlPlane` builds a LocalControlPlane from the binary
 * catalog (a development bundle, or the installed platform packages): resolves (extracts, if
 * needed) the binaries of etcd, kube-apiserver and every provider controller, and maps each
 * provider's component manifest (`management start` uses it directly).
 */
import { removeStoredObjects } from '../controlplane/etcd-storage.js';
import { goRuntimeEnv } from '../controlplane/components.js';
import { LocalControlPlane, controlPlaneStatus, forwarderName, readListenRecord, stopRecordedControllers, type ProviderSpec } from '../controlplane/local-controlplane.js';
import { ensureBinaries } from '../embedded/cache.js';
import { loadBinaryCatalog } from '../embedded/catalog.js';
import path from 'node:path';
import { ConfigError, EnvironmentError, ExternalError, UsageError, messageOf } from '../errors.js';
import { listenAddressProblem } from '../controlplane/listen-address.js';
import { log, type EventSink } from '../events.js';
import { KubeClient } from '../kube/client.js';
import type { BundledComponents } from '../embedded/manifest.js';
import { installConfigFileName, type InstallConfig } from '../config/index.js';
import { recordExternalManagement } from '../installdir/management.js';
import { allControllers, platformControllers, platformFor, type ControllerRequirement, type CredentialFileReference, type Platform } from '../platforms/index.js';
import type { FencedSource } from '../pivot/move.js';
import type { ProcessError } from '../process/errors.js';

export interface LocalControlPlaneRequest {
  dir: string;
  detached: boolean;
  sink: EventSink;
  signal: AbortSignal;
  /**
   * Start the providers' controllers. Default true. False for commands that only read
   * objects (gather bootstrap, destroy bootstrap): etcd and the API server only, and the
   * controller binaries are not even extracted. See LocalControlPlaneOptions.reconcile.
   */
  reconcile?: boolean;
  /**
   * The controllers to run, with their flags and environment: a platform's
   * (`Platform.controllers`); only their providers' CRDs and webhooks are installed.
   * Default: every provider the bundle carries, with the settings the platforms declare
   * (`management start`).
   */
  controllers?: readonly ControllerRequirement[];
  /**
   * The one address besides loopback where hosts reach the API server (a forwarder listens
   * there). Default none: loopback only. Checked with listenAddressProblem by the caller,
   * which knows which field or flag named it.
   */
  listenAddress?: string;
  /** The flag or install-config field that named `listenAddress`, for messages. Default: "the listen address". */
  listenAddressFrom?: string;
  /** Credentials files the controllers read, handed over by path in their environment (never content). Default none. */
  credentials?: readonly CredentialFileReference[];
  onFatal?: (error: ProcessError) => void;
}

export async function prepareLocalControlPlane(request: LocalControlPlaneRequest): Promise<LocalControlPlane> {
  // Read first: a bad PROVISIONER_CONTROL_PLANE_GOGC is refused before any binary is extracted.
  const goRuntime = goRuntimeEnv(request.detached ? 'lasting' : 'temporary');
  const catalog = await loadBinaryCatalog();
  const reconcile = request.reconcile ?? true;
  const planned = planProviders(catalog.components, { controllers: request.controllers, credentials: request.credentials ?? [], sink: request.sink });
  const controllers = reconcile ? [...new Set(planned.flatMap((p) => (p.controller ? [p.controller] : [])))] : [];
  // A binary the bundle names for several providers runs those it is told to (--providers).
  const selectsProviders = (binary: string) => catalog.components.filter((c) => c.binary === binary).length > 1;
  // The forwarder serves the listen address only in a full start; a reading start listens on loopback alone.
  const forwarder = reconcile && request.listenAddress ? [forwarderName] : [];
  const binaries = await ensureBinaries(['etcd', 'kube-apiserver', ...forwarder, ...controllers], { catalog, sink: request.sink, signal: request.signal });
  const providers: ProviderSpec[] = planned.map(({ component, controller, ...settings }) => ({
    provider: component.provider,
    namespace: component.namespace,
    componentsFile: catalog.componentsPath(component),
    ...(controller ? { controller, ...(selectsProviders(controller) ? { selectsProviders: true } : {}), ...(reconcile ? { binaryPath: binaries[controller]! } : {}), ...settings } : {}),
  }));
  return new LocalControlPlane({
    dir: request.dir,
    etcdBinary: binaries.etcd!,
    apiServerBinary: binaries['kube-apiserver']!,
    providers,
    ...(forwarder.length > 0 ? { listenAddress: request.listenAddress!, forwarderBinary: binaries[forwarderName]! } : {}),
    detached: request.detached,
    reconcile,
    goRuntime,
    events: request.sink,
    signal: request.signal,
    ...(request.onFatal ? { onFatal: request.onFatal } : {}),
  });
}

/** A provider to install: its components, and the controller that runs for it with its settings (none: CRDs and webhooks only). */
export interface PlannedProvider {
  component: BundledComponents;
  controller?: string;
  featureGates?: Record<string, boolean>;
  args?: Record<string, string | number | boolean>;
  env?: Record<string, string>;
}

/**
 * The providers a control plane installs and the controllers it runs: those of
 * `controllers` (a platform's), or, given none, every provider of the bundle with the
 * settings the platforms declare for it. A controller runs when the bundle carries its
 * binary; one the bundle lacks gets its CRDs only (with a warning) when its requirement
 * says `bundled: false`, and is an error otherwise. Each controller's environment gets
 * the credentials files it reads, by path.
 */
export function planProviders(
  components: readonly BundledComponents[],
  options: { controllers?: readonly ControllerRequirement[] | undefined; credentials: readonly CredentialFileReference[]; sink: EventSink },
): PlannedProvider[] {
  const selected = options.controllers;
  const requirements = new Map<string, ControllerRequirement | undefined>();
  if (selected) {
    const rebuild = 'Rebuild the bundle (`npm run bundle`), or point PROVISIONER_BUNDLE_DIR at one that carries it.';
    for (const requirement of selected) {
      const component = components.find((c) => c.provider === requirement.provider);
      if (!component) {
        throw new EnvironmentError(`The bundle has no ${requirement.provider} provider (${requirement.binary}), which this install's platform needs`, { hint: rebuild });
      }
      if (component.binary !== requirement.binary) {
        if (requirement.bundled) throw new EnvironmentError(`The bundle has the ${requirement.provider} CRDs but not ${requirement.binary}, which this install's platform runs`, { hint: rebuild });
        log(options.sink, 'warn', `${requirement.binary} is not in the bundle yet: the ${requirement.provider} CRDs are installed so the manifests validate, but no controller provisions this platform's infrastructure`);
      }
      requirements.set(requirement.provider, requirement);
    }
  } else {
    const declared = new Map(allControllers().map((r) => [r.provider, r]));
    for (const c of components) requirements.set(c.provider, c.binary ? declared.get(c.provider) : undefined);
  }
  return components
    .filter((c) => requirements.has(c.provider))
    .map((component) => {
      const requirement = requirements.get(component.provider);
      if (!component.binary || (requirement && requirement.binary !== component.binary)) return { component };
      const env = { ...requirement?.env, ...credentialsEnv(options.credentials, component.binary) };
      const args = { ...requirement?.args, ...credentialsArgs(options.credentials, component.binary) };
      return {
        component,
        controller: component.binary,
        ...(requirement && Object.keys(requirement.featureGates).length > 0 ? { featureGates: requirement.featureGates } : {}),
        ...(Object.keys(args).length > 0 ? { args } : {}),
        ...(Object.keys(env).length > 0 ? { env } : {}),
      };
    });
}

/** The environment that points `controller` at the credentials files it reads: each file's path and its non-secret settings. */
export function credentialsEnv(credentials: readonly CredentialFileReference[], controller: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const file of credentials) {
    if (file.controllers.includes(controller)) Object.assign(env, file.fileEnv ? { [file.fileEnv]: file.path } : {}, file.settings);
  }
  return env;
}

/**
 * How an install's own local control plane runs, from its install config: the platform's
 * controllers, the credentials files they read, and the listen address where its hosts
 * reach it (checked, naming the field). The one description every command that attaches the
 * install's control plane uses, so one that has to start it again (a pivot's resume,
 * destroy, wait-for, images load) runs it as create cluster did: the cloud controller with
 * its credentials, the forwarder where the hosts' agents and kubelets connect.
 */
export function installControlPlane(config: InstallConfig, dir: string): Pick<LocalControlPlaneRequest, 'controllers' | 'credentials' | 'listenAddress' | 'listenAddressFrom'> {
  const platform = platformFor(config);
  const address = config.bootstrap?.listenAddress;
  const source = { field: 'bootstrap.listenAddress', file: path.join(dir, installConfigFileName) };
  if (address) checkListenAddress(address, source);
  return {
    controllers: platformControllers(platform, config),
    credentials: platform.credentialFiles(config, dir),
    ...(address ? { listenAddress: address, listenAddressFrom: describeListenAddressSource(source) } : {}),
  };
}

/** The flags that point `controller` at the credentials files it reads by flag (a controller that reads no environment). */
export function credentialsArgs(credentials: readonly CredentialFileReference[], controller: string): Record<string, string> {
  const args: Record<string, string> = {};
  for (const file of credentials) if (file.fileFlag && file.controllers.includes(controller)) args[file.fileFlag] = file.path;
  return args;
}

/** A running local control plane this command can use, whether it started it or found it running. */
export interface AttachedControlPlane {
  client: KubeClient;
  kubeconfig: string;
  /** True when it was already running (a lasting one, or left up by an interrupted run) and was adopted. */
  adopted: boolean;
  /** Rejects when a controller crashed past its restart budget (never, for an adopted one). */
  fatal: Promise<never>;
  /** Stops what this command started; an adopted control plane is left running. */
  stop(): Promise<void>;
  /** The install's own local control plane as a pivot's source to fence (pivot/move.ts). Absent for an external management cluster. */
  fence?: FencedSource;
}

/** An install's local control plane as a fence: controllers stopped through whoever runs them, objects removed from its etcd. */
function localFence(dir: string, stopControllers: () => Promise<void>): FencedSource {
  return { stopControllers, removeObjects: (refs) => removeStoredObjects(dir, refs) };
}

/** A control plane this process started, as attached (the pivot benchmark moves from one it owns). */
export function attachedFrom(controlPlane: LocalControlPlane, fatal: Promise<never> = new Promise<never>(() => {})): AttachedControlPlane {
  return {
    client: controlPlane.kube,
    kubeconfig: controlPlane.kubeconfig,
    adopted: false,
    fatal,
    stop: () => controlPlane.stop(),
    fence: localFence(controlPlane.layout.dir, () => controlPlane.stopControllers()),
  };
}

/**
 * Adopts the control plane of `dir` when every recorded process is running and healthy;
 * otherwise stops whatever is left of it and starts it (from its data, if any) — without
 * its controllers when `reconcile` is false.
 */
export async function attachLocalControlPlane(request: LocalControlPlaneRequest): Promise<AttachedControlPlane> {
  const status = await controlPlaneStatus(request.dir);
  if (status.usable) {
    if (request.listenAddress) await checkRunningListenAddress(request.dir, request.listenAddress, request.listenAddressFrom ?? 'the listen address');
    log(request.sink, 'info', `Using the control plane already running in ${status.layout.dir}`);
    const client = KubeClient.fromFile(status.layout.kubeconfig);
    return {
      client,
      kubeconfig: status.layout.kubeconfig,
      adopted: true,
      fatal: new Promise<never>(() => {}),
      stop: async () => client.close(),
      fence: localFence(status.layout.dir, () => stopRecordedControllers(status.layout.dir, request.sink)),
    };
  }
  let rejectFatal: (error: unknown) => void = () => {};
  const fatal = new Promise<never>((_, reject) => (rejectFatal = reject));
  fatal.catch(() => {}); // observed by the waits; never an unhandled rejection
  const controlPlane = await prepareLocalControlPlane({ ...request, onFatal: (error) => rejectFatal(error) });
  await controlPlane.start();
  return attachedFrom(controlPlane, fatal);
}

/** Where a listen address was named: a flag, or a field of the install config (with the file). */
export type ListenAddressSource = { flag: string } | { field: string; file: string };

export function describeListenAddressSource(source: ListenAddressSource): string {
  return 'flag' in source ? source.flag : `${source.field} in ${source.file}`;
}

/**
 * Refuses a listen address that is not one of this machine's (non-loopback) addresses,
 * naming the flag (usage error) or the install-config field (config error) it came from,
 * before anything starts.
 */
export function checkListenAddress(address: string, source: ListenAddressSource): void {
  const problem = listenAddressProblem(address);
  if (problem === undefined) return;
  const hint = 'Name an address of one of this machine\'s interfaces that hosts can reach (`ip -br addr` lists them), or none to listen on loopback only.';
  if ('flag' in source) throw new UsageError(`${source.flag} ${address}: ${problem}`, { hint });
  throw new ConfigError(`${source.file}: ${source.field} cannot be listened on`, [{ path: source.field, message: problem }], { hint });
}

/**
 * A running control plane keeps the listen address it was started with: asked for another
 * one, the caller learns how to change it instead of silently getting the old one.
 */
export async function checkRunningListenAddress(dir: string, wanted: string, from: string): Promise<void> {
  const running = await readListenRecord(dir);
  if (running?.address === wanted) return;
  throw new UsageError(`The local control plane in ${path.resolve(dir)} is running and listens on ${running ? `${running.address} (and loopback)` : 'loopback only'}, not on ${wanted} as ${from} asks`, {
    hint: `Stop it (\`provisioner management stop --dir ${dir}\`; its data stays), then run this again to start it with ${wanted}.`,
  });
}

/** Kinds the generated manifests need served, by provider, for the preflight of an existing management cluster. */
const requiredKinds: readonly { apiVersion: string; kind: string; provider: string }[] = [
  { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', provider: 'cluster-api (core)' },
  { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineDeployment', provider: 'cluster-api (core)' },
  { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfigTemplate', provider: 'bootstrap-kubeadm' },
  { apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2', kind: 'KubeadmControlPlane', provider: 'control-plane-kubeadm' },
];

/**
 * Checks that an existing management cluster (any conformant Kubernetes with the providers
 * installed) is reachable and serves every kind the manifests need, naming each missing
 * provider. Returns a client of it; throws an ExternalError otherwise.
 */
export async function checkManagementCluster(kubeconfig: string, infrastructure: readonly { apiVersion: string; kind: string }[]): Promise<KubeClient> {
  const client = KubeClient.fromFile(path.resolve(kubeconfig));
  try {
    await client.raw('/readyz');
  } catch (error) {
    client.close();
    throw new ExternalError(`The management cluster in ${kubeconfig} cannot be reached: ${messageOf(error)}`, { hint: 'Check the kubeconfig and that the cluster is up.' });
  }
  const missing: string[] = [];
  for (const need of [...requiredKinds, ...infrastructure.map((k) => ({ ...k, provider: `infrastructure (${k.kind})` }))]) {
    try {
      await client.collectionPath(need.apiVersion, need.kind);
    } catch {
      missing.push(`${need.kind} (${need.apiVersion}) from ${need.provider}`);
    }
  }
  if (missing.length > 0) {
    client.close();
    throw new ExternalError(`The management cluster in ${kubeconfig} lacks ${missing.length} kind(s) the manifests need`, {
      details: missing,
      hint: 'Install the missing providers there (for example with `clusterctl init`, or use `provisioner management start`), or run without it to use a local control plane.',
    });
  }
  return client;
}

/**
 * Uses an existing management cluster instead of a local control plane: checks it (see
 * checkManagementCluster) and records it for later commands.
 */
export async function attachExternalManagement(
  kubeconfig: string,
  dir: string,
  infrastructure: readonly { apiVersion: string; kind: string }[],
): Promise<AttachedControlPlane> {
  const client = await checkManagementCluster(kubeconfig, infrastructure);
  await recordExternalManagement(dir, kubeconfig);
  return { client, kubeconfig: path.resolve(kubeconfig), adopted: true, fatal: new Promise<never>(() => {}), stop: async () => client.close() };
}

/** An install whose management cluster a command attaches (`attachManagement`). */
export interface InstallManagement {
  /** The install directory, absolute. */
  dir: string;
  /**
   * The install config. Undefined when there is none or it no longer validates (edited since):
   * the local control plane then starts `platform`'s controllers (every bundled provider when
   * that is unknown too), without credentials files, on loopback.
   */
  config: InstallConfig | undefined;
  /** The platform when `config` is undefined (read without validating). Default: none. */
  platform?: Platform | undefined;
  /** The kubeconfig of the install's existing management cluster (recorded, or named by a flag). Default: none, the local control plane. */
  external?: string | undefined;
  /** Kinds an external management cluster must serve (its preflight). Default none. */
  infrastructure?: readonly { apiVersion: string; kind: string }[];
  /** The local control plane outlives the command. Default: when the platform's machines live in its controllers (lifecycle.machinesInController). */
  detached?: boolean;
  /** Start the controllers (see LocalControlPlaneRequest.reconcile); false reads objects only. Default true. */
  reconcile?: boolean;
  /** A listen address that wins over the config's `bootstrap.listenAddress`, with the flag that named it (checked by the command). Default: the config's. */
  listenAddress?: { address: string; flag: string } | undefined;
  sink: EventSink;
  signal: AbortSignal;
}

/**
 * The local control plane of an install as every command starts it: the platform's
 * controllers, the credentials files they read, the listen address where its hosts reach
 * it (a flag's winning over the config's), detached when its machines live in its controllers.
 * Throws a ConfigError naming the field when the config's listen address is not this machine's.
 */
export function localManagement(install: InstallManagement): LocalControlPlaneRequest {
  const platform = install.config ? platformFor(install.config) : install.platform;
  const reconcile = install.reconcile ?? true;
  const settings = !reconcile ? {} : install.config ? installControlPlane(install.config, install.dir) : platform ? { controllers: platform.controllers } : {};
  const listen = reconcile && install.listenAddress ? { listenAddress: install.listenAddress.address, listenAddressFrom: install.listenAddress.flag } : {};
  return {
    dir: install.dir,
    detached: install.detached ?? platform?.lifecycle.machinesInController ?? false,
    ...(reconcile ? {} : { reconcile: false }),
    ...settings,
    ...listen,
    sink: install.sink,
    signal: install.signal,
  };
}

/** Attaches the install's management cluster: the external one when it has one, else its local control plane (`localManagement`). */
export async function attachManagement(install: InstallManagement): Promise<AttachedControlPlane> {
  if (install.external) return attachExternalManagement(install.external, install.dir, install.infrastructure ?? []);
  return attachLocalControlPlane(localManagement(install));
}
