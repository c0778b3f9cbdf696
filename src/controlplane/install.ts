/**
 * Installs the providers' components into the local API server: namespaces and CRDs
 * first (waiting, on the one waiting primitive, until every CRD is Established), then — once the controllers serve
 * their webhooks — the webhook configurations and the clusterctl inventory. Every
 * webhook is rewritten to the local controller on loopback (webhooks.ts). Applying is
 * server-side and idempotent, so a restart re-applies with whatever ports it got.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { mapLimit, sleep, withRetry, type RetryPolicy } from '../concurrency.js';
import { resolveCacheDir, type CacheOptions } from '../embedded/cache.js';
import { InfrastructureError } from '../errors.js';
import { writeFileAtomic } from '../files.js';
import type { EventSink } from '../events.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { until, type Observation } from '../progress/until.js';
import { watching, type Snapshot } from '../wait/waiter.js';
import { lightenCrd } from './crds.js';
import { rewriteWebhooks, type WebhookEndpoints } from './webhooks.js';

export interface ProviderComponents {
  provider: string;
  namespace: string;
  objects: KubeObject[];
}

/**
 * A provider's component manifest, parsed. The parse is kept as JSON in the cache
 * (`<cache>/components/<sha256 of the YAML>.json`, see resolveCacheDir): the YAML parser
 * takes 1.8-3.8 s of the event loop for Cluster API's 1.2 MB file on a loaded 2-core machine,
 * JSON 57 ms (2026-11-27, load 23), and a local control plane's start reads 2.7-4.5 MB of
 * them while etcd and the API server boot. Keyed by content, a cached parse is never stale;
 * one that does not read back is parsed again, and a cache that cannot be written is skipped.
 */
export async function loadComponents(provider: string, namespace: string, file: string, options: Pick<CacheOptions, 'cacheDir' | 'env'> = {}): Promise<ProviderComponents> {
  const text = await readFile(file, 'utf8');
  const cached = path.join(resolveCacheDir(options), 'components', `${createHash('sha256').update(text).digest('hex')}.json`);
  const kept = await readFile(cached, 'utf8').then(
    (json) => {
      try {
        const parsed = JSON.parse(json) as unknown;
        return Array.isArray(parsed) ? (parsed as KubeObject[]) : undefined;
      } catch {
        return undefined;
      }
    },
    () => undefined,
  );
  if (kept) return { provider, namespace, objects: kept };
  const objects = parseAllDocuments(text)
    .map((doc) => doc.toJSON() as unknown)
    .filter((o): o is KubeObject => typeof o === 'object' && o !== null && 'kind' in o);
  await mkdir(path.dirname(cached), { recursive: true })
    .then(() => writeFileAtomic(cached, JSON.stringify(objects)))
    .catch(() => undefined); // a read-only or full cache: the next start parses again
  return { provider, namespace, objects };
}

const isWebhookConfiguration = (o: KubeObject) => o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration';
const isLate = (o: KubeObject) => isWebhookConfiguration(o) || o.kind === 'Provider';

/** How many objects are applied at once. Default 8: enough to hide round-trips, little load on a 2-core machine. */
const applyConcurrency = 8;

/**
 * Retries of one object: 10 attempts, 200 ms doubling to 2 s (about 13 s in all), for a
 * webhook whose server just started, a conflict, or a kind not discovered yet.
 */
const applyRetryPolicy: RetryPolicy = { maxAttempts: 10, initialDelayMs: 200, maxDelayMs: 2_000 };

/** Applies `objects` with bounded parallelism, retrying transient failures (discovery is reset before each retry). */
export async function applyAll(client: KubeClient, objects: readonly KubeObject[], signal?: AbortSignal): Promise<void> {
  await mapLimit(
    objects,
    applyConcurrency,
    async (obj) => {
      const result = await withRetry(() => client.apply(obj), {
        policy: applyRetryPolicy,
        isRetryable: (error) => error instanceof KubeApiError && (error.isTransient || error.isConflict || error.isNotFound),
        sleep,
        onRetry: () => client.resetDiscovery(),
        ...(signal ? { signal } : {}),
      });
      if (result.ok) return;
      signal?.throwIfAborted();
      throw result.error;
    },
    signal,
  );
  signal?.throwIfAborted();
}

/** Namespaces and CRDs (with conversion webhooks already pointing at loopback); waits until every CRD is Established. */
export async function installCrds(
  client: KubeClient,
  components: readonly ProviderComponents[],
  endpoints: WebhookEndpoints,
  caPem: string,
  options: { signal?: AbortSignal; sink?: EventSink; /** Default `crdNoProgressTimeoutMs`. */ noProgressTimeoutMs?: number } = {},
): Promise<string[]> {
  // CRDs go in without their schemas' documentation: crds.ts says what that saves and costs.
  // A provider's manager ClusterRole is `management install`'s (its pods' rules); the local controllers use the admin kubeconfig.
  const early = components.flatMap((c) => c.objects.filter((o) => !isLate(o) && o.kind !== 'ClusterRole').map((o) => lightenCrd(rewriteWebhooks(o, endpoints, caPem))));
  const namespaces = early.filter((o) => o.kind === 'Namespace');
  const rest = early.filter((o) => o.kind !== 'Namespace');
  const crdNames = rest.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name);
  const stalled = namesAcceptedNotEstablished(await client.list<KubeObject & CrdStatus>('apiextensions.k8s.io/v1', 'CustomResourceDefinition'), crdNames);
  await applyAll(client, namespaces, options.signal);
  await applyAll(client, rest, options.signal);
  await requeueForEstablishing(client, stalled, options.signal);
  await waitForEstablished(client, crdNames, options.noProgressTimeoutMs ?? crdNoProgressTimeoutMs, options.signal);
  client.resetDiscovery();
  return crdNames;
}

/** Webhook configurations and the clusterctl Provider inventory; call once every controller serves its webhooks. */
export async function installWebhooksAndInventory(
  client: KubeClient,
  components: readonly ProviderComponents[],
  endpoints: WebhookEndpoints,
  caPem: string,
  options: { signal?: AbortSignal } = {},
): Promise<number> {
  const late = components.flatMap((c) => c.objects.filter(isLate).map((o) => rewriteWebhooks(o, endpoints, caPem)));
  await applyAll(client, late, options.signal);
  return late.length;
}

interface CrdStatus {
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/**
 * The named CRDs whose names an API server accepted but that it never marked Established.
 * An API server stopped between those two steps (a start interrupted, then resumed) leaves them so,
 * and the next server does not finish them: its establishing controller is queued only by a CRD's
 * update events, and a restart delivers adds, so they wait for the informer's 5-minute resync
 * (apiextensions-apiserver, customresource_handler.go `updateCustomResourceDefinition`).
 */
export function namesAcceptedNotEstablished(crds: readonly (KubeObject & CrdStatus)[], names: readonly string[]): string[] {
  const wanted = new Set(names);
  const isTrue = (crd: CrdStatus, type: string) => crd.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
  return crds.filter((crd) => wanted.has(crd.metadata.name) && isTrue(crd, 'NamesAccepted') && !isTrue(crd, 'Established')).map((crd) => crd.metadata.name);
}

/** Annotation whose change gives each stalled CRD the update event that queues it for establishing. */
export const requeuedAtAnnotation = 'provisioner.dev/establishing-requeued-at';

/** One metadata write per CRD: an update event, so the API server's establishing controller takes it up now. */
async function requeueForEstablishing(client: KubeClient, names: readonly string[], signal?: AbortSignal): Promise<void> {
  const now = new Date().toISOString();
  await mapLimit(
    names,
    8,
    (name) => client.mergePatch({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name } }, { metadata: { annotations: { [requeuedAtAnnotation]: now } } }),
    signal,
  );
}

/** Default time without another CRD becoming Established before the install fails: 3 minutes (each takes about a second). */
export const crdNoProgressTimeoutMs = 180_000;

/** Until every named CRD reports Established=True, on a list-then-watch of CRDs; progress is one more CRD Established. */
export async function waitForEstablished(client: KubeClient, names: readonly string[], noProgressTimeoutMs: number, signal?: AbortSignal): Promise<void> {
  const crds = { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition' };
  const judge = (snapshot: Snapshot): Observation<string[]> => {
    const seen = snapshot.get(`${crds.apiVersion}/${crds.kind}`);
    const pending = names.filter((name) => {
      const crd = seen?.get(`/${name}`) as (KubeObject & CrdStatus) | undefined;
      return !crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
    return { state: pending.length === 0 ? 'done' : 'waiting', value: pending, progress: pending.join(',') };
  };
  await until(watching(client, [crds], judge), {
    what: 'the CRDs to be Established',
    noProgressTimeoutMs,
    ...(signal ? { signal } : {}),
    onStall: (last, stalledMs) => {
      const pending = last?.value ?? names;
      return new InfrastructureError(`${pending.length} CRD(s) not Established, with no progress for ${Math.round(stalledMs / 1000)} s: ${pending.slice(0, 5).join(', ')}`, {
        hint: 'Look at logs/kube-apiserver.log in the install directory.',
      });
    },
  });
}
