/**
 * The Fleet hand-off: `register fleet`'s work (registerFleetLocked; services/fleet.ts takes
 * the lock) and the Fleet part of `destroy cluster` (deregisterFleet): hands the install's workload
 * cluster to a Fleet manager, the two ways Fleet registers a cluster
 * (`handoff/fleet/objects.ts`):
 *
 *  - `manager` (default): a Fleet Cluster whose kubeconfig Secret holds `<dir>/auth/kubeconfig`;
 *    Fleet's controller reaches the cluster with it and deploys its agent there;
 *  - `agent`, for a cluster the manager cannot reach: a ClusterRegistrationToken, and on the
 *    workload cluster the `fleet-agent-bootstrap` Secret (the token's values, the manager's
 *    API server URL and CA) and the agent's configuration, which Fleet's agent there reads to
 *    register; the Fleet Cluster is created beforehand with the agent's clientID.
 *
 * Either way it waits until the agent has checked in (the Cluster's `status.agent.lastSeen`).
 * Every object on the manager is labelled with the install's cluster and found again by those
 * labels; the manager, namespace, mode and labels are recorded in `<dir>/.provisioner/fleet.json`
 * before anything is created, so a register run again resumes (each step looks its object up
 * first) and `destroy cluster` deletes exactly those objects.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { readInstallConfig } from '../../assets/index.js';
import { ExternalError, UsageError, messageOf, requestField, type ProvisionerError } from '../../errors.js';
import { log, type EventSink } from '../../events.js';
import { readIfExists } from '../../files.js';
import {
  agentBootstrapSecret,
  agentConfigMap,
  agentNamespace,
  agentRegistered,
  bootstrapSecretName,
  defaultFleetNamespace,
  fleetApiVersion,
  fleetCluster,
  kubeconfigSecret,
  kubeconfigSecretKey,
  parseRegistrationValues,
  registrationLabels,
  registrationSelector,
  registrationToken,
  type ClusterRegistrationToken,
  type FleetCluster,
  type RegistrationIdentity,
  type RegistrationMode,
  type RegistrationValues,
  type SecretObject,
} from './objects.js';
import { agentCheckedIn, fleetClusterEvent, fleetKinds, tokenIssued } from './wait.js';
import { InstallRecord } from '../../installdir/record.js';
import { KubeApiError, KubeClient, describeRef, type KubeObject } from '../../kube/client.js';
import { checkKubeconfigFile } from '../../kube/kubeconfig-file.js';
import { snapshotObjects, waitFor, type Verdict } from '../../wait/waiter.js';
import { StageRunner, stageSteps, type Stage } from '../../lifecycle/stages.js';

export { defaultFleetNamespace } from './objects.js';
export type { RegistrationMode } from './objects.js';

/** Registration mode when the caller names none: manager-initiated, Fleet's usual way for a cluster it can reach. */
export const defaultRegistrationMode: RegistrationMode = 'manager';

export interface RegisterFleetRequest {
  dir: string;
  /** Kubeconfig of the Fleet manager (the cluster fleet-controller runs in). */
  fleetKubeconfig: string;
  /** Namespace of the Fleet Cluster. Default `fleet-default` (`defaultFleetNamespace`). */
  namespace?: string;
  /** Default `manager` (`defaultRegistrationMode`). */
  mode?: RegistrationMode;
  /**
   * Agent mode: the manager's API server URL for the agent, when Fleet's own configuration
   * (the token's values) has none. Default: the server of `fleetKubeconfig`.
   */
  apiServerUrl?: string;
  sink: EventSink;
  signal: AbortSignal;
  /** Time without progress before a wait fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
}

export interface FleetRegistrationResult {
  /** One line for the user. */
  summary: string;
  mode: RegistrationMode;
  /** The Fleet Cluster, `namespace/name`. */
  cluster: string;
  /** The Cluster's namespace of BundleDeployments, as Fleet set it (empty until Fleet did). */
  clusterNamespace: string;
  /** When the agent last checked in. */
  lastSeen: string;
  /** The selector that finds the registration's objects on the manager. */
  selector: string;
}

/** What `register fleet` records in the install directory for resumes and `destroy cluster`. */
interface FleetRecord {
  /** Absolute path of the manager's kubeconfig. */
  kubeconfig: string;
  /** The manager's API server, to tell a moved kubeconfig from another manager. */
  server: string;
  namespace: string;
  mode: RegistrationMode;
  labels: Record<string, string>;
}

/** fleet.json as a record: a few hundred bytes. */
const fleetRecord = new InstallRecord<FleetRecord>({
  record: 'fleet',
  title: 'Fleet registration record',
  maxBytes: 64 * 1024,
  version: 1,
  recovery: (file) =>
    `it names the Fleet manager's kubeconfig, namespace and the labels of this cluster's Fleet objects: restore it, or delete those objects by their labels and move ${file} aside`,
  problems: (record) => {
    const labels = record.labels;
    const sound =
      typeof record.kubeconfig === 'string' &&
      typeof record.namespace === 'string' &&
      (record.mode === 'manager' || record.mode === 'agent') &&
      typeof labels === 'object' &&
      labels !== null &&
      Object.keys(labels).length > 0;
    return sound ? [] : [{ path: 'kubeconfig', message: 'expected {"kubeconfig", "server", "namespace", "mode", "labels"}' }];
  },
});

export function fleetRecordFile(dir: string): string {
  return fleetRecord.path(dir);
}

async function readFleetRecord(dir: string): Promise<FleetRecord | undefined> {
  const record = await fleetRecord.read(dir);
  return record && { ...record, server: String(record.server ?? '') };
}

async function writeFleetRecord(dir: string, record: FleetRecord): Promise<void> {
  await fleetRecord.write(dir, record);
}

/** What a registration's stages find as they run; the later stages' `skip` is decided from it. */
export interface FleetFindings {
  /** Found by `cluster`: an agent already checked in for the Fleet Cluster (agent mode needs no new token or bootstrap Secret). */
  agentCheckedIn?: boolean;
}

export type FleetStageName = 'preflight' | 'record' | 'kubeconfig-secret' | 'cluster' | 'token' | 'agent-bootstrap' | 'wait-registered';

/**
 * A registration's declared stages, `fleet/<name>`, unjournaled (fleet.json and the labels are
 * its resume; each step looks its object up first). The mode chooses the kubeconfig Secret
 * (manager) or the token and the agent's bootstrap (agent) before the list runs.
 */
export function fleetStages(mode: RegistrationMode, found: FleetFindings, body: Record<FleetStageName, () => Promise<unknown>>): Stage[] {
  const checkedIn = () => (found.agentCheckedIn ? 'an agent already checked in for the Fleet Cluster: no new registration token or bootstrap Secret is needed' : undefined);
  return [
    { name: 'fleet/preflight', run: body.preflight },
    { name: 'fleet/record', run: body.record },
    { name: 'fleet/kubeconfig-secret', when: mode === 'manager', run: body['kubeconfig-secret'] },
    { name: 'fleet/cluster', run: body.cluster },
    { name: 'fleet/token', when: mode === 'agent', skip: checkedIn, run: body.token },
    { name: 'fleet/agent-bootstrap', when: mode === 'agent', skip: checkedIn, run: body['agent-bootstrap'] },
    { name: 'fleet/wait-registered', run: body['wait-registered'] },
  ];
}

/** The labelled objects of one kind, oldest first, without those being deleted. */
async function findLabelled<T extends KubeObject>(client: KubeClient, apiVersion: string, kind: string, namespace: string, selector: string): Promise<T[]> {
  const found = await client.list<T>(apiVersion, kind, { namespace, labelSelector: selector });
  return found
    .filter((o) => !o.metadata.deletionTimestamp)
    .sort((a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? '') || a.metadata.name.localeCompare(b.metadata.name));
}

/** The workload cluster: its kubeconfig's text, a client, and its identity (kube-system's UID). */
interface Workload {
  kubeconfigFile: string;
  kubeconfig: string;
  client: KubeClient;
  identity: RegistrationIdentity;
}

async function openWorkload(dir: string, sink: EventSink): Promise<Workload> {
  const kubeconfigFile = path.join(dir, 'auth', 'kubeconfig');
  const kubeconfig = await readIfExists(kubeconfigFile);
  if (kubeconfig === undefined) {
    throw new UsageError(`${kubeconfigFile} does not exist: the install's cluster has not been handed off`, {
      hint: `Create the cluster first (\`provisioner create cluster --dir ${dir}\`, or \`provisioner wait-for install-complete --dir ${dir}\`), then register it.`,
    });
  }
  await checkKubeconfigFile(kubeconfigFile, `the workload kubeconfig of ${dir}`);
  const config = await readInstallConfig({ dir, sink });
  const client = KubeClient.fromText(kubeconfig);
  let uid: string | undefined;
  try {
    uid = (await client.get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }))?.metadata.uid;
  } catch (error) {
    client.close();
    throw new ExternalError(`The workload cluster in ${kubeconfigFile} (${client.server}) cannot be reached: ${messageOf(error)}`, {
      hint: `Check that the cluster is up (\`kubectl --kubeconfig ${kubeconfigFile} get nodes\`) and run this again; \`provisioner wait-for install-complete --dir ${dir}\` rewrites the kubeconfig.`,
      cause: error,
    });
  }
  if (!uid) {
    client.close();
    throw new ExternalError(`The workload cluster in ${kubeconfigFile} has no kube-system namespace, whose UID identifies it to Fleet`, { hint: 'Check that the kubeconfig points at the install\'s cluster.' });
  }
  return {
    kubeconfigFile,
    kubeconfig,
    client,
    identity: { clusterName: config.metadata.name, clusterNamespace: config.metadata.namespace, clusterId: uid },
  };
}

/** A client of the Fleet manager, checked: reachable, serving Fleet's kinds, with the namespace. */
async function openFleetManager(kubeconfig: string, namespace: string): Promise<KubeClient> {
  await checkKubeconfigFile(kubeconfig, '--kubeconfig');
  const client = KubeClient.fromFile(path.resolve(kubeconfig));
  try {
    for (const kind of ['Cluster', 'ClusterRegistrationToken']) await client.collectionPath(fleetApiVersion, kind);
    if (!(await client.get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }))) {
      throw new ExternalError(`The Fleet manager in ${kubeconfig} has no namespace ${namespace}`, {
        hint: `Pass the namespace Fleet keeps downstream clusters in with --namespace (Fleet's is ${defaultFleetNamespace}), or create it.`,
      });
    }
    return client;
  } catch (error) {
    client.close();
    if (!(error instanceof KubeApiError)) throw error;
    if (error.statusCode === 0) {
      throw new ExternalError(`The Fleet manager in ${kubeconfig} (${client.server}) cannot be reached: ${messageOf(error)}`, { hint: 'Check the kubeconfig and that the cluster is up, then run this again.', cause: error });
    }
    if (error.isNotFound) {
      throw new ExternalError(`The cluster in ${kubeconfig} does not serve Fleet's ${fleetApiVersion} Cluster and ClusterRegistrationToken: Fleet is not installed there`, {
        hint: 'Pass the kubeconfig of the cluster that runs fleet-controller (install Fleet there with its fleet-crd and fleet charts).',
        cause: error,
      });
    }
    throw error;
  }
}

/** The manager's API server and CA as its kubeconfig names them: the fallback for an agent's bootstrap Secret. */
async function managerEndpoint(client: KubeClient): Promise<{ server: string; caPem: string }> {
  const cluster = client.cluster;
  const caPem = cluster?.caData ? Buffer.from(cluster.caData, 'base64').toString('utf8') : cluster?.caFile ? await readFile(cluster.caFile, 'utf8') : '';
  return { server: cluster?.server ?? '', caPem };
}

/** Deletes the extra copies a lookup found (only concurrent runs, which the directory lock prevents, could make them). */
async function dropDuplicates(client: KubeClient, found: readonly KubeObject[], sink: EventSink): Promise<void> {
  for (const extra of found.slice(1)) {
    log(sink, 'warn', `Deleting ${describeRef(extra)}: a second object with this cluster's labels`);
    await client.delete(extra);
  }
}

/** `register fleet`'s work, under the caller's directory lock (services/fleet.ts): the declared `fleetStages`. */
export async function registerFleetLocked(request: RegisterFleetRequest): Promise<FleetRegistrationResult> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const namespace = request.namespace ?? defaultFleetNamespace;
  const mode = request.mode ?? defaultRegistrationMode;
  const found: FleetFindings = {};
  let workload: Workload | undefined;
  let fleet: KubeClient | undefined;
  let secret: SecretObject | undefined;
  let values: RegistrationValues | undefined;
  let registered: FleetCluster | undefined;
  const opened = () => ({ workload: workload!, manager: fleet!, labels: registrationLabels(workload!.identity), selector: registrationSelector(registrationLabels(workload!.identity)) });
  try {
    await new StageRunner({ sink, signal }).runAll(
      fleetStages(mode, found, {
        preflight: async () => {
          workload = await openWorkload(dir, sink);
          fleet = await openFleetManager(request.fleetKubeconfig, namespace);
        },
        record: async () => {
          const { manager, selector } = opened();
          const previous = await readFleetRecord(dir);
          if (previous && (previous.server !== manager.server || previous.namespace !== namespace || registrationSelector(previous.labels) !== selector)) {
            throw new UsageError(`The cluster of ${dir} is recorded as registered elsewhere: with ${previous.server} (${previous.kubeconfig}), namespace ${previous.namespace}, labels ${registrationSelector(previous.labels)}`, {
              hint: `Pass that manager's kubeconfig and --namespace ${previous.namespace} to resume; to move the cluster, delete its objects there (kubectl delete clusters.fleet.cattle.io,clusterregistrationtokens.fleet.cattle.io,secrets -n ${previous.namespace} -l ${registrationSelector(previous.labels)}) and remove ${fleetRecordFile(dir)}.`,
            });
          }
          await writeFleetRecord(dir, { kubeconfig: path.resolve(request.fleetKubeconfig), server: manager.server, namespace, mode, labels: opened().labels });
        },
        'kubeconfig-secret': async () => {
          secret = await ensureKubeconfigSecret(opened().manager, opened().workload, namespace, opened().selector, sink);
        },
        cluster: async () => {
          const { manager, workload: { identity }, selector } = opened();
          const target = mode === 'manager' ? { kubeConfigSecret: secret!.metadata.name } : { clientID: identity.clusterId };
          const cluster = await ensureCluster(manager, identity, namespace, selector, target, sink);
          // What the other mode made goes (a mode switch).
          if (mode === 'manager') await dropLabelled<ClusterRegistrationToken>(manager, fleetApiVersion, 'ClusterRegistrationToken', namespace, selector, sink);
          else await dropLabelled<SecretObject>(manager, 'v1', 'Secret', namespace, selector, sink);
          found.agentCheckedIn = agentRegistered(cluster);
        },
        token: async () => {
          values = await issuedToken(opened().manager, opened().workload.identity, namespace, opened().selector, request, sink);
        },
        'agent-bootstrap': () => installAgentBootstrap(opened().workload, values!, opened().workload.identity, sink),
        'wait-registered': async () => {
          registered = await waitRegistered(opened().manager, namespace, opened().labels, mode, opened().workload, request);
        },
      }),
    );
    const where = `${namespace}/${registered!.metadata.name}`;
    return {
      summary: `registered with Fleet (${mode}-initiated): Cluster ${where}, agent last seen ${registered!.status?.agent?.lastSeen ?? ''}`,
      mode,
      cluster: where,
      clusterNamespace: registered!.status?.namespace ?? '',
      lastSeen: registered!.status?.agent?.lastSeen ?? '',
      selector: opened().selector,
    };
  } finally {
    workload?.client.close();
    fleet?.close();
  }
}

/** The kubeconfig Secret: found by labels (its data brought up to date), or created. */
async function ensureKubeconfigSecret(client: KubeClient, workload: Workload, namespace: string, selector: string, sink: EventSink): Promise<SecretObject> {
  const found = await findLabelled<SecretObject>(client, 'v1', 'Secret', namespace, selector);
  await dropDuplicates(client, found, sink);
  const encoded = Buffer.from(workload.kubeconfig).toString('base64');
  const existing = found[0];
  if (!existing) {
    const created = await client.create(kubeconfigSecret(workload.identity, namespace, workload.kubeconfig));
    log(sink, 'info', `Created Secret ${namespace}/${created.metadata.name} with the kubeconfig of ${workload.kubeconfigFile}`);
    return created;
  }
  if (existing.data?.[kubeconfigSecretKey] !== encoded) {
    log(sink, 'info', `Updating Secret ${namespace}/${existing.metadata.name} with the current ${workload.kubeconfigFile}`);
    return client.mergePatch<SecretObject>(existing, { data: { [kubeconfigSecretKey]: encoded } });
  }
  log(sink, 'info', `Found Secret ${namespace}/${existing.metadata.name} (by its labels) with the current kubeconfig`);
  return existing;
}

/** The Fleet Cluster: found by labels (its spec brought to this mode's), or created. */
async function ensureCluster(
  client: KubeClient,
  identity: RegistrationIdentity,
  namespace: string,
  selector: string,
  target: { kubeConfigSecret: string } | { clientID: string },
  sink: EventSink,
): Promise<FleetCluster> {
  const found = await findLabelled<FleetCluster>(client, fleetApiVersion, 'Cluster', namespace, selector);
  await dropDuplicates(client, found, sink);
  const existing = found[0];
  if (!existing) {
    const created = await client.create(fleetCluster(identity, namespace, target));
    log(sink, 'info', `Created Fleet Cluster ${namespace}/${created.metadata.name}`);
    sink.emit(fleetClusterEvent(created));
    return created;
  }
  // A mode switch (a manager that could not reach the cluster, then --mode agent): the other mode's reference goes.
  const patch =
    'kubeConfigSecret' in target
      ? existing.spec?.kubeConfigSecret !== target.kubeConfigSecret && { spec: { kubeConfigSecret: target.kubeConfigSecret } }
      : (existing.spec?.clientID !== target.clientID || existing.spec?.kubeConfigSecret) && { spec: { clientID: target.clientID, kubeConfigSecret: null } };
  if (patch) {
    log(sink, 'info', `Updating Fleet Cluster ${namespace}/${existing.metadata.name} (found by its labels) for ${'kubeConfigSecret' in target ? 'manager' : 'agent'}-initiated registration`);
    return client.mergePatch<FleetCluster>(existing, patch);
  }
  log(sink, 'info', `Found Fleet Cluster ${namespace}/${existing.metadata.name} by its labels`);
  sink.emit(fleetClusterEvent(existing));
  return existing;
}

/** Deletes labelled objects the other mode made (a mode switch). */
async function dropLabelled<T extends KubeObject>(client: KubeClient, apiVersion: string, kind: string, namespace: string, selector: string, sink: EventSink): Promise<void> {
  for (const stale of await findLabelled<T>(client, apiVersion, kind, namespace, selector)) {
    log(sink, 'info', `Deleting ${describeRef(stale)}, left by a registration in the other mode`);
    await client.delete(stale);
  }
}

/**
 * A registration token Fleet's controller has answered, and the values of its Secret, with the
 * manager's API server URL and CA filled in from `--api-server-url` or its kubeconfig when
 * Fleet's configuration has none. An expired token is replaced.
 */
async function issuedToken(client: KubeClient, identity: RegistrationIdentity, namespace: string, selector: string, request: RegisterFleetRequest, sink: EventSink): Promise<RegistrationValues> {
  const found = await findLabelled<ClusterRegistrationToken>(client, fleetApiVersion, 'ClusterRegistrationToken', namespace, selector);
  await dropDuplicates(client, found, sink);
  let token = found[0];
  if (token?.status?.expires && Date.parse(token.status.expires) <= Date.now()) {
    log(sink, 'info', `ClusterRegistrationToken ${namespace}/${token.metadata.name} has expired; creating a new one`);
    await client.delete(token);
    token = undefined;
  }
  if (!token) {
    token = await client.create(registrationToken(identity, namespace));
    log(sink, 'info', `Created ClusterRegistrationToken ${namespace}/${token.metadata.name}`);
  } else {
    log(sink, 'info', `Found ClusterRegistrationToken ${namespace}/${token.metadata.name} by its labels`);
  }
  const labels = registrationLabels(identity);
  await waitFor(client, {
    what: `Fleet's answer to ClusterRegistrationToken ${namespace}/${token.metadata.name}`,
    kinds: fleetKinds('ClusterRegistrationToken', namespace),
    evaluate: tokenIssued(labels),
    onStall: (_last, stalledMs) =>
      new ExternalError(`Fleet's controller did not answer ClusterRegistrationToken ${namespace}/${token.metadata.name} within ${Math.round(stalledMs / 1000)} s (no status.secretName)`, {
        hint: `Check that fleet-controller runs on the manager of ${request.fleetKubeconfig} and read its log; run this again to keep waiting.`,
      }),
    events: sink,
    signal: request.signal,
    ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
  });
  const answered = (await findLabelled<ClusterRegistrationToken>(client, fleetApiVersion, 'ClusterRegistrationToken', namespace, selector)).find((t) => t.status?.secretName);
  const secretName = answered?.status?.secretName ?? '';
  const secret = await client.get<SecretObject>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: secretName, namespace } });
  const parsed = secret ? parseRegistrationValues(secret) : { problem: 'does not exist' };
  if ('problem' in parsed) {
    throw new ExternalError(`Secret ${namespace}/${secretName} of ClusterRegistrationToken ${namespace}/${answered?.metadata.name ?? ''} ${parsed.problem}`, {
      hint: "It is fleet-controller's answer to the token: read fleet-controller's log on the manager, delete the token, and run this again.",
    });
  }
  const fallback = await managerEndpoint(client);
  const apiServerURL = parsed.apiServerURL || request.apiServerUrl || fallback.server;
  const apiServerCA = parsed.apiServerCA || fallback.caPem;
  const source = parsed.apiServerURL ? "Fleet's configuration" : request.apiServerUrl ? requestField('apiServerUrl') : `the server of ${request.fleetKubeconfig}`;
  log(sink, 'info', `The agent will reach the Fleet manager at ${apiServerURL} (from ${source}), trusting ${parsed.apiServerCA ? "Fleet's configured CA" : apiServerCA ? "the CA of the manager's kubeconfig" : 'the system CAs'}`);
  return { ...parsed, apiServerURL, apiServerCA };
}

/** On the workload cluster: the agent's namespace, its bootstrap Secret and its configuration. */
async function installAgentBootstrap(workload: Workload, values: RegistrationValues, identity: RegistrationIdentity, sink: EventSink): Promise<void> {
  const { client } = workload;
  await client.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: agentNamespace } });
  await client.apply(agentBootstrapSecret(values, identity));
  await client.apply(agentConfigMap(identity));
  log(sink, 'info', `Wrote Secret ${agentNamespace}/${bootstrapSecretName} and ConfigMap ${agentNamespace}/fleet-agent on the workload cluster: Fleet's agent there registers with them`);
}

async function waitRegistered(
  client: KubeClient,
  namespace: string,
  labels: Record<string, string>,
  mode: RegistrationMode,
  workload: Workload,
  request: RegisterFleetRequest,
): Promise<FleetCluster> {
  const selector = registrationSelector(labels);
  await waitFor(client, {
    what: `the Fleet agent of ${workload.identity.clusterName} to check in`,
    kinds: fleetKinds('Cluster', namespace),
    evaluate: agentCheckedIn(labels),
    onStall: (last, stalledMs) => notRegistered(last, stalledMs, mode, workload, request),
    events: request.sink,
    signal: request.signal,
    ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
  });
  const registered = (await findLabelled<FleetCluster>(client, fleetApiVersion, 'Cluster', namespace, selector)).find(agentRegistered);
  if (!registered) {
    throw new ExternalError(`The Fleet Cluster with labels ${selector} in ${namespace} went away right after its agent checked in`, { hint: 'Run this again: it creates the Cluster again.' });
  }
  return registered;
}

/** The error when no agent checked in: the Cluster, what Fleet reported, and the next step for the mode. */
function notRegistered(last: Verdict, stalledMs: number, mode: RegistrationMode, workload: Workload, request: RegisterFleetRequest): ProvisionerError {
  const shown = last.objects[0];
  const cluster = shown ? `Fleet Cluster ${shown.namespace}/${shown.name}` : 'The Fleet Cluster';
  const reported = shown?.blocking?.message ? ` (${shown.blocking.condition}: ${shown.blocking.message})` : '';
  const minutes = Math.round(stalledMs / 60_000);
  const waited = minutes >= 1 ? `${minutes} min` : `${Math.round(stalledMs / 1000)} s`;
  const hint =
    mode === 'manager'
      ? `Fleet's controller must reach ${workload.client.server} with the kubeconfig in the Cluster's Secret and deploy its agent there. If the manager cannot reach this cluster, register it with \`provisioner register fleet --dir ${request.dir} --kubeconfig ${request.fleetKubeconfig} --mode agent\`; otherwise run this again to keep waiting.`
      : `Fleet's agent must run on the workload cluster (namespace ${agentNamespace}; it reads Secret ${bootstrapSecretName}) and reach the manager's API server: deploy it there (Fleet's fleet-agent chart), then run this again to keep waiting.`;
  return new ExternalError(`${cluster}: no Fleet agent checked in within ${waited}${reported}`, { hint });
}

/**
 * `destroy cluster`'s first step: deletes the Fleet Cluster, its kubeconfig Secret and any
 * registration token of this install from the Fleet manager it was registered with, found by
 * their labels, waits until the Cluster is gone, and forgets the registration. Nothing to do
 * when the cluster was never registered. The caller holds the directory lock.
 */
export async function deregisterFleet(request: { dir: string; sink: EventSink; signal: AbortSignal; noProgressTimeoutMs?: number }): Promise<{ deleted: string[] }> {
  const dir = path.resolve(request.dir);
  const record = await readFleetRecord(dir);
  if (!record) return { deleted: [] };
  const { sink } = request;
  const selector = registrationSelector(record.labels);
  const next = `Make ${record.kubeconfig} reach the Fleet manager and run destroy cluster again, or delete the objects yourself (kubectl delete clusters.fleet.cattle.io,clusterregistrationtokens.fleet.cattle.io,secrets -n ${record.namespace} -l ${selector}) and remove ${fleetRecordFile(dir)}.`;
  const step = stageSteps('fleet/', { sink, signal: request.signal });
  return step('deregister', async () => {
    let client: KubeClient;
    try {
      await checkKubeconfigFile(record.kubeconfig, `${fleetRecordFile(dir)}'s kubeconfig`);
      client = KubeClient.fromFile(record.kubeconfig);
    } catch (error) {
      throw new ExternalError(`The cluster is registered with Fleet, but the Fleet manager's kubeconfig ${record.kubeconfig} cannot be used: ${messageOf(error)}`, { hint: next, cause: error });
    }
    try {
      const deleted: string[] = [];
      const kinds: [string, string][] = [[fleetApiVersion, 'Cluster'], ['v1', 'Secret'], [fleetApiVersion, 'ClusterRegistrationToken']];
      for (const [apiVersion, kind] of kinds) {
        for (const object of await findLabelled(client, apiVersion, kind, record.namespace, selector)) {
          log(sink, 'info', `Deleting ${describeRef(object)} from the Fleet manager`);
          await client.delete(object);
          deleted.push(describeRef(object));
        }
      }
      await waitFor(client, {
        what: `the deletion of this cluster's Fleet Cluster in ${record.namespace}`,
        kinds: fleetKinds('Cluster', record.namespace),
        evaluate: (snapshot) => {
          const remaining = snapshotObjects<FleetCluster>(snapshot, { apiVersion: fleetApiVersion, kind: 'Cluster' }).filter((c) =>
            Object.entries(record.labels).every(([key, value]) => c.metadata.labels?.[key] === value),
          );
          return { state: remaining.length === 0 ? 'done' : 'waiting', objects: remaining.map((c) => ({ ...fleetClusterEvent(c), phase: 'Deleting' })) };
        },
        onStall: (last, stalledMs) =>
          new ExternalError(`Fleet Cluster ${last.objects.map((o) => `${o.namespace}/${o.name}`).join(', ')} is still there ${Math.round(stalledMs / 1000)} s after its deletion`, {
            hint: `Fleet's controller finalizes it: check that it runs (its finalizers are on the object), then run destroy cluster again. ${next}`,
          }),
        events: sink,
        signal: request.signal,
        ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
      });
      await rm(fleetRecordFile(dir), { force: true });
      return { deleted };
    } catch (error) {
      if (error instanceof KubeApiError && error.statusCode === 0) {
        throw new ExternalError(`The Fleet manager in ${record.kubeconfig} cannot be reached to remove this cluster's registration: ${messageOf(error)}`, { hint: next, cause: error });
      }
      throw error;
    } finally {
      client.close();
    }
  });
}
