/**
 * Rancher's registration manifest: the YAML a ClusterRegistrationToken's `manifestUrl`
 * serves (Rancher's agent, its credentials and RBAC). Fetched over HTTPS verifying Rancher's
 * CA, parsed whole before anything is created (a garbage answer creates nothing), then
 * created object by object in the workload cluster, where AlreadyExists counts as done (as
 * Turtles' `createImportManifest` does), so a second run finishes what a first one began.
 *
 * The URL carries the registration token in its path: messages show only its origin.
 */
import https from 'node:https';
import { parseAllDocuments } from 'yaml';
import { sleep, withRetry, type RetryPolicy } from '../../concurrency.js';
import { ExternalError, InterruptedError, messageOf } from '../../errors.js';
import type { EventSink } from '../../events.js';
import { KubeApiError, describeRef, type KubeClient, type KubeObject } from '../../kube/client.js';

/** Largest manifest accepted: 16 MiB (Rancher's is about 10 KiB). */
const maxManifestBytes = 16 * 1024 * 1024;
/** How long the download may take: 60 s. */
const manifestTimeoutMs = 60_000;
/** Retries of one create on a transient answer: 6 attempts, 500 ms doubling to 5 s. */
const createRetryPolicy: RetryPolicy = { maxAttempts: 6, initialDelayMs: 500, maxDelayMs: 5_000 };

/** `url` without its path (which holds the token): `https://rancher.example:443/…`. */
export function redactUrl(url: string): string {
  try {
    return `${new URL(url).origin}/…`;
  } catch {
    return '(an unparseable URL)';
  }
}

/** TLS failures that mean the certificate could not be verified against the CA we trust. */
const certificateErrors = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

export interface FetchOptions {
  /** PEM of the CA to trust (Rancher's `cacerts` setting). Default: the system's CAs. */
  caPem?: string;
  /** What the manifest is for, in messages (e.g. `management.cattle.io/v3 Cluster c-abcde`). */
  what: string;
  signal?: AbortSignal;
}

/** Downloads the manifest at `url`; an ExternalError names the origin and what went wrong (TLS, status, size, no answer). */
export async function fetchManifest(url: string, options: FetchOptions): Promise<string> {
  const shown = redactUrl(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ExternalError(`Rancher's registration manifest URL for ${options.what} is not a URL`, { hint: "Check Rancher's server-url setting, then run the command again." });
  }
  if (parsed.protocol !== 'https:') {
    throw new ExternalError(`Rancher's registration manifest URL for ${options.what} (${shown}) is not HTTPS; provisioner fetches it only over verified TLS`, {
      hint: "Set Rancher's server-url setting to its https:// address, then run the command again.",
    });
  }
  return new Promise<string>((resolve, reject) => {
    const request = https.get(parsed, { timeout: manifestTimeoutMs, ...(options.caPem ? { ca: options.caPem } : {}), ...(options.signal ? { signal: options.signal } : {}) }, (response) => {
      const code = response.statusCode ?? 0;
      if (code < 200 || code >= 300) {
        response.resume();
        return reject(
          new ExternalError(`Rancher answered HTTP ${code} for the registration manifest of ${options.what} (${shown})`, {
            hint: 'Check that Rancher is up and the registration token still exists, then run the command again.',
          }),
        );
      }
      const chunks: Buffer[] = [];
      let length = 0;
      response.on('data', (chunk: Buffer) => {
        length += chunk.length;
        if (length > maxManifestBytes) {
          request.destroy();
          reject(new ExternalError(`The registration manifest of ${options.what} (${shown}) is larger than ${maxManifestBytes / 1024 / 1024} MiB; nothing was created`, { hint: "Check Rancher's server-url setting: it should point at Rancher itself." }));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      response.on('error', (error) => reject(downloadError(error, shown, options)));
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${manifestTimeoutMs / 1000} s`)));
    request.on('error', (error) => reject(downloadError(error, shown, options)));
  });
}

function downloadError(error: Error, shown: string, options: FetchOptions): ExternalError | InterruptedError {
  if (options.signal?.aborted) return new InterruptedError(`Interrupted while fetching the registration manifest of ${options.what}`, { hint: 'Run the same command again to resume.' });
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (certificateErrors.has(code)) {
    return new ExternalError(`Rancher's certificate at ${shown} could not be verified (${code}) while fetching the registration manifest of ${options.what}`, {
      cause: error,
      hint: options.caPem
        ? "The CA in Rancher's cacerts setting did not sign the certificate that address serves: fix the setting (or Rancher's server-url), then run the command again."
        : "Rancher's cacerts setting is empty, so the system's CAs were used: put the PEM of the CA that signed Rancher's certificate in that setting, then run the command again.",
    });
  }
  return new ExternalError(`Fetching the registration manifest of ${options.what} from ${shown} failed: ${messageOf(error)}`, {
    cause: error,
    hint: "Check that this machine reaches Rancher's server-url, then run the command again.",
  });
}

/**
 * Every object of `text`, in order, or an ExternalError listing each document that is not a
 * Kubernetes object (YAML syntax, a scalar such as an HTML page, a missing kind or name);
 * `List` documents give their items.
 */
export function parseManifest(text: string, source: string, what: string): KubeObject[] {
  const problems: string[] = [];
  const objects: KubeObject[] = [];
  const documents = parseAllDocuments(text, { prettyErrors: true });
  const list = Array.isArray(documents) ? documents : [];
  list.forEach((document, index) => {
    const label = `document ${index + 1}`;
    if (document.errors.length > 0) {
      problems.push(...document.errors.slice(0, 3).map((e) => `${label}: ${e.message.split('\n')[0]}`));
      return;
    }
    const value = document.toJS({ maxAliasCount: 100 }) as unknown;
    if (value === null || value === undefined) return;
    const items = isObject(value) && value['kind'] === 'List' && Array.isArray(value['items']) ? (value['items'] as unknown[]) : [value];
    items.forEach((item, itemIndex) => {
      const at = items.length > 1 || item !== value ? `${label}, item ${itemIndex + 1}` : label;
      const problem = objectProblem(item);
      if (problem) problems.push(`${at}: ${problem}`);
      else objects.push(item as KubeObject);
    });
  });
  if (problems.length === 0 && objects.length === 0) problems.push('no object at all (an empty answer)');
  if (problems.length > 0) {
    throw new ExternalError(`The registration manifest Rancher served for ${what} (${source}) is not a Kubernetes manifest; nothing was created in the workload cluster`, {
      details: problems.slice(0, 10),
      hint: "Rancher (or a proxy in front of it) answered with something else: check Rancher's server-url setting and that the address serves Rancher, then run the command again.",
    });
  }
  return objects;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function objectProblem(value: unknown): string | undefined {
  if (!isObject(value)) return `expected an object with apiVersion, kind and metadata, got ${Array.isArray(value) ? 'a list' : typeof value === 'string' ? 'text' : typeof value}`;
  if (typeof value['apiVersion'] !== 'string' || value['apiVersion'] === '') return 'no apiVersion';
  if (typeof value['kind'] !== 'string' || value['kind'] === '') return 'no kind';
  const metadata = value['metadata'];
  if (!isObject(metadata) || typeof metadata['name'] !== 'string' || metadata['name'] === '') return `${value['kind']} without metadata.name`;
  return undefined;
}

/** Namespaces and CRDs first (what later objects live in or are); otherwise the manifest's order. */
function creationOrder(objects: readonly KubeObject[]): KubeObject[] {
  const rank = (o: KubeObject) => (o.kind === 'Namespace' ? 0 : o.kind === 'CustomResourceDefinition' ? 1 : 2);
  return objects.map((o, i) => ({ o, i })).sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i).map(({ o }) => o);
}

export interface CreatedManifest {
  created: string[];
  existing: string[];
}

/**
 * Creates every object in the workload cluster; one that exists already is left as it is.
 * On a failure, the ExternalError lists what this run created, what existed, the object that
 * failed with the server's answer, and what was not tried, so nothing half-applied goes unreported.
 */
export async function createManifestObjects(workload: KubeClient, objects: readonly KubeObject[], options: { sink: EventSink; signal: AbortSignal; what: string }): Promise<CreatedManifest> {
  const ordered = creationOrder(objects);
  const result: CreatedManifest = { created: [], existing: [] };
  const task = { type: 'progress' as const, task: 'rancher:manifest', label: "Creating Rancher's agent objects in the workload cluster", total: ordered.length, unit: 'objects' as const };
  for (const [index, obj] of ordered.entries()) {
    options.signal.throwIfAborted();
    const attempt = await withRetry(() => workload.create(obj), {
      policy: createRetryPolicy,
      isRetryable: (error) => error instanceof KubeApiError && error.isTransient,
      sleep,
      signal: options.signal,
    });
    if (attempt.ok) result.created.push(describeRef(obj));
    else if (attempt.error instanceof KubeApiError && attempt.error.statusCode === 409 && attempt.error.reason === 'AlreadyExists') result.existing.push(describeRef(obj));
    else {
      options.signal.throwIfAborted();
      const notTried = ordered.slice(index + 1).map(describeRef);
      throw new ExternalError(`Creating the registration manifest's objects of ${options.what} in the workload cluster failed at ${describeRef(obj)}: ${messageOf(attempt.error)}`, {
        cause: attempt.error,
        details: [
          `created by this run (${result.created.length}): ${result.created.join(', ') || 'none'}`,
          `already there (${result.existing.length}): ${result.existing.join(', ') || 'none'}`,
          `failed: ${describeRef(obj)}`,
          `not tried (${notTried.length}): ${notTried.join(', ') || 'none'}`,
        ],
        hint: 'Fix the cause named above and run the same command again: objects that exist are kept, the rest are created. To undo instead, delete the created objects listed here from the workload cluster.',
      });
    }
    options.sink.emit({ ...task, current: index + 1, done: index + 1 === ordered.length });
  }
  return result;
}
