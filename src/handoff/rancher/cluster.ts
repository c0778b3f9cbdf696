/**
 * Rancher's side of a hand-off, the way Rancher Turtles' import controllers do it (v1:
 * `import_controller.go`, v3: `import_controller_v3.go`): Rancher's cluster is created
 * once and found again only by its labels (ADR 0008: a cluster-scoped `c-xxxxx` cannot be
 * owned by a namespaced CAPI Cluster, and its name is the server's choice), its
 * registration token is got or created, the manifest URL Rancher writes into the token's
 * status is waited for, and so is Rancher's Ready. Deletion is ours too, by the same labels.
 *
 * Every wait polls (Rancher's cluster may be remote and slow) on the one waiting primitive:
 * it fails when nothing it shows changed for the no-progress timeout.
 */
import { ExternalError, type ProvisionerError } from '../../errors.js';
import type { EventSink, ObjectEvent } from '../../events.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../../kube/client.js';
import { polling, until, type Observation } from '../../progress/until.js';
import {
  blockingCondition,
  caSettingName,
  defaultTokenName,
  describeRancherCluster,
  isRancherClusterReady,
  managementApiVersion,
  managementClusterName,
  rancherClusterKind,
  selectorOf,
  turtlesApiGroup,
  type RancherStrategy,
} from './api.js';
import type { RancherClusterQuery } from './journal.js';

/** How often the waits look at Rancher: every second. */
const defaultPollIntervalMs = 1_000;

export interface RancherWait {
  sink: EventSink;
  signal: AbortSignal;
  /** Time without any change before a wait fails. Default: the waits' 10 minutes. */
  noProgressTimeoutMs?: number;
  /** Default `defaultPollIntervalMs`. */
  pollIntervalMs?: number;
}

/** What to create when Rancher has no cluster for the query yet. */
export interface RancherClusterSpec {
  query: RancherClusterQuery;
  /** Labels set at creation: the query's selector plus the cluster's own labels. */
  labels: Record<string, string>;
  /** The name Rancher shows (v3 `spec.displayName`). */
  displayName: string;
  description: string;
  /** v1 only: the provisioning cluster's name (in `query.namespace`). */
  v1Name: string;
}

function queryText(query: RancherClusterQuery): string {
  const parts = [selectorOf(query.selector) || 'no labels'];
  if (query.namespace && query.strategy === 'v1') parts.push(`in namespace ${query.namespace}`);
  if (query.ownerUid) parts.push(`owned by UID ${query.ownerUid}`);
  return `${rancherClusterKind(query.strategy).apiVersion} Cluster with ${parts.join(' ')}`;
}

/** Checks that the cluster of `rancher` serves the kinds a registration uses, naming each one it lacks. */
export async function checkRancherApi(rancher: KubeClient, strategy: RancherStrategy, source: string): Promise<void> {
  const needed = [rancherClusterKind(strategy), { apiVersion: managementApiVersion, kind: 'ClusterRegistrationToken' }, { apiVersion: managementApiVersion, kind: 'Setting' }];
  const missing: string[] = [];
  for (const kind of needed) {
    try {
      await rancher.collectionPath(kind.apiVersion, kind.kind);
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) missing.push(`${kind.kind} (${kind.apiVersion})`);
      else throw reachError(error, source);
    }
  }
  if (missing.length > 0) {
    throw new ExternalError(`The cluster of ${source} does not serve ${missing.length} Rancher kind(s): it is not Rancher's local cluster`, {
      details: missing,
      hint: 'Pass the kubeconfig of the cluster Rancher runs in (Rancher UI: local cluster → Download KubeConfig).',
    });
  }
}

function reachError(error: unknown, source: string): ExternalError {
  if (error instanceof ExternalError) return new ExternalError(`Rancher's cluster (${source}) refused or did not answer: ${error.message}`, { cause: error, hint: 'Check the kubeconfig and that Rancher is up, then run the command again.' });
  return new ExternalError(`Rancher's cluster (${source}) could not be used: ${String(error)}`, { cause: error, hint: 'Check the kubeconfig, then run the command again.' });
}

/** Whether Rancher Turtles runs in the cluster of `rancher`: its CRDs (group turtles-capi.cattle.io) are installed. */
export async function runsTurtles(rancher: KubeClient): Promise<boolean> {
  const crds = await rancher.list<KubeObject & { spec?: { group?: string } }>('apiextensions.k8s.io/v1', 'CustomResourceDefinition');
  return crds.some((crd) => crd.spec?.group === turtlesApiGroup);
}

/** Rancher's clusters matching `query` (by labels; never by name), deleting ones included. */
async function findRancherClusters(rancher: KubeClient, query: RancherClusterQuery): Promise<KubeObject[]> {
  const kind = rancherClusterKind(query.strategy);
  const selector = selectorOf(query.selector);
  const found = await rancher.list(kind.apiVersion, kind.kind, {
    ...(query.strategy === 'v1' && query.namespace ? { namespace: query.namespace } : {}),
    ...(selector ? { labelSelector: selector } : {}),
  });
  return query.ownerUid ? found.filter((o) => o.metadata.ownerReferences?.some((r) => r.uid === query.ownerUid)) : found;
}

/** The one Rancher cluster of `query`, undefined when there is none; more than one is an error naming them. */
async function findRancherCluster(rancher: KubeClient, query: RancherClusterQuery): Promise<KubeObject | undefined> {
  const found = await findRancherClusters(rancher, query);
  if (found.length > 1) {
    throw new ExternalError(`${found.length} Rancher clusters match ${queryText(query)}; exactly one should`, {
      details: found.map(describeRancherCluster),
      hint: 'Delete the ones that do not stand for this cluster (in Rancher, or with kubectl on its local cluster), then run the command again.',
    });
  }
  return found[0];
}

/**
 * Rancher's cluster for `spec.query`: the existing one (whatever its display name now), or a
 * new one — v3: `generateName: c-` with the labels, display name and description; v1: named
 * `spec.v1Name` in the query's namespace, with the labels. `created` says which.
 */
export async function ensureRancherCluster(rancher: KubeClient, spec: RancherClusterSpec): Promise<{ cluster: KubeObject; created: boolean }> {
  const existing = await findRancherCluster(rancher, spec.query);
  if (existing?.metadata.deletionTimestamp) {
    throw new ExternalError(`${describeRancherCluster(existing)} is being deleted`, { hint: 'Wait until Rancher has removed it, then run the command again to import the cluster anew.' });
  }
  if (existing) return { cluster: existing, created: false };
  const { apiVersion, kind } = rancherClusterKind(spec.query.strategy);
  const body: KubeObject =
    spec.query.strategy === 'v3'
      ? { apiVersion, kind, metadata: { name: '', generateName: 'c-', labels: spec.labels }, spec: { displayName: spec.displayName, description: spec.description } }
      : { apiVersion, kind, metadata: { name: spec.v1Name, namespace: spec.query.namespace ?? 'default', labels: spec.labels }, spec: {} };
  try {
    return { cluster: await rancher.create(body), created: true };
  } catch (error) {
    if (error instanceof KubeApiError && error.reason === 'AlreadyExists') {
      throw new ExternalError(`${apiVersion} Cluster ${spec.query.namespace}/${spec.v1Name} exists but does not carry ${selectorOf(spec.query.selector)}: it is another cluster's`, {
        cause: error,
        hint: 'Remove or rename that Rancher cluster, or use --strategy v3 (named by the server), then run the command again.',
      });
    }
    throw error;
  }
}

/** An object event for Rancher's cluster, as the views show it. */
function clusterEvent(cluster: KubeObject): ObjectEvent {
  const blocking = blockingCondition(cluster);
  const display = (cluster['spec'] as { displayName?: string } | undefined)?.displayName;
  return {
    type: 'object',
    kind: `RancherCluster(${cluster.apiVersion.split('.')[0]})`,
    ...(cluster.metadata.namespace ? { namespace: cluster.metadata.namespace } : {}),
    name: cluster.metadata.name,
    ...(display ? { phase: display } : {}),
    ready: isRancherClusterReady(cluster),
    ...(blocking ? { blocking: { condition: blocking.type, ...(blocking.reason ? { reason: blocking.reason } : {}), ...(blocking.message ? { message: blocking.message } : {}) } } : {}),
  };
}

/** Polls `look` on the one waiting primitive; a stall is an ExternalError built by `stalled` from the last thing seen. */
function pollRancher<T>(wait: RancherWait, what: string, look: () => Promise<Observation<T>>, stalled: (last: T | undefined, seconds: number) => ProvisionerError): Promise<T> {
  return until(
    polling(() => look(), wait.pollIntervalMs ?? defaultPollIntervalMs),
    {
      what,
      onStall: (last, ms) => stalled(last?.value, Math.round(ms / 1000)),
      signal: wait.signal,
      ...(wait.noProgressTimeoutMs ? { noProgressTimeoutMs: wait.noProgressTimeoutMs } : {}),
    },
  );
}

/** The management (v3) cluster name behind Rancher's cluster: its own name (v3), or the `status.clusterName` Rancher writes (v1), waited for. */
export async function waitForManagementName(rancher: KubeClient, query: RancherClusterQuery, wait: RancherWait): Promise<string> {
  let shown = '';
  return pollRancher(
    wait,
    "Rancher to pick up its cluster",
    async () => {
      const cluster = await findRancherCluster(rancher, query);
      if (!cluster) throw new ExternalError(`No ${queryText(query)} any more: it was deleted while waiting`, { hint: 'Run the command again to create it anew.' });
      const line = JSON.stringify(clusterEvent(cluster));
      if (line !== shown) wait.sink.emit(clusterEvent(cluster));
      shown = line;
      const name = managementClusterName(cluster);
      return name ? { state: 'done', value: name, progress: name } : { state: 'waiting', value: describeRancherCluster(cluster), progress: line };
    },
    (last, seconds) =>
      new ExternalError(`Rancher has not picked up ${last ?? queryText(query)}: no status.clusterName after ${seconds} s`, {
        hint: "Rancher's controllers make a management cluster for each provisioning cluster: check that Rancher runs (its pods and log on the local cluster), then run the command again.",
      }),
  );
}

/**
 * The manifest URL of the management cluster `clusterName`'s registration token: a token in
 * namespace `clusterName` whose spec.clusterName names it, got or created (named
 * `default-token`, as Rancher names a cluster's first), then waited for until Rancher fills
 * `status.manifestUrl`. A `{token}` placeholder is replaced from the token's Secret. The
 * URL holds the token: never log it.
 */
export async function registrationManifestUrl(rancher: KubeClient, clusterName: string, wait: RancherWait): Promise<string> {
  type TokenObject = KubeObject & { spec?: { clusterName?: string }; status?: { manifestUrl?: string; tokenSecretName?: string } };
  const token = await pollRancher<TokenObject | string>(
    wait,
    `the registration token of ${clusterName}`,
    async () => {
      const tokens = await rancher.list<TokenObject>(managementApiVersion, 'ClusterRegistrationToken', { namespace: clusterName });
      const found = tokens.find((t) => t.spec?.clusterName === clusterName && !t.metadata.deletionTimestamp);
      if (found) {
        return found.status?.manifestUrl
          ? { state: 'done', value: found, progress: 'manifest URL set' }
          : { state: 'waiting', value: `ClusterRegistrationToken ${clusterName}/${found.metadata.name} has no status.manifestUrl yet`, progress: `token ${found.metadata.name}` };
      }
      try {
        await rancher.create({ apiVersion: managementApiVersion, kind: 'ClusterRegistrationToken', metadata: { name: defaultTokenName, namespace: clusterName }, spec: { clusterName } });
        return { state: 'waiting', value: `ClusterRegistrationToken ${clusterName}/${defaultTokenName} was created; Rancher has not filled its status.manifestUrl yet`, progress: 'token created' };
      } catch (error) {
        // Rancher makes the namespace with the cluster; a token it made meanwhile is found on the next look.
        if (error instanceof KubeApiError && (error.reason === 'AlreadyExists' || error.isNotFound || error.isTransient)) {
          return { state: 'waiting', value: `namespace ${clusterName} or its registration token is not there yet (${error.reason})`, progress: error.reason };
        }
        throw error;
      }
    },
    (last, seconds) =>
      new ExternalError(`Rancher did not provide a registration manifest for ${clusterName} within ${seconds} s without progress: ${typeof last === 'string' ? last : 'no token'}`, {
        hint: "Rancher makes the namespace and fills the token's manifestUrl once its server-url setting is set: check that setting and Rancher's log, then run the command again.",
      }),
  );
  if (typeof token === 'string') throw new ExternalError(token);
  const url = token.status!.manifestUrl!;
  if (!url.includes('{token}')) return url;
  const secretName = token.status?.tokenSecretName;
  const secret = secretName ? await rancher.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: secretName, namespace: clusterName } }) : undefined;
  const value = secret?.data?.['token'];
  if (!value) {
    throw new ExternalError(`The manifest URL of ClusterRegistrationToken ${clusterName}/${token.metadata.name} needs its token, but Secret ${clusterName}/${secretName ?? '(none named)'} has no data key "token"`, {
      hint: 'Wait for Rancher to write the Secret, then run the command again.',
    });
  }
  return url.replaceAll('{token}', encodeURIComponent(Buffer.from(value, 'base64').toString('utf8')));
}

/** The PEM of Rancher's CA (Setting `cacerts`), or undefined when it is empty (a public CA: the system's CAs verify it). */
export async function rancherCaPem(rancher: KubeClient): Promise<string | undefined> {
  const setting = await rancher.get<KubeObject & { value?: string; default?: string }>({ apiVersion: managementApiVersion, kind: 'Setting', metadata: { name: caSettingName } });
  const pem = (setting?.value || setting?.default || '').trim();
  return pem ? `${pem}\n` : undefined;
}

/** Until Rancher reports its cluster for `query` Ready; the stall names the cluster and its blocking condition. */
export async function waitForRancherReady(rancher: KubeClient, query: RancherClusterQuery, wait: RancherWait): Promise<KubeObject> {
  let seen: KubeObject | undefined;
  const ready = await pollRancher<KubeObject | undefined>(
    wait,
    "Rancher's cluster to be Ready",
    async () => {
      const cluster = await findRancherCluster(rancher, query);
      if (!cluster) return { state: 'waiting', value: undefined, progress: 'none' };
      seen = cluster;
      const event = clusterEvent(cluster);
      const progress = JSON.stringify(event);
      wait.sink.emit(event);
      return isRancherClusterReady(cluster) ? { state: 'done', value: cluster, progress } : { state: 'waiting', value: cluster, progress };
    },
    (_last, seconds) => {
      const blocking = seen ? blockingCondition(seen) : undefined;
      return new ExternalError(
        seen
          ? `${describeRancherCluster(seen)} is not Ready after ${seconds} s without progress${blocking ? `: ${blocking.type}=${blocking.status}${blocking.reason ? ` ${blocking.reason}` : ''}${blocking.message ? ` (${blocking.message})` : ''}` : ''}`
          : `Rancher has no ${queryText(query)} after ${seconds} s`,
        {
          hint: "Rancher's agent in the workload cluster (namespace cattle-system) must reach Rancher's server-url: look at its log, fix what it reports, then run the command again (it resumes).",
        },
      );
    },
  );
  return ready!;
}

/** Deletes every Rancher cluster of `query` (ADR 0008's custom deletion: labels, no owner references) and waits until they are gone. Returns what was deleted. */
export async function deleteRancherClusters(rancher: KubeClient, query: RancherClusterQuery, wait: RancherWait): Promise<string[]> {
  const found = await findRancherClusters(rancher, query);
  for (const cluster of found) await rancher.delete(cluster);
  if (found.length === 0) return [];
  await pollRancher(
    wait,
    "Rancher's cluster to be deleted",
    async () => {
      const left = await findRancherClusters(rancher, query);
      for (const cluster of left) wait.sink.emit({ ...clusterEvent(cluster), phase: 'Deleting' });
      return left.length === 0 ? { state: 'done', value: [], progress: '' } : { state: 'waiting', value: left, progress: JSON.stringify(left.map((c) => [c.metadata.name, c.metadata.finalizers])) };
    },
    (left, seconds) =>
      new ExternalError(`Rancher has not finished deleting ${(left ?? []).map(describeRancherCluster).join(', ')} after ${seconds} s without progress`, {
        details: (left ?? []).map((c) => `${c.metadata.name}: finalizers ${(c.metadata.finalizers ?? []).join(', ') || 'none'}`),
        hint: "Rancher removes its finalizers once it has cleaned up: check Rancher's log, then run destroy cluster again.",
      }),
  );
  return found.map(describeRancherCluster);
}
