/**
 * The Rancher hand-off: register rancher's core under the caller's directory lock
 * (`registerRancherLocked`; services/rancher.ts and create cluster's register-rancher stage),
 * `import --to rancher`, and the Rancher part of `destroy cluster`.
 *
 * register rancher hands the install's cluster to Rancher the way Rancher Turtles would
 * (handoff/rancher): when Rancher's cluster runs Turtles and holds the install's CAPI Cluster
 * (the install was pivoted there, or created against it), the Cluster is labelled for
 * Turtles' auto-import and we wait for Rancher's Ready; otherwise we import it ourselves —
 * Rancher's cluster (labelled with the CAPI cluster's name and namespace), its registration
 * token, the manifest (fetched verifying Rancher's CA) created in the workload cluster, then
 * Rancher's Ready. `.provisioner/rancher.json` records where it went, so `destroy cluster`
 * removes Rancher's cluster (by the same labels) before the CAPI objects, and a run after an
 * interrupt resumes: every object is found again by its labels, AlreadyExists is fine.
 *
 * import --to rancher does the same for a cluster provisioner did not create (Rancher's
 * "imported cluster": no CAPI objects), identified by its kube-system namespace's UID.
 */
import path from 'node:path';
import { capiCoreApiVersion } from '../../capi.js';
import { EnvironmentError, ExternalError, ProvisionerError, UsageError, messageOf } from '../../errors.js';
import { log, type EventSink } from '../../events.js';
import { readInputText, parseYamlStream, type FileKind } from '../../input-files.js';
import { KubeApiError, KubeClient, type KubeObject } from '../../kube/client.js';
import { checkKubeconfigFile } from '../../kube/kubeconfig-file.js';
import {
  autoImportLabel,
  capiOwnerLabel,
  capiOwnerNamespaceLabel,
  defaultV1Namespace,
  describeRancherCluster,
  importedClusterLabel,
  isRancherClusterReady,
  type RancherStrategy,
} from './api.js';
import {
  checkRancherApi,
  deleteRancherClusters,
  ensureRancherCluster,
  rancherCaPem,
  registrationManifestUrl,
  runsTurtles,
  waitForManagementName,
  waitForRancherReady,
  type RancherClusterSpec,
  type RancherWait,
} from './cluster.js';
import { rancherRecordPath, readRancherRecord, removeRancherRecord, writeRancherRecord, type RancherClusterQuery, type RancherRegistrationRecord, type RancherStep } from './journal.js';
import { recordPath, recordRelativePath } from '../../installdir/paths.js';
import { createManifestObjects, fetchManifest, parseManifest, redactUrl } from './manifest.js';
import { recordedExternalManagement } from '../../installdir/management.js';
import { StageRunner, stageSteps, type Stage } from '../../lifecycle/stages.js';

export type { RancherStrategy } from './api.js';

/** Default strategy: v3, ADR 0008's management.cattle.io/v3 Cluster (found only by labels). */
const defaultRancherStrategy: RancherStrategy = 'v3';

interface RancherRequestBase {
  /** Kubeconfig of Rancher's local cluster. */
  rancherKubeconfig: string;
  /** Which Rancher object represents the cluster. Default `defaultRancherStrategy` (v3). */
  strategy?: RancherStrategy;
  sink: EventSink;
  signal: AbortSignal;
  /** Time without progress before a wait fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
  /** How often the waits look at Rancher, in ms. Default 1 s. */
  pollIntervalMs?: number;
}

export interface RegisterRancherRequest extends RancherRequestBase {
  dir: string;
}

export interface RancherRegistrationResult {
  /** One line for the user. */
  summary: string;
  mode: 'import' | 'turtles';
  strategy: RancherStrategy;
  /** Rancher's cluster as it is now (name and apiVersion; its display name may have changed since). */
  rancherCluster: { apiVersion: string; name: string; namespace?: string; displayName?: string };
  /** Objects of the registration manifest this run created, and those that were there already (import mode). */
  manifest?: { created: number; existing: number };
  /** True when Rancher's cluster existed before this run (a resume, or a second run). */
  resumed: boolean;
}

/** The cluster-state record of hand-off: provisioner's own file, at most the journal's 4 MiB. */
const clusterStateFile: FileKind = {
  name: 'cluster state',
  maxBytes: 4 * 1024 * 1024,
  writer: 'provisioner',
  hint: () => 'it is written by the hand-off stage: run `provisioner create cluster` again to rewrite it',
};

/**
 * The install's CAPI Cluster: live from its management cluster when that is an existing one
 * (recorded by --management-kubeconfig or a pivot; its labels may have changed), else as the
 * hand-off recorded it in `.provisioner/cluster-state.yaml`.
 */
async function installCapiCluster(dir: string): Promise<{ cluster: KubeObject; management?: string }> {
  const management = await recordedExternalManagement(dir);
  const file = recordPath(dir, 'clusterState');
  const text = await readInputText(file, clusterStateFile);
  if (text === undefined) {
    throw new UsageError(`${dir} holds no finished cluster (no ${recordRelativePath('clusterState')})`, { hint: 'Run `provisioner create cluster --dir` first; register runs once the cluster is handed off.' });
  }
  const recorded = parseYamlStream(text, file, clusterStateFile).find((o): o is KubeObject => isCapiCluster(o));
  if (!recorded) throw new EnvironmentError(`${file} records no Cluster API Cluster`, { hint: clusterStateFile.hint(file) });
  if (!management) return { cluster: recorded };
  const client = KubeClient.fromFile(management);
  try {
    const live = await client.get<KubeObject>({ apiVersion: capiCoreApiVersion, kind: 'Cluster', metadata: { name: recorded.metadata.name, namespace: recorded.metadata.namespace! } });
    if (!live) throw new ExternalError(`Cluster ${recorded.metadata.namespace}/${recorded.metadata.name} is not in the management cluster of ${management}`, { hint: 'Was it deleted or moved? `provisioner wait-for install-complete --dir` checks the install.' });
    return { cluster: { ...live, apiVersion: capiCoreApiVersion, kind: 'Cluster' }, management };
  } finally {
    client.close();
  }
}

function isCapiCluster(value: unknown): boolean {
  const o = value as Partial<KubeObject> | null;
  return o !== null && typeof o === 'object' && o.kind === 'Cluster' && typeof o.apiVersion === 'string' && o.apiVersion.startsWith('cluster.x-k8s.io/') && typeof o.metadata?.name === 'string';
}

/** Opens Rancher's cluster and checks it answers and serves the kinds `strategy` needs. */
async function openRancher(kubeconfig: string, strategy: RancherStrategy): Promise<KubeClient> {
  const rancher = KubeClient.fromFile(kubeconfig);
  try {
    await rancher.raw('/readyz');
    await checkRancherApi(rancher, strategy, kubeconfig);
    return rancher;
  } catch (error) {
    rancher.close();
    if (error instanceof ProvisionerError && !(error instanceof KubeApiError)) throw error;
    throw new ExternalError(`Rancher's cluster in ${kubeconfig} cannot be reached: ${messageOf(error)}`, { cause: error, hint: 'Check the kubeconfig and that the cluster is up, then run the command again.' });
  }
}

/** What a registration's stages find as they run; the later stages' `skip` is decided from it. */
export interface RancherFindings {
  /** Found by `preflight`: Turtles imports the cluster (our part is its label), or we import it ourselves. */
  mode?: RancherRegistrationResult['mode'];
  /** Found by `cluster`: Rancher reports its cluster Ready already (its agent checked in, like Turtles' AgentDeployed). */
  clusterReady?: boolean;
}

export type RancherStageName = 'preflight' | 'label' | 'cluster' | 'token' | 'manifest' | 'ready';

/**
 * A registration's declared stages, `rancher/<name>`, unjournaled (rancher.json and the labels
 * are its resume). `register rancher` and `import --to rancher` run this one list.
 */
export function rancherStages(found: RancherFindings, body: Record<RancherStageName, () => Promise<unknown>>): Stage[] {
  const byTurtles = () => (found.mode === 'turtles' ? 'Rancher Turtles imports this cluster' : undefined);
  const checkedIn = () => byTurtles() ?? (found.clusterReady ? "Rancher reports its cluster Ready: the agent checked in already" : undefined);
  return [
    { name: 'rancher/preflight', run: body.preflight },
    { name: 'rancher/label', skip: () => (found.mode === 'turtles' ? undefined : 'no Rancher Turtles manages this Cluster: imported directly'), run: body.label },
    { name: 'rancher/cluster', skip: byTurtles, run: body.cluster },
    { name: 'rancher/token', skip: checkedIn, run: body.token },
    { name: 'rancher/manifest', skip: checkedIn, run: body.manifest },
    { name: 'rancher/ready', run: body.ready },
  ];
}

/** What a registration's preflight established, for the stages after it. */
interface RancherTarget {
  rancher: KubeClient;
  query: RancherClusterQuery;
  /** Turtles: the install's CAPI Cluster in Rancher's cluster, which we label. */
  turtlesCapi?: KubeObject;
  /** Import: Rancher's cluster to ensure, and the workload cluster that gets the registration manifest. */
  spec?: RancherClusterSpec;
  workload?: KubeClient;
  /** A registration record existed before this run. */
  resumedRecord: boolean;
  /** Called after each step completes (rancher.json). Default: nothing. */
  onStep?: (step: RancherStep, rancherCluster: string) => Promise<void>;
}

/** Runs the declared Rancher stages after `preflight` (which opens the clients it returns; they are closed here). */
async function runRancherStages(preflight: () => Promise<RancherTarget>, strategy: RancherStrategy, wait: RancherWait): Promise<RancherRegistrationResult> {
  const { sink, signal } = wait;
  const found: RancherFindings = {};
  let target: RancherTarget | undefined;
  let ensured: { cluster: KubeObject; created: boolean } | undefined;
  let url = '';
  let manifest: RancherRegistrationResult['manifest'];
  let ready: KubeObject | undefined;
  const the = () => target!;
  try {
    await new StageRunner({ sink, signal }).runAll(
      rancherStages(found, {
        preflight: async () => {
          target = await preflight();
          found.mode = target.turtlesCapi ? 'turtles' : 'import';
        },
        label: async () => {
          const capi = the().turtlesCapi!;
          await the().rancher.mergePatch(capi, { metadata: { labels: { [autoImportLabel]: 'true' } } });
          log(sink, 'info', `Rancher Turtles runs in Rancher's cluster and manages Cluster ${capi.metadata.namespace}/${capi.metadata.name}: labelled it ${autoImportLabel}=true for Turtles to import`);
        },
        cluster: async () => {
          ensured = await ensureRancherCluster(the().rancher, the().spec!);
          log(sink, 'info', ensured.created ? `Created ${describeRancherCluster(ensured.cluster)}` : `Found ${describeRancherCluster(ensured.cluster)} by its labels`);
          found.clusterReady = isRancherClusterReady(ensured.cluster);
          await the().onStep?.('cluster', ensured.cluster.metadata.name);
        },
        token: async () => {
          const managementName = await waitForManagementName(the().rancher, the().query, wait);
          url = await registrationManifestUrl(the().rancher, managementName, wait);
          await the().onStep?.('token', ensured!.cluster.metadata.name);
        },
        manifest: async () => {
          manifest = await applyRegistrationManifest(the().rancher, the().workload!, url, describeRancherCluster(ensured!.cluster), wait);
          await the().onStep?.('manifest', ensured!.cluster.metadata.name);
        },
        ready: async () => {
          ready = await waitForRancherReady(the().rancher, the().query, wait);
          await the().onStep?.('ready', ready.metadata.name);
        },
      }),
    );
    const resumed = found.mode === 'turtles' ? the().resumedRecord : !ensured!.created || the().resumedRecord;
    return result(ready!, found.mode!, strategy, manifest, resumed);
  } finally {
    target?.workload?.close();
    target?.rancher.close();
  }
}

/** The registration manifest at `url`, fetched verifying Rancher's CA, its objects created in the workload cluster. */
async function applyRegistrationManifest(rancher: KubeClient, workload: KubeClient, url: string, what: string, wait: RancherWait): Promise<{ created: number; existing: number }> {
  const { sink, signal } = wait;
  const caPem = await rancherCaPem(rancher);
  const shown = redactUrl(url);
  log(sink, 'info', `Fetching the registration manifest from ${shown}, verifying ${caPem ? "Rancher's CA (its cacerts setting)" : "with the system's CAs (Rancher's cacerts setting is empty)"}`);
  const text = await fetchManifest(url, { what, ...(caPem ? { caPem } : {}), signal });
  const objects = parseManifest(text, shown, what);
  const done = await createManifestObjects(workload, objects, { sink, signal, what });
  log(sink, 'info', `Registration manifest: ${done.created.length} object(s) created in the workload cluster, ${done.existing.length} already there`);
  return { created: done.created.length, existing: done.existing.length };
}

/** The waits' options from a request: its sink and signal, and its timeouts when it names them. */
function waitOf(request: RancherRequestBase): RancherWait {
  return { sink: request.sink, signal: request.signal, ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}), ...(request.pollIntervalMs ? { pollIntervalMs: request.pollIntervalMs } : {}) };
}

/**
 * `register rancher` under a directory lock the caller holds (`create cluster` runs it as its
 * `register-rancher` stage this way).
 */
export async function registerRancherLocked(request: RegisterRancherRequest): Promise<RancherRegistrationResult> {
  const dir = path.resolve(request.dir);
  const { sink } = request;
  const rancherKubeconfig = path.resolve(request.rancherKubeconfig);
  const strategy = request.strategy ?? defaultRancherStrategy;
  return runRancherStages(
    async () => {
      const record = await readRancherRecord(dir);
      const { cluster: capi } = await installCapiCluster(dir);
      const rancher = await openRancher(rancherKubeconfig, strategy);
      try {
        if (record && record.server !== rancher.server) {
          throw new UsageError(`This install was registered with the Rancher at ${record.server}, not ${rancher.server}`, {
            hint: `Run again with --kubeconfig ${record.rancherKubeconfig}; to move it to another Rancher, run destroy on that registration first (or remove ${recordRelativePath('rancher')} after deleting Rancher's cluster there).`,
          });
        }
        if (record && record.query.strategy !== strategy) {
          throw new UsageError(`This install was registered with strategy ${record.query.strategy}, not ${strategy}`, { hint: `Run again with --strategy ${record.query.strategy}.` });
        }
        const name = capi.metadata.name;
        const namespace = capi.metadata.namespace!;
        const ownerLabels = { [capiOwnerLabel]: name, [capiOwnerNamespaceLabel]: namespace };
        const save = (query: RancherClusterQuery, mode: RancherRegistrationRecord['mode'], stepDone: RancherStep, rancherCluster?: string) =>
          writeRancherRecord(dir, { rancherKubeconfig, server: rancher.server, mode, query, step: stepDone, ...(rancherCluster ? { rancherCluster } : {}) });
        const turtlesCapi = record ? (record.mode === 'turtles' ? await capiClusterIn(rancher, name, namespace) : undefined) : await turtlesManaged(rancher, name, namespace, sink);
        if (turtlesCapi) {
          const query: RancherClusterQuery = strategy === 'v3' ? { strategy, selector: ownerLabels } : { strategy, selector: {}, namespace, ownerUid: turtlesCapi.metadata.uid! };
          await save(query, 'turtles', record?.step ?? 'started');
          return { rancher, query, turtlesCapi, resumedRecord: Boolean(record), onStep: (s, cluster) => save(query, 'turtles', s, cluster) };
        }
        const query: RancherClusterQuery = strategy === 'v3' ? { strategy, selector: ownerLabels } : { strategy, selector: ownerLabels, namespace: defaultV1Namespace };
        if (!record) await save(query, 'import', 'started');
        const spec: RancherClusterSpec = {
          query,
          // The CAPI cluster's own labels go along (Turtles' PropagateLabels); the owner labels win over any of the same key.
          labels: { ...capi.metadata.labels, ...ownerLabels },
          displayName: name,
          description: `CAPI cluster ${namespace}/${name} imported to Rancher by provisioner`,
          v1Name: `${name}-capi`,
        };
        const workload = await openWorkload(path.join(dir, 'auth', 'kubeconfig'));
        return { rancher, query, spec, workload, resumedRecord: Boolean(record), onStep: (s, cluster) => save(query, 'import', s, cluster) };
      } catch (error) {
        rancher.close();
        throw error;
      }
    },
    strategy,
    waitOf(request),
  );
}

async function openWorkload(kubeconfig: string): Promise<KubeClient> {
  await checkKubeconfigFile(kubeconfig, 'the install directory (auth/kubeconfig)').catch((error: unknown) => {
    throw error instanceof UsageError ? new UsageError(`The workload cluster's kubeconfig ${kubeconfig} does not exist`, { hint: 'Run `provisioner create cluster --dir` first: its hand-off writes it.' }) : error;
  });
  return KubeClient.fromFile(kubeconfig);
}

/** The install's CAPI Cluster in Rancher's cluster, when that cluster serves CAPI and holds it. */
async function capiClusterIn(rancher: KubeClient, name: string, namespace: string): Promise<KubeObject | undefined> {
  try {
    const found = await rancher.get<KubeObject>({ apiVersion: capiCoreApiVersion, kind: 'Cluster', metadata: { name, namespace } });
    return found ? { ...found, apiVersion: capiCoreApiVersion, kind: 'Cluster' } : undefined;
  } catch (error) {
    if (error instanceof KubeApiError && error.isNotFound) return undefined;
    throw error;
  }
}

/** The CAPI Cluster for Turtles to import: when Turtles runs in Rancher's cluster and that cluster holds the install's Cluster. */
async function turtlesManaged(rancher: KubeClient, name: string, namespace: string, sink: EventSink): Promise<KubeObject | undefined> {
  let turtles: boolean;
  try {
    turtles = await runsTurtles(rancher);
  } catch (error) {
    log(sink, 'warn', `Could not list the CRDs of Rancher's cluster to look for Rancher Turtles (${messageOf(error)}); importing the cluster directly`);
    return undefined;
  }
  if (!turtles) return undefined;
  const capi = await capiClusterIn(rancher, name, namespace);
  if (!capi) log(sink, 'info', `Rancher Turtles runs in Rancher's cluster, but Cluster ${namespace}/${name} is managed elsewhere, so Turtles cannot import it; importing it directly`);
  return capi;
}

function result(cluster: KubeObject, mode: RancherRegistrationResult['mode'], strategy: RancherStrategy, manifest: RancherRegistrationResult['manifest'], resumed: boolean): RancherRegistrationResult {
  const displayName = (cluster['spec'] as { displayName?: string } | undefined)?.displayName;
  return {
    summary: `${describeRancherCluster(cluster)} is Ready in Rancher`,
    mode,
    strategy,
    rancherCluster: { apiVersion: cluster.apiVersion, name: cluster.metadata.name, ...(cluster.metadata.namespace ? { namespace: cluster.metadata.namespace } : {}), ...(displayName ? { displayName } : {}) },
    ...(manifest ? { manifest } : {}),
    resumed,
  };
}

export interface ImportToRancherRequest extends RancherRequestBase {
  /** Kubeconfig of the cluster to import (provisioner did not create it). */
  kubeconfig: string;
  /** Name Rancher shows (v3 display name; v1 provisioning cluster name). Default: the kubeconfig's current cluster name, as a DNS label. */
  name?: string;
}

/** A DNS label from `text` (lowercase letters, digits and dashes, at most 63), for a Rancher cluster name. */
function dnsLabel(text: string): string {
  const label = text.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63).replace(/-+$/, '');
  return label || 'imported';
}

/**
 * `provisioner import --to rancher`: Rancher's imported cluster (no CAPI objects) for the
 * cluster of `kubeconfig`, found again by the UID of its kube-system namespace, so a second
 * run (or one after an interrupt) resumes instead of importing it twice.
 */
export async function importToRancher(request: ImportToRancherRequest): Promise<RancherRegistrationResult> {
  const kubeconfig = path.resolve(request.kubeconfig);
  const rancherKubeconfig = path.resolve(request.rancherKubeconfig);
  await checkKubeconfigFile(kubeconfig, '--kubeconfig');
  await checkKubeconfigFile(rancherKubeconfig, '--to rancher');
  const strategy = request.strategy ?? defaultRancherStrategy;
  return runRancherStages(
    async () => {
      const workload = KubeClient.fromFile(kubeconfig);
      try {
        let kubeSystem: KubeObject | undefined;
        try {
          kubeSystem = await workload.get<KubeObject>({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } });
        } catch (error) {
          throw new ExternalError(`The cluster of ${kubeconfig} cannot be reached: ${messageOf(error)}`, { cause: error, hint: 'Check the kubeconfig and that the cluster is up.' });
        }
        if (!kubeSystem?.metadata.uid) throw new ExternalError(`The cluster of ${kubeconfig} has no kube-system namespace, which identifies a cluster to Rancher`, { hint: 'Import a running Kubernetes cluster.' });
        const name = dnsLabel(request.name ?? workload.cluster?.name ?? 'imported');
        const selector = { [importedClusterLabel]: kubeSystem.metadata.uid };
        const query: RancherClusterQuery = strategy === 'v3' ? { strategy, selector } : { strategy, selector, namespace: defaultV1Namespace };
        const spec: RancherClusterSpec = { query, labels: selector, displayName: name, description: `Cluster imported to Rancher by provisioner from ${workload.server}`, v1Name: name };
        return { rancher: await openRancher(rancherKubeconfig, strategy), query, spec, workload, resumedRecord: false };
      } catch (error) {
        workload.close();
        throw error;
      }
    },
    strategy,
    waitOf(request),
  );
}

/**
 * The first step of `destroy cluster` (ADR 0008's custom deletion): when the install was
 * registered with Rancher, delete Rancher's cluster — found by the recorded labels — and
 * wait until Rancher has removed it; then forget the registration. Returns what was deleted.
 */
export async function removeRancherRegistration(dir: string, wait: { sink: EventSink; signal: AbortSignal; noProgressTimeoutMs?: number; pollIntervalMs?: number }): Promise<string[]> {
  const record = await readRancherRecord(dir);
  if (!record) return [];
  await checkKubeconfigFile(record.rancherKubeconfig, `${recordRelativePath('rancher')} (rancherKubeconfig)`).catch((error: unknown) => {
    throw new EnvironmentError(`Rancher's kubeconfig ${record.rancherKubeconfig}, where this install was registered, cannot be used: ${messageOf(error)}`, {
      cause: error,
      hint: `Restore that kubeconfig and run destroy again; to leave Rancher's cluster behind instead, delete ${rancherRecordPath(dir)} first.`,
    });
  });
  const rancher = KubeClient.fromFile(record.rancherKubeconfig);
  try {
    const step = stageSteps('rancher/', wait);
    log(wait.sink, 'info', `Removing Rancher's cluster for this install from ${record.server} first (found by ${Object.keys(record.query.selector).join(', ') || 'its owner reference'})`);
    const deleted = await step('delete', () => deleteRancherClusters(rancher, record.query, wait));
    for (const name of deleted) log(wait.sink, 'info', `Deleted ${name} from Rancher`);
    await removeRancherRecord(dir);
    return deleted;
  } catch (error) {
    if (wait.signal.aborted || (error instanceof ProvisionerError && !(error instanceof KubeApiError))) throw error;
    throw new ExternalError(`Removing Rancher's cluster for this install failed: ${messageOf(error)}`, {
      cause: error,
      hint: `Check Rancher's cluster (${record.server}) and run destroy again; to leave Rancher's cluster behind instead, delete ${rancherRecordPath(dir)} first.`,
    });
  } finally {
    rancher.close();
  }
}
