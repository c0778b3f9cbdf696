/**
 * The only module that imports the Kubernetes client. Everything else talks to a
 * cluster through `KubeClient`, with plain object types and typed errors, so the
 * client library can be swapped or upgraded in one place.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { sleep, withRetry, type RetryPolicy } from '../concurrency.js';
import { ExternalError } from '../errors.js';
import { currentCluster, staticCredentials, type KubeconfigCluster, type StaticCredentials } from './kubeconfig-file.js';

/**
 * The client library, imported only for a kubeconfig whose user runs a plugin (exec,
 * auth-provider) or names what `staticCredentials` does not read: the import evaluates the
 * library's generated API client, which we never call, and took 0.65 s of the 0.9 s a command
 * needed to start and 1 s of CPU (docs/benchmarks.md, "startup"). Which cluster a kubeconfig
 * names, and certificates and tokens, are read without it (kubeconfig-file.ts).
 */
let clientLibrary: Promise<typeof import('@kubernetes/client-node')> | undefined;

function loadClientLibrary(): Promise<typeof import('@kubernetes/client-node')> {
  return (clientLibrary ??= import('@kubernetes/client-node'));
}

/** How long the server keeps a watch open before the caller re-lists and watches again. */
const watchTimeoutSeconds = 300;

/** Retries of a read that gets a transient answer (429, 503): 6 attempts, 400 ms doubling to 5 s, or the server's Retry-After up to 5 s. */
const readRetryPolicy: RetryPolicy = { maxAttempts: 6, initialDelayMs: 400, maxDelayMs: 5_000 };

/** Field manager recorded on every server-side apply (`kubectl get -o yaml --show-managed-fields` shows it). */
export const fieldManager = 'provisioner';

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  deletionTimestamp?: string;
  creationTimestamp?: string;
  [key: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Any Kubernetes object, as JSON. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** One entry of a Status's `details.causes`: what exactly failed, e.g. a field or a webhook call. */
export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

/** The part of a `Status` body (what the API server sends with every failure) that errors carry. */
interface StatusBody {
  code?: number;
  reason?: string;
  message?: string;
  details?: { causes?: StatusCause[] };
}

/** `reason` of a request that got no HTTP answer at all (refused, reset, timed out). */
const noAnswerReason = 'ConnectionError';

/**
 * The API server's words for an admission webhook that answered "no" (apiserver
 * `webhookerrors.ToStatusErr`): a final answer, whatever status code the webhook chose.
 */
const webhookDenial = /admission webhook "[^"]*" denied the request/;
/**
 * Server-side apply's answer to a field the schema does not declare or a value of the
 * wrong type: a 500 InternalError (kubernetes/kubernetes#139253, #122480), although the
 * object sent is at fault and the same request always fails again.
 */
const invalidPatch = /failed to create typed patch object/;

/** A failed API call, with the server's status reason and the object it was about. */
export class KubeApiError extends ExternalError {
  /** The server's Retry-After, when it sent one. */
  retryAfterSeconds: number | undefined;
  /** The Status's `details.causes`, when it had any. */
  causes: readonly StatusCause[] = [];

  constructor(
    readonly statusCode: number,
    readonly reason: string,
    message: string,
    readonly object?: string,
    cause?: unknown,
  ) {
    super(object ? `${object}: ${message}` : message, { cause });
  }

  /**
   * The error for a failure the server reported: its HTTP status and, when `status` is a
   * `Status` (it is for every API error), the Status's reason, message and causes;
   * `fallback` where it is not.
   */
  static fromStatus(statusCode: number, status: unknown, fallback: { reason: string; message: string }, object?: string): KubeApiError {
    const body: StatusBody = status !== null && typeof status === 'object' ? (status as StatusBody) : {};
    const error = new KubeApiError(statusCode, body.reason ?? fallback.reason, body.message ?? fallback.message, object);
    if (Array.isArray(body.details?.causes)) error.causes = body.details.causes;
    return error;
  }

  get isNotFound(): boolean {
    return this.statusCode === 404;
  }
  get isConflict(): boolean {
    return this.statusCode === 409;
  }
  /** An admission webhook denied the request: final, never retried. */
  get isDenied(): boolean {
    return this.says(webhookDenial);
  }
  /** Server-side apply refused the object's fields or values (a 500, but the object's fault): final. */
  get isInvalidPatch(): boolean {
    return this.says(invalidPatch);
  }
  /**
   * Worth retrying: no answer at all (the server is not serving yet, or the connection
   * broke), throttled (429), or a server-side failure (5xx), such as a webhook the server
   * cannot call yet (a 500 InternalError "failed calling webhook … connect: connection
   * refused"), storage not ready, or a timeout. Never a refusal of the request itself: any
   * other 4xx, a webhook's denial (whatever its code) or an invalid server-side apply.
   * Conflicts (409) are the caller's call (`isConflict`).
   */
  get isTransient(): boolean {
    if (this.isDenied || this.isInvalidPatch) return false;
    if (this.statusCode === 0) return this.reason === noAnswerReason;
    return this.statusCode === 429 || this.statusCode >= 500;
  }

  /** Whether the server's message or one of its causes matches. */
  private says(pattern: RegExp): boolean {
    return pattern.test(this.message) || this.causes.some((c) => pattern.test(c.message ?? ''));
  }
}

export function describeRef(obj: Pick<KubeObject, 'kind' | 'metadata'>): string {
  return `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
}

function translate(error: unknown, object?: string): KubeApiError {
  if (error instanceof KubeApiError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new KubeApiError(0, noAnswerReason, message, object, error);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export interface ApplyOptions {
  /** Validate against the server (schemas, webhooks) without persisting. Default: false. */
  dryRun?: boolean;
  /** Take ownership of fields other managers set. Default: true (we are the source of truth for what we generate). */
  force?: boolean;
}

export interface ListOptions {
  namespace?: string;
  labelSelector?: string;
  /**
   * Read the API server's watch cache as it is (`resourceVersion=0`): no wait, possibly a
   * little stale. Default false: the latest state, a consistent read, which a busy server
   * answers only once its cache caught up with etcd (seconds under a burst of writes).
   */
  fromCache?: boolean;
}

export type WatchPhase = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
}

interface RequestOptions {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  timeoutMs?: number;
  /** Names the object in errors. */
  object?: string;
}

/** Kubernetes API requests made by every client of this process so far (each watch start is one). */
let requestsMade = 0;
export function apiRequestsMade(): number {
  return requestsMade;
}

/** A file's bytes, or base64 data decoded; undefined when neither is given (the library's order: the file first). */
async function fileOrData(file: string | undefined, data: string | undefined): Promise<Buffer | undefined> {
  if (file !== undefined) return readFile(file);
  return data === undefined ? undefined : Buffer.from(data, 'base64');
}

/** What the client library's applyToHTTPSOptions sets for the same user and cluster, less its per-request agent (ours pools). */
async function applyStaticCredentials(options: https.RequestOptions, credentials: StaticCredentials): Promise<void> {
  const [ca, cert, key, tokenFile] = await Promise.all([
    fileOrData(credentials.caFile, credentials.caData),
    fileOrData(credentials.certFile, credentials.certData),
    fileOrData(credentials.keyFile, credentials.keyData),
    credentials.tokenFile === undefined ? undefined : readFile(credentials.tokenFile, 'utf8'),
  ]);
  if (ca) options.ca = ca;
  if (cert) options.cert = cert;
  if (key) options.key = key;
  if (credentials.insecure) options.rejectUnauthorized = false;
  if (credentials.serverName !== undefined) options.servername = credentials.serverName;
  // A token file's trailing newline is no part of the token (client-go trims it too).
  const token = credentials.token ?? tokenFile?.trim();
  if (token !== undefined) options.headers = { ...options.headers, authorization: `Bearer ${token}` };
}

/**
 * A cluster client. Requests go over Node's https with the kubeconfig's credentials,
 * as raw JSON: the client library's typed models drop fields they do not know (such
 * as `x-kubernetes-int-or-string` in CRD schemas), which would corrupt what we apply.
 */
export class KubeClient {
  private readonly agent = new https.Agent({ keepAlive: true, maxSockets: 32 });
  private readonly discovery = new Map<string, Promise<ApiResource[]>>();
  /** The current context's cluster; undefined when the kubeconfig names none (a request then fails with NoCluster). */
  readonly cluster: KubeconfigCluster | undefined;
  /** The user's certificates or token, read without the library; undefined when it needs the library. */
  private readonly staticCredentials: StaticCredentials | undefined;
  /** The library's view of the kubeconfig, for credentials only it reads: loaded by the first request. */
  private libraryCredentials: Promise<KubeConfig> | undefined;

  /** `dir`: the kubeconfig file's directory, against which its relative paths resolve; undefined for text. */
  private constructor(
    private readonly kubeconfig: string,
    private readonly dir: string | undefined,
  ) {
    const document: unknown = parse(kubeconfig);
    const cluster = currentCluster(document, dir);
    this.cluster = 'path' in cluster ? undefined : cluster;
    this.staticCredentials = staticCredentials(document, dir);
  }

  static fromFile(kubeconfigPath: string): KubeClient {
    return new KubeClient(readFileSync(kubeconfigPath, 'utf8'), path.dirname(kubeconfigPath));
  }

  /** A client from kubeconfig text (e.g. a cluster's kubeconfig Secret), never written to disk. */
  static fromText(kubeconfig: string): KubeClient {
    return new KubeClient(kubeconfig, undefined);
  }

  get server(): string {
    return this.cluster?.server ?? '';
  }

  /** Sets `options`' TLS material and headers from the kubeconfig's user (certificates, token, a plugin's credential), as the client library does. */
  private async authorize(options: https.RequestOptions): Promise<void> {
    const credentials = this.staticCredentials;
    if (credentials) return applyStaticCredentials(options, credentials);
    this.libraryCredentials ??= loadClientLibrary().then((k8s) => {
      const config = new k8s.KubeConfig();
      config.loadFromString(this.kubeconfig);
      if (this.dir !== undefined) config.makePathsAbsolute(this.dir);
      return config;
    });
    await (await this.libraryCredentials).applyToHTTPSOptions(options);
  }

  /** Closes idle keep-alive connections, so the process can exit. */
  close(): void {
    this.agent.destroy();
  }

  /** Server-side apply with our field manager; returns the object as stored (or as it would be, on dry-run). */
  async apply<T extends KubeObject>(obj: T, options: ApplyOptions = {}): Promise<T> {
    const path = await this.objectPath(obj);
    return (await this.request({
      method: 'PATCH',
      path,
      query: { fieldManager, force: options.force ?? true, dryRun: options.dryRun ? 'All' : undefined },
      body: stripForApply(obj),
      contentType: 'application/apply-patch+yaml',
      object: describeRef(obj),
    })) as T;
  }

  /**
   * Creates an object with a POST: the way to use `metadata.generateName` (the server picks
   * the name), which server-side apply cannot. Returns the object as stored. An object whose
   * name is taken fails with a 409 (`isConflict`).
   */
  async create<T extends KubeObject>(obj: T): Promise<T> {
    const { name, ...metadata } = stripForApply(obj).metadata;
    const generated = !name && typeof metadata['generateName'] === 'string';
    const described = generated ? `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${String(metadata['generateName'])}*` : describeRef(obj);
    return (await this.request({
      method: 'POST',
      path: await this.collectionPath(obj.apiVersion, obj.kind, obj.metadata.namespace),
      query: { fieldManager },
      body: { ...obj, metadata: name ? { name, ...metadata } : metadata },
      object: described,
    })) as T;
  }

  /**
   * POSTs `body` to a subresource of an object (`token` of a ServiceAccount for a
   * TokenRequest) and returns the answer: a create that `create`, which POSTs to the
   * collection, does not reach.
   */
  async createSubresource<T>(ref: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>, subresource: string, body: unknown): Promise<T> {
    return (await this.request({ method: 'POST', path: `${await this.objectPath(ref)}/${subresource}`, body, object: `${describeRef(ref)} ${subresource}` })) as T;
  }

  /**
   * Server-side apply of an object's status through its status subresource (a copy that
   * keeps the status it had, as `pivot` makes). Only `status` is sent.
   */
  async applyStatus<T extends KubeObject>(obj: T): Promise<T> {
    const body = { apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name: obj.metadata.name, ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}) }, status: obj['status'] };
    return (await this.request({
      method: 'PATCH',
      path: `${await this.objectPath(obj)}/status`,
      query: { fieldManager, force: true },
      body,
      contentType: 'application/apply-patch+yaml',
      object: describeRef(obj),
    })) as T;
  }

  async get<T extends KubeObject>(ref: Pick<KubeObject, 'apiVersion' | 'kind'> & { metadata: { name: string; namespace?: string } }): Promise<T | undefined> {
    try {
      return (await this.request({ method: 'GET', path: await this.objectPath(ref), object: describeRef(ref as KubeObject) })) as T;
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) return undefined;
      throw error;
    }
  }

  async list<T extends KubeObject>(apiVersion: string, kind: string, options: ListOptions = {}): Promise<T[]> {
    return (await this.listVersioned<T>(apiVersion, kind, options)).items;
  }

  /**
   * A list with the collection's resourceVersion at the time of the read: a watch started
   * from it (`resourceVersion` in `watch`'s query) sees every change after the list,
   * deletions included. A watch started without one begins "now" and misses what happened
   * between the list and its start.
   */
  async listVersioned<T extends KubeObject>(apiVersion: string, kind: string, options: ListOptions = {}): Promise<{ items: T[]; resourceVersion: string }> {
    const path = await this.collectionPath(apiVersion, kind, options.namespace);
    const items: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const page = (await this.request({
        method: 'GET',
        path,
        query: { labelSelector: options.labelSelector, limit: 500, continue: continueToken, resourceVersion: options.fromCache ? '0' : undefined },
        object: `${kind} list`,
      })) as { items: T[]; metadata?: { continue?: string; resourceVersion?: string } };
      for (const item of page.items) items.push({ ...item, apiVersion, kind });
      continueToken = page.metadata?.continue || undefined;
      // Every page of one paginated list is read at the first page's resourceVersion.
      resourceVersion ||= page.metadata?.resourceVersion ?? '';
    } while (continueToken);
    return { items, resourceVersion };
  }

  /** Deletes; a missing object is not an error. Returns false when it was already gone. */
  async delete(ref: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>, options: { propagation?: 'Foreground' | 'Background' | 'Orphan' } = {}): Promise<boolean> {
    try {
      await this.request({
        method: 'DELETE',
        path: await this.objectPath(ref),
        body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: options.propagation ?? 'Background' },
        object: describeRef(ref),
      });
      return true;
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) return false;
      throw error;
    }
  }

  /** Merge-patches an object (for metadata such as annotations and finalizers). */
  async mergePatch<T extends KubeObject>(ref: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>, patch: unknown): Promise<T> {
    return (await this.request({
      method: 'PATCH',
      path: await this.objectPath(ref),
      body: patch,
      contentType: 'application/merge-patch+json',
      object: describeRef(ref),
    })) as T;
  }

  /** GET a raw API path (e.g. `/readyz`, `/version`); returns the body text. */
  async raw(path: string, timeoutMs = 10_000): Promise<string> {
    return (await this.request({ method: 'GET', path, timeoutMs, object: path }, true)) as string;
  }

  /** One GET of a raw path, with no retry of a transient answer: a probe that must see a 503 as it is (e.g. `/readyz`). */
  async probe(path: string, timeoutMs = 2_000): Promise<string> {
    requestsMade++;
    return (await this.requestOnce({ method: 'GET', path, timeoutMs, object: path }, true)) as string;
  }

  /**
   * Watches a collection; calls onEvent for each change until the returned stop() is
   * called or the server ends the watch (then onDone runs, with the error if any; not
   * after stop()). Streams newline-delimited JSON over Node's https — the client
   * library's watch aborts every watch after 30 s, whatever the server's timeout.
   */
  async watch(
    apiPath: string,
    query: Record<string, string | number | boolean | undefined>,
    onEvent: (phase: WatchPhase, obj: KubeObject) => void,
    onDone: (error?: Error) => void,
  ): Promise<() => void> {
    const cluster = this.cluster;
    if (!cluster) throw new KubeApiError(0, 'NoCluster', 'kubeconfig has no current cluster');
    const url = new URL(apiPath, cluster.server);
    requestsMade++;
    // The server closes the watch after timeoutSeconds; callers re-list and watch again.
    for (const [key, value] of Object.entries({ timeoutSeconds: watchTimeoutSeconds, ...query, watch: true })) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' } };
    await this.authorize(options);
    let stopped = false;
    let finished = false;
    const done = (error?: Error) => {
      if (stopped || finished) return;
      finished = true;
      onDone(error);
    };
    const request = https.request(url, options, (response) => {
      if ((response.statusCode ?? 0) !== 200) {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () =>
          done(KubeApiError.fromStatus(response.statusCode ?? 0, safeJson(body), { reason: response.statusMessage ?? '', message: body.slice(0, 500) }, apiPath)),
        );
        return;
      }
      let buffered = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffered += chunk;
        let newline: number;
        while ((newline = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (!line || stopped) continue;
          const event = safeJson(line) as { type?: WatchPhase; object?: KubeObject } | undefined;
          if (event?.type === 'ERROR') {
            request.destroy();
            const status = event.object as unknown as StatusBody;
            // A server-side failure reported inside the stream: a Status without a code counts as a 500.
            return done(KubeApiError.fromStatus(status.code ?? 500, status, { reason: 'WatchError', message: 'watch error' }, apiPath));
          }
          if (event?.type && event.object) onEvent(event.type, event.object);
        }
      });
      response.on('end', () => done());
      response.on('error', (error) => done(translate(error, apiPath)));
    });
    request.on('error', (error) => done(translate(error, apiPath)));
    request.end();
    return () => {
      stopped = true;
      request.destroy();
    };
  }

  /** Resolves the REST path of a kind's collection, e.g. `/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters`. */
  async collectionPath(apiVersion: string, kind: string, namespace?: string): Promise<string> {
    const resource = await this.resourceOf(apiVersion, kind);
    const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    return resource.namespaced && namespace ? `${base}/namespaces/${namespace}/${resource.name}` : `${base}/${resource.name}`;
  }

  /** The resource (plural) that serves `kind` in `apiVersion`, from discovery (cached per group version). */
  async resource(apiVersion: string, kind: string): Promise<{ name: string; namespaced: boolean }> {
    const { name, namespaced } = await this.resourceOf(apiVersion, kind);
    return { name, namespaced };
  }

  /** Forgets discovered resources (after installing CRDs). */
  resetDiscovery(): void {
    this.discovery.clear();
  }

  private async objectPath(ref: Pick<KubeObject, 'apiVersion' | 'kind'> & { metadata: { name: string; namespace?: string } }): Promise<string> {
    const resource = await this.resourceOf(ref.apiVersion, ref.kind);
    if (resource.namespaced && !ref.metadata.namespace) {
      throw new KubeApiError(400, 'BadRequest', `${ref.kind} is namespaced but has no metadata.namespace`, describeRef(ref as KubeObject));
    }
    const collection = await this.collectionPath(ref.apiVersion, ref.kind, resource.namespaced ? ref.metadata.namespace : undefined);
    return `${collection}/${encodeURIComponent(ref.metadata.name)}`;
  }

  private async resourceOf(apiVersion: string, kind: string): Promise<ApiResource> {
    let pending = this.discovery.get(apiVersion);
    if (!pending) {
      const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      pending = this.request({ method: 'GET', path, object: `API ${apiVersion}` }).then(
        (list) => ((list as { resources: ApiResource[] }).resources ?? []).filter((r) => !r.name.includes('/')),
        (error: unknown) => {
          // A group version nobody serves (say a deprecated cluster.x-k8s.io/v1beta1): name it, not the discovery path.
          if (error instanceof KubeApiError && error.isNotFound) throw new KubeApiError(404, 'NotFound', `the server does not serve ${kind} in ${apiVersion}`);
          throw error;
        },
      );
      pending.catch(() => this.discovery.delete(apiVersion));
      this.discovery.set(apiVersion, pending);
    }
    const resource = (await pending).find((r) => r.kind === kind);
    if (!resource) {
      this.discovery.delete(apiVersion); // it may appear once a CRD is established
      throw new KubeApiError(404, 'NotFound', `the server does not serve ${kind} in ${apiVersion}`);
    }
    return resource;
  }

  /**
   * Sends a request. Reads (GET) are retried on transient answers — 429; 503, such as
   * "storage is (re)initializing" right after a CRD is established; 504, such as a list
   * the watch cache could not serve fresh in time under a burst of writes ("Too large
   * resource version") — honouring Retry-After, as `readRetryPolicy` says; writes are
   * retried by their callers.
   */
  private async request(options: RequestOptions, text = false): Promise<unknown> {
    const result = await withRetry(
      () => {
        requestsMade++;
        return this.requestOnce(options, text);
      },
      {
        policy: readRetryPolicy,
        isRetryable: (error) => options.method === 'GET' && error instanceof KubeApiError && [429, 503, 504].includes(error.statusCode),
        retryAfterMs: (error) => (error instanceof KubeApiError && error.retryAfterSeconds ? error.retryAfterSeconds * 1000 : undefined),
        sleep,
      },
    );
    if (!result.ok) throw result.error;
    return result.value;
  }

  private async requestOnce(options: RequestOptions, text: boolean): Promise<unknown> {
    const cluster = this.cluster;
    if (!cluster) throw new KubeApiError(0, 'NoCluster', 'kubeconfig has no current cluster');
    const url = new URL(options.path, cluster.server);
    for (const [key, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
    const timeoutMs = options.timeoutMs ?? 60_000;
    const httpsOptions: https.RequestOptions = { method: options.method, agent: this.agent, timeout: timeoutMs, headers: { accept: 'application/json' } };
    await this.authorize(httpsOptions);
    // The library sets a fresh Agent per call, which costs a TLS handshake per request
    // (measured: 300 applies 4.1 s → 1.9 s with reuse). Our keep-alive agent pools by the
    // same TLS options (CA, cert, key) the library put on the request.
    httpsOptions.agent = this.agent;
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    if (payload !== undefined) {
      httpsOptions.headers = { ...httpsOptions.headers, 'content-type': options.contentType ?? 'application/json', 'content-length': Buffer.byteLength(payload) };
    }
    return new Promise((resolve, reject) => {
      const request = https.request(url, httpsOptions, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          const code = response.statusCode ?? 0;
          if (code >= 200 && code < 300) {
            if (text) return resolve(body);
            try {
              resolve(body ? JSON.parse(body) : undefined);
            } catch (error) {
              reject(new KubeApiError(code, 'BadResponse', `unparseable response: ${String(error)}`, options.object));
            }
            return;
          }
          const error = KubeApiError.fromStatus(code, safeJson(body), { reason: response.statusMessage ?? '', message: body.slice(0, 500) }, options.object);
          const retryAfter = Number(response.headers['retry-after']);
          if (Number.isFinite(retryAfter)) error.retryAfterSeconds = retryAfter;
          reject(error);
        });
        response.on('error', (error) => reject(translate(error, options.object)));
      });
      request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      request.on('error', (error) => reject(translate(error, options.object)));
      if (payload !== undefined) request.write(payload);
      request.end();
    });
  }
}

function stripForApply<T extends KubeObject>(obj: T): T {
  const { managedFields: _m, resourceVersion: _r, uid: _u, creationTimestamp: _c, generation: _g, ...metadata } = obj.metadata;
  return { ...obj, metadata } as T;
}
