/**
 * `management install --kubeconfig K [--dir D] [--image-registry R] [--dry-run]`: the bundled providers into a
 * real cluster as Deployments, the way `clusterctl init` lays them out (management/manifests.ts),
 * offline: images built from the bundled binaries (management/images.ts) and, when K is the
 * cluster of a hosts install D, put on its nodes with `images load`'s path (no registry), or
 * pushed to the registry R the user names (imageregistry/) and named there, pinned by digest;
 * webhook certificates from our own PKI (management/certificates.ts), no cert-manager.
 *
 * Phases, each idempotent (server-side apply of the same objects changes nothing, certificates
 * still good are kept), so a second run changes nothing and a run killed anywhere finishes
 * when run again: refuse other versions → certificates → images → namespaces → CRDs
 * (Established) → RBAC, Secrets, Services, Deployments → Deployments Available → webhook
 * configurations → clusterctl inventory. With `--dir`, the platform's in-cluster artifacts
 * (`Platform.inClusterArtifacts`: what the cluster's machines download, served from inside it
 * for when it manages itself) go in with the Deployments, their images loaded with the providers'.
 */
import path from 'node:path';
import { readInstallConfig } from '../assets/index.js';
import type { InstallConfig } from '../config/index.js';
import { resolveCacheDir, ensureBinaries } from '../embedded/cache.js';
import { loadBinaryCatalog } from '../embedded/catalog.js';
import { applyAll, loadComponents, waitForEstablished } from '../controlplane/install.js';
import { ConfigError, EnvironmentError, ExternalError, InfrastructureError, UsageError, requestField } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { KubeApiError, KubeClient, describeRef, type KubeObject } from '../kube/client.js';
import { ensureWebhookCertificates } from './certificates.js';
import { ensureProviderImage, providerImageRef, type ProviderImage } from './images.js';
import {
  allObjects,
  conflictingProviders,
  managerRules,
  renderManagement,
  webhookCaSecretName,
  webhookSecretName,
  type InstalledProvider,
  type ManagedProvider,
} from './manifests.js';
import { agentController, coreControllers, type ControllerRequirement, type InClusterArtifacts } from '../platforms/platform.js';
import { platformFor } from '../platforms/index.js';
import type { CertificateAndKey } from '../pki/index.js';
import { until, polling, type Observation } from '../progress/until.js';
import { loadImagesLocked } from '../nodeartifacts/load.js';
import { prepareNodeArtifactsFor } from '../nodeartifacts/prepare.js';
import { acquireDirLock } from '../process/lock.js';
import { recordedExternalManagement } from '../installdir/management.js';
import { readRegistryAuth, type RegistryCredentials } from '../imageregistry/auth.js';
import { RegistryClient } from '../imageregistry/client.js';
import { pushArchiveImage } from '../imageregistry/push.js';
import { parseImageRegistry, targetImageRef, targetRepository, type RegistryTarget } from '../imageregistry/reference.js';
import { tagOf } from '../nodeartifacts/oci-image.js';

export interface ManagementInstallRequest {
  /** Kubeconfig of the cluster to install into. */
  kubeconfig: string;
  /** Install directory of a hosts cluster that K is: its platform's providers, and the images loaded onto its nodes. */
  dir?: string;
  dryRun?: boolean;
  sink: EventSink;
  signal: AbortSignal;
  /** Time without a Deployment making progress before the command fails. Default 5 min. */
  noProgressTimeoutMs?: number;
  /** The caller holds the directory lock of `dir` already (create cluster's self pivot). Default false. */
  lockHeld?: boolean;
  /** The install config of `dir` as the caller read it. Default: read here, once. */
  config?: InstallConfig;
  /** Registry (`host[:port][/path]`) to push the images to, instead of loading them onto the nodes. Default: none. */
  imageRegistry?: string;
  /** Docker config.json with an `auths` entry for the registry's host. Default: none (anonymous). */
  imageRegistryAuthFile?: string;
  /** PEM file of the CA of the registry's certificate, trusted besides the system's. Default: the system's CAs only. */
  imageRegistryCaFile?: string;
}

export interface InstalledDeployment {
  provider: string;
  namespace: string;
  name: string;
  version: string;
  image: string;
}

export interface ManagementImage {
  /** The archive's ref, e.g. `provisioner.local/capi-manager:v1.14.2`. */
  ref: string;
  /** The archive (empty in a dry run: nothing is built). */
  file: string;
  loaded: boolean;
  /** With a registry: the ref the Deployments name (pinned by digest once pushed). */
  pushedAs?: string;
  /** With a registry, after the push: blobs uploaded and blobs the registry had already. */
  blobsUploaded?: number;
  blobsExisting?: number;
}

export interface ManagementInstallResult {
  providers: InstalledDeployment[];
  /** Objects that did not exist before (dry-run: would be created). */
  created: string[];
  /** Objects the apply changed (their resourceVersion moved); empty on a run that changed nothing. */
  changed: string[];
  /** Objects already there and left as they were. */
  unchanged: string[];
  /** Certificates issued now (`CA`, namespaces). */
  certificatesIssued: string[];
  images: ManagementImage[];
  dryRun: boolean;
  timings: { imagesMs: number; availableMs: number; totalMs: number };
}

const defaultNoProgressTimeoutMs = 5 * 60_000;
const deploymentPollMs = 2_000;

export async function installManagement(request: ManagementInstallRequest): Promise<ManagementInstallResult> {
  const started = performance.now();
  const { sink, signal } = request;
  const dir = request.dir === undefined ? undefined : path.resolve(request.dir);
  const config = dir === undefined ? undefined : (request.config ?? (await readInstallConfig({ dir, sink })));
  const { controllers, inCluster } = wantedControllers(config);
  if (request.imageRegistry === undefined && (request.imageRegistryAuthFile !== undefined || request.imageRegistryCaFile !== undefined)) {
    throw new UsageError(`${requestField(request.imageRegistryAuthFile !== undefined ? 'imageRegistryAuthFile' : 'imageRegistryCaFile')} is for pushing to a registry, and no ${requestField('imageRegistry')} is given`, {
      hint: `Name the registry with ${requestField('imageRegistry')} host[:port][/path], or leave the file out.`,
    });
  }
  const registry = request.imageRegistry === undefined ? undefined : await registryAccess(request, sink);
  const catalog = await loadBinaryCatalog({});
  const binaries = await ensureBinaries([...new Set([...controllers.map((c) => c.binary), ...(inCluster?.binaries ?? [])])], { catalog, sink, signal });
  const providers: ManagedProvider[] = [];
  for (const controller of controllers) {
    const component = catalog.components.find((c) => c.provider === controller.provider);
    if (!component) throw new EnvironmentError(`The bundle has no components for provider ${controller.provider}`, { hint: 'Rebuild the bundle (`npm run bundle`).' });
    const components = await loadComponents(component.provider, component.namespace, catalog.componentsPath(component));
    const binary = catalog.binary(controller.binary);
    providers.push({
      provider: component.provider,
      namespace: component.namespace,
      version: component.version,
      components: components.objects,
      binary: controller.binary,
      image: registry ? targetImageRef(registry.target, controller.binary, binary.version) : providerImageRef(controller.binary, binary.version),
      featureGates: controller.featureGates,
    });
  }
  // The providers whose pods need no credentials or platform settings of their own: the bundle carries their managers' rules.
  const unsupported = providers.filter((p) => managerRules(p.components) === undefined);
  if (unsupported.length > 0) {
    throw new UsageError(`management install does not yet run the ${config ? platformFor(config).name : 'bundled'} platform's ${unsupported.map((p) => p.provider).join(', ')} as pods`, {
      hint: 'It installs the core, kubeadm and hosts providers; use a hosts install directory, or none.',
    });
  }

  let client: KubeClient;
  try {
    client = KubeClient.fromFile(request.kubeconfig);
  } catch (cause) {
    throw new ConfigError(`Cannot read the kubeconfig ${request.kubeconfig}`, [], { cause, hint: 'Name the kubeconfig of the cluster to install into, e.g. <dir>/auth/kubeconfig.' });
  }
  try {
    // Refuse a cluster that has other versions of these providers (clusterctl upgrade is the way there), before anything changes.
    const installed = await installedProviders(client);
    const conflicts = conflictingProviders(providers, installed);
    if (conflicts.length > 0) {
      throw new ExternalError(`The cluster already has other versions of these providers: ${conflicts.map((c) => `${c.namespace}/${c.name} ${c.type} ${c.version}`).join(', ')}`, {
        details: providers.map((p) => `bundled: ${p.namespace}/${p.provider} ${p.version}`),
        hint: 'Install into a cluster without them, or remove them first (clusterctl delete --all); provisioner installs only the versions it bundles.',
      });
    }

    const namespaces = providers.map((p) => p.namespace);
    const core = providers.find((p) => p.provider === 'cluster-api');
    const existingCa = core ? await readTlsSecret(client, core.namespace, webhookCaSecretName) : undefined;
    const existingServing = new Map<string, CertificateAndKey | undefined>();
    for (const ns of namespaces) existingServing.set(ns, await readTlsSecret(client, ns, webhookSecretName));
    const certs = await ensureWebhookCertificates({ ...(existingCa ? { ca: existingCa } : {}), serving: existingServing }, namespaces);

    const arch = ({ x64: 'amd64', arm64: 'arm64' } as const)[process.arch as 'x64' | 'arm64'];
    if (process.platform !== 'linux' || arch === undefined) {
      throw new EnvironmentError(`The providers' images need Linux binaries; this CLI runs on ${process.platform}/${process.arch} and bundles its own platform's`, { hint: 'Run management install on a Linux machine (amd64 or arm64).' });
    }
    const imageBinaries = [...new Set([...providers.map((p) => p.binary), ...(dir ? (inCluster?.binaries ?? []) : [])])];
    // Images: built from the bundled binaries; pushed to the registry now (before anything is applied), so the Deployments name them by digest.
    const imagesStarted = performance.now();
    const built: ProviderImage[] = [];
    const pushed = new Map<string, ManagementImage>();
    if (!request.dryRun) {
      for (const name of imageBinaries) {
        const bundled = catalog.binary(name);
        built.push(await ensureProviderImage({ name, path: binaries[name]!, version: bundled.version, ...('sha256' in bundled ? { sha256: bundled.sha256 } : {}) }, { cacheDir: resolveCacheDir({}), architecture: arch }));
      }
      if (registry) for (const image of await pushImages(registry, built, sink, signal)) pushed.set(image.ref, image);
      for (const p of providers) {
        const image = pushed.get(providerImageRef(p.binary, catalog.binary(p.binary).version));
        if (image?.pushedAs) p.image = image.pushedAs;
      }
    }
    const objects = renderManagement(providers, certs);

    const before = new Map<string, string | undefined>();
    for (const obj of allObjects(objects)) before.set(describeRef(obj), (await client.get(obj))?.metadata.resourceVersion);
    const created = [...before].filter(([, rv]) => rv === undefined).map(([ref]) => ref);

    const deployments: InstalledDeployment[] = providers.map((p) => ({ provider: p.provider, namespace: p.namespace, name: objects.deployments.find((d) => d.provider === p.provider)!.name, version: p.version, image: p.image }));

    if (request.dryRun) {
      // The in-cluster artifacts' objects by name: what they serve (the node files) is prepared only when installing.
      const imageRefOf = (b: string): string => (registry ? targetImageRef(registry.target, b, catalog.binary(b).version) : providerImageRef(b, catalog.binary(b).version));
      const servedImages = dir && inCluster ? Object.fromEntries(inCluster.binaries.map((b) => [b, imageRefOf(b)])) : {};
      for (const { ref, resourceVersion } of dir && inCluster ? await inClusterObjectsByName(client, inCluster, servedImages) : []) {
        before.set(ref, resourceVersion);
        if (resourceVersion === undefined) created.push(ref);
      }
      const images = imageBinaries.map((b): ManagementImage => ({ ref: providerImageRef(b, catalog.binary(b).version), file: '', loaded: false, ...(registry ? { pushedAs: imageRefOf(b) } : {}) }));
      return {
        providers: deployments, created, changed: [], unchanged: [...before].filter(([, rv]) => rv !== undefined).map(([ref]) => ref),
        certificatesIssued: certs.issued, images, dryRun: true, timings: { imagesMs: 0, availableMs: 0, totalMs: performance.now() - started },
      };
    }

    // A cluster managed from elsewhere (itself, after a self pivot, or another cluster) has no local control plane
    // any more: nothing to serve archives to its nodes from, and no local list of the files its nodes hold.
    const managedElsewhere = dir !== undefined && (await recordedExternalManagement(dir)) !== undefined;
    const unchanged: string[] = [];
    // Without a registry: loaded onto the nodes of a hosts install's cluster.
    if (!registry && managedElsewhere && (await nodesLackingImages(client, built.map((b) => b.ref))).length === 0) {
      // A run again at the versions it has (a renewal; any other version is refused above): nothing to load.
      log(sink, 'info', `Every node already has the images (${built.map((b) => b.ref).join(', ')}): nothing to load`);
    } else if (!registry && dir) {
      // As `images load` does it, under the install directory's lock for the load only.
      const lock = request.lockHeld ? undefined : await acquireDirLock(path.resolve(dir), { command: 'images load', events: sink });
      try {
        await loadImagesLocked({ dir: path.resolve(dir), ...(config ? { config } : {}), archives: built.map((b) => b.file), sink, signal, ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}) });
      } finally {
        await lock?.release();
      }
    } else if (!registry) {
      log(sink, 'warn', `No --dir: the images are not loaded onto the cluster's nodes; import them there yourself (ctr -n k8s.io images import): ${built.map((b) => `${b.ref} from ${b.file}`).join(', ')}`);
    }
    const imagesMs = performance.now() - imagesStarted;

    await applyAll(client, objects.namespaces, signal);
    await applyAll(client, objects.crds, signal);
    await waitForEstablished(client, objects.crds.map((o) => o.metadata.name), request.noProgressTimeoutMs ?? defaultNoProgressTimeoutMs, signal);
    client.resetDiscovery();
    await applyAll(client, objects.workloads, signal);
    // What the cluster's machines download, served from inside it (after the load above, so the images just loaded are among it).
    // Once managed from elsewhere, the objects the first install made list the files the nodes hold; the local artifacts
    // they came from are gone with the local control plane, so a run again (a renewal) leaves them as they are.
    const served = dir && inCluster && !managedElsewhere ? inCluster.render({ images: Object.fromEntries(built.map((b) => [b.binary, pushed.get(b.ref)?.pushedAs ?? b.ref])), served: await prepareNodeArtifactsFor({ dir, sink, signal }), server: client.server }) : undefined;
    if (dir && inCluster && managedElsewhere) {
      for (const { ref, resourceVersion } of await inClusterObjectsByName(client, inCluster, Object.fromEntries(built.map((b) => [b.binary, b.ref])))) {
        if (resourceVersion !== undefined) unchanged.push(ref);
        else log(sink, 'warn', `${ref} is not in the cluster, and the files it would list are not on this machine: hosts that join will not find their node files inside the cluster`);
      }
    }
    const servedBefore = new Map<string, string | undefined>();
    for (const obj of served?.objects ?? []) servedBefore.set(describeRef(obj), (await client.get(obj as KubeObject))?.metadata.resourceVersion);
    await applyAll(client, (served?.objects ?? []) as KubeObject[], signal);
    const availableStarted = performance.now();
    await waitForDeployments(client, [...objects.deployments, ...(served?.deployments ?? [])], sink, request.noProgressTimeoutMs ?? defaultNoProgressTimeoutMs, signal);
    const availableMs = performance.now() - availableStarted;
    await applyAll(client, [...objects.webhooks, ...objects.inventory], signal);

    const changed: string[] = [];
    for (const obj of allObjects(objects)) {
      const ref = describeRef(obj);
      const rv = (await client.get(obj))?.metadata.resourceVersion;
      if (before.get(ref) === undefined) continue;
      (rv === before.get(ref) ? unchanged : changed).push(ref);
    }
    for (const obj of served?.objects ?? []) {
      const ref = describeRef(obj);
      const rv = (await client.get(obj as KubeObject))?.metadata.resourceVersion;
      if (servedBefore.get(ref) === undefined) created.push(ref);
      else (rv === servedBefore.get(ref) ? unchanged : changed).push(ref);
    }
    return {
      providers: deployments, created, changed, unchanged, certificatesIssued: certs.issued,
      images: built.map((b) => pushed.get(b.ref) ?? { ref: b.ref, file: b.file, loaded: dir !== undefined }), dryRun: false,
      timings: { imagesMs, availableMs, totalMs: performance.now() - started },
    };
  } finally {
    client.close();
  }
}

/**
 * The in-cluster artifacts' objects by name, rendered with no node files (the dry run and a run on a cluster managed
 * from elsewhere prepare none), each with its resourceVersion in the cluster: undefined where it is not there.
 */
async function inClusterObjectsByName(client: KubeClient, inCluster: InClusterArtifacts, images: Record<string, string>): Promise<Array<{ ref: string; resourceVersion: string | undefined }>> {
  const found: Array<{ ref: string; resourceVersion: string | undefined }> = [];
  for (const obj of inCluster.render({ images, served: [], server: client.server }).objects) {
    found.push({ ref: describeRef(obj), resourceVersion: (await client.get(obj as KubeObject))?.metadata.resourceVersion });
  }
  return found;
}

/**
 * The nodes whose kubelet does not report every one of `refs` among its images (`status.images`, which lists at most
 * the kubelet's `--node-status-max-images`, 50 by default, largest first: a node past that may be named though it has them).
 */
export async function nodesLackingImages(client: Pick<KubeClient, 'list'>, refs: readonly string[]): Promise<string[]> {
  interface NodeImages extends KubeObject { status?: { images?: { names?: string[] }[] } }
  const nodes = await client.list<NodeImages>('v1', 'Node');
  return nodes
    .filter((node) => {
      const names = new Set((node.status?.images ?? []).flatMap((image) => image.names ?? []));
      return refs.some((ref) => !names.has(ref));
    })
    .map((node) => node.metadata.name);
}

interface RegistryAccess {
  target: RegistryTarget;
  credentials?: RegistryCredentials;
  caFile?: string;
}

/** The registry the request names, its credentials (from the auth file; warnings as events) and CA file, checked before anything is read from the cluster. */
async function registryAccess(request: ManagementInstallRequest, sink: EventSink): Promise<RegistryAccess> {
  const target = parseImageRegistry(request.imageRegistry!);
  if (request.imageRegistryCaFile !== undefined && target.scheme === 'http') {
    throw new UsageError(`${requestField('imageRegistryCaFile')} is for a registry reached over HTTPS; ${target.text} is a loopback registry reached over plain HTTP`, {
      hint: `Write ${requestField('imageRegistry')} as https://${target.text} if it serves HTTPS, or leave the CA file out.`,
    });
  }
  let credentials: RegistryCredentials | undefined;
  if (request.imageRegistryAuthFile !== undefined) {
    const auth = await readRegistryAuth(path.resolve(request.imageRegistryAuthFile), target.host);
    for (const warning of auth.warnings) log(sink, 'warn', warning);
    credentials = auth.credentials;
  }
  return { target, ...(credentials ? { credentials } : {}), ...(request.imageRegistryCaFile !== undefined ? { caFile: path.resolve(request.imageRegistryCaFile) } : {}) };
}

/** Pushes each archive's image to the registry as `<registry>/<binary>:<tag>`; returns each with the digest-pinned ref the Deployments name. */
async function pushImages(registry: RegistryAccess, images: readonly ProviderImage[], sink: EventSink, signal: AbortSignal): Promise<ManagementImage[]> {
  const client = await RegistryClient.open({ target: registry.target, ...(registry.credentials ? { credentials: registry.credentials } : {}), ...(registry.caFile ? { caFile: registry.caFile } : {}), signal });
  try {
    await client.check();
    const result: ManagementImage[] = [];
    for (const [i, image] of images.entries()) {
      const repository = targetRepository(registry.target, image.binary);
      const tag = tagOf(image.ref);
      sink.emit({ type: 'progress', task: 'management-install:push', label: `Pushing images to ${registry.target.text}`, current: i, total: images.length, unit: 'items' });
      const pushedImage = await pushArchiveImage(client, image.file, { sourceRef: image.ref, repository, tag });
      const uploaded = pushedImage.blobs.filter((b) => b.uploaded);
      const pushedAs = targetImageRef(registry.target, image.binary, tag, pushedImage.digest);
      log(sink, 'info', `Pushed ${pushedAs}: ${uploaded.length} blob(s) uploaded (${uploaded.reduce((n, b) => n + b.size, 0)} bytes), ${pushedImage.blobs.length - uploaded.length} already there`);
      result.push({ ref: image.ref, file: image.file, loaded: false, pushedAs, blobsUploaded: uploaded.length, blobsExisting: pushedImage.blobs.length - uploaded.length });
    }
    sink.emit({ type: 'progress', task: 'management-install:push', label: `Pushing images to ${registry.target.text}`, current: images.length, total: images.length, unit: 'items', done: true });
    return result;
  } finally {
    client.close();
  }
}

/**
 * The providers to install: a hosts install's platform's, else the core three and the agent provider (the hosts platform's);
 * with an install directory, also how its platform serves its machines' downloads from inside the cluster.
 */
function wantedControllers(config: InstallConfig | undefined): { controllers: ControllerRequirement[]; inCluster?: InClusterArtifacts } {
  if (config === undefined) return { controllers: [...coreControllers(), agentController()] };
  const platform = platformFor(config);
  const controllers = platform.controllers.filter((c) => c.bundled);
  return { controllers, ...(platform.inClusterArtifacts ? { inCluster: platform.inClusterArtifacts } : {}) };
}

async function installedProviders(client: KubeClient): Promise<InstalledProvider[]> {
  try {
    const items = await client.list<KubeObject & { providerName?: string; type?: string; version?: string }>('clusterctl.cluster.x-k8s.io/v1alpha3', 'Provider');
    return items.map((p) => ({ namespace: p.metadata.namespace ?? '', name: p.metadata.name, providerName: p.providerName ?? '', type: p.type ?? '', version: p.version ?? '' }));
  } catch (error) {
    if (error instanceof KubeApiError && error.isNotFound) return []; // no inventory CRD: nothing installed by clusterctl
    throw error;
  }
}

async function readTlsSecret(client: KubeClient, namespace: string, name: string): Promise<CertificateAndKey | undefined> {
  const secret = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace } });
  const cert = secret?.data?.['tls.crt'];
  const key = secret?.data?.['tls.key'];
  if (!cert || !key) return undefined;
  return { certPem: Buffer.from(cert, 'base64').toString(), keyPem: Buffer.from(key, 'base64').toString() };
}

interface DeploymentView extends KubeObject {
  status?: { availableReplicas?: number; updatedReplicas?: number; observedGeneration?: number; conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}
interface PodView extends KubeObject {
  status?: {
    phase?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    containerStatuses?: { name: string; restartCount?: number; state?: { waiting?: { reason?: string; message?: string } }; lastState?: { terminated?: { reason?: string; exitCode?: number; message?: string } } }[];
  };
}

function isAvailable(d: DeploymentView | undefined): boolean {
  if (!d) return false;
  const generation = d.metadata.generation;
  const observed = d.status?.observedGeneration;
  return (generation === undefined || observed === undefined || observed >= generation) && d.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') === true && (d.status.updatedReplicas ?? 0) >= 1;
}

/** Until every Deployment is Available; progress events per Deployment; a stall names each one not Available with its pods' reasons. */
export async function waitForDeployments(client: KubeClient, deployments: readonly { namespace: string; name: string }[], sink: EventSink, noProgressTimeoutMs: number, signal?: AbortSignal): Promise<void> {
  const look = async (): Promise<Observation<string[]>> => {
    const pending: string[] = [];
    for (const d of deployments) {
      const found = await client.get<DeploymentView>({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: d });
      if (!isAvailable(found)) pending.push(`${d.namespace}/${d.name}`);
    }
    const ready = deployments.length - pending.length;
    sink.emit({ type: 'progress', task: 'management-install:available', label: 'Provider Deployments Available', current: ready, total: deployments.length, unit: 'items', ...(pending.length === 0 ? { done: true } : {}) });
    return { state: pending.length === 0 ? 'done' : 'waiting', value: pending, progress: pending.join(',') };
  };
  let last: string[] = deployments.map((d) => `${d.namespace}/${d.name}`);
  await until(polling(async () => {
    const observation = await look();
    last = observation.value;
    return observation;
  }, deploymentPollMs), {
    what: 'the provider Deployments to be Available',
    noProgressTimeoutMs,
    ...(signal ? { signal } : {}),
    onStall: (_observation, stalledMs) => new InfrastructureError(`Provider Deployment(s) not Available after ${Math.round(stalledMs / 1000)} s without progress: ${last.join(', ')}`, { details: ['(reasons are being read)'] }),
  }).catch(async (error: unknown) => {
    if (!(error instanceof InfrastructureError)) throw error;
    const details: string[] = [];
    for (const ref of last) details.push(...(await podReasons(client, ref)));
    throw new InfrastructureError(error.message, {
      details,
      hint: 'kubectl -n <namespace> describe pods, and kubectl -n <namespace> logs deploy/<name>, say more; run management install again once fixed.',
    });
  });
}

/** Why a Deployment's pods are not Ready: waiting and last-terminated reasons, unscheduled pods. */
export async function podReasons(client: KubeClient, ref: string): Promise<string[]> {
  const [namespace, name] = ref.split('/') as [string, string];
  const deployment = await client.get<DeploymentView & { spec?: { selector?: { matchLabels?: Record<string, string> } } }>({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { namespace, name } });
  const selector = Object.entries(deployment?.spec?.selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
  const pods = selector ? await client.list<PodView>('v1', 'Pod', { namespace, labelSelector: selector }) : [];
  if (pods.length === 0) {
    const condition = deployment?.status?.conditions?.find((c) => c.status !== 'True');
    return [`Deployment ${ref}: no pods${condition ? ` (${condition.type}: ${condition.reason ?? ''} ${condition.message ?? ''})` : ''}`];
  }
  return pods.map((pod) => {
    const reasons: string[] = [];
    const unscheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
    if (unscheduled) reasons.push(`unschedulable: ${unscheduled.message ?? unscheduled.reason ?? ''}`);
    for (const c of pod.status?.containerStatuses ?? []) {
      const waiting = c.state?.waiting;
      if (waiting) reasons.push(`${c.name} ${waiting.reason ?? 'waiting'}${waiting.message ? `: ${waiting.message}` : ''}`);
      const terminated = c.lastState?.terminated;
      if (terminated) reasons.push(`${c.name} last exited ${terminated.exitCode ?? '?'} (${terminated.reason ?? ''}), ${c.restartCount ?? 0} restart(s)`);
    }
    if (reasons.length === 0) reasons.push(`phase ${pod.status?.phase ?? 'unknown'}, not Ready`);
    return `Deployment ${ref} pod ${pod.metadata.name}: ${reasons.join('; ')}`;
  });
}

/** The lines `--dry-run` prints. */
export function describePlan(result: ManagementInstallResult): string {
  const lines = [
    ...result.providers.map((p) => `provider ${p.provider} ${p.version}: Deployment ${p.namespace}/${p.name} running ${p.image}`),
    ...result.images.map((i) => (i.pushedAs ? `push ${i.ref} to ${i.pushedAs}` : `image ${i.ref}${i.file ? ` (${i.file})` : ''}`)),
    ...(result.certificatesIssued.length ? [`certificates to issue: ${result.certificatesIssued.join(', ')}`] : []),
    ...result.created.map((ref) => `create ${ref}`),
    ...result.unchanged.map((ref) => `apply (exists) ${ref}`),
  ];
  return lines.join('\n');
}
