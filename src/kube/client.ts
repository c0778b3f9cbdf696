/**
 * The only module that imports the Kubernetes client. Everything else talks to a
 * cluster through `KubeClient`, with plain object types and typed errors, so the
 * client library can be swapped or upgraded in one place.
 */
import https from 'node:https';
import * as k8s from '@kubernetes/client-node';
import { ExternalError } from '../errors.js';

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

/** A failed API call, with the server's status reason and the object it was about. */
export class KubeApiError extends ExternalError {
  constructor(
    readonly statusCode: number,
    readonly reason: string,
    message: string,
    readonly object?: string,
    cause?: unknown,
  ) {
    super(object ? `${object}: ${message}` : message, { cause });
  }

  get isNotFound(): boolean {
    return this.statusCode === 404;
  }
  get isConflict(): boolean {
    return this.statusCode === 409;
  }
  /** Worth retrying: the server or a webhook was not ready, or it throttled us. */
  get isTransient(): boolean {
    return this.statusCode === 429 || this.statusCode >= 500 || this.statusCode === 0 || /connection refused|webhook|ECONNRESET|EOF/i.test(this.message);
  }
}

export function describeRef(obj: Pick<KubeObject, 'kind' | 'metadata'>): string {
  return `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
}

function translate(error: unknown, object?: string): KubeApiError {
  if (error instanceof KubeApiError) return error;
  if (error instanceof k8s.ApiException) {
    let reason = '';
    let message = String(error.message);
    const body: unknown = typeof error.body === 'string' ? safeJson(error.body) : error.body;
    if (body && typeof body === 'object') {
      const status = body as { reason?: string; message?: string };
      reason = status.reason ?? '';
      message = status.message ?? message;
    }
    return new KubeApiError(error.code, reason, message, object, error);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new KubeApiError(0, 'ConnectionError', message, object, error);
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
}

export type WatchPhase = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

/** Exposes the library's cached discovery (`resource`), which it keeps protected. */
class ObjectApi extends k8s.KubernetesObjectApi {
  static forConfig(config: k8s.KubeConfig): ObjectApi {
    const api = config.makeApiClient(ObjectApi);
    api.setDefaultNamespace(config);
    return api;
  }

  resourceOf(apiVersion: string, kind: string): Promise<k8s.V1APIResource | undefined> {
    return this.resource(apiVersion, kind);
  }
}

// The library types creationTimestamp as Date; on the wire, and in our types, it is a string.
type LibObject = k8s.KubernetesObject;
const asLib = (obj: unknown): LibObject => obj as LibObject;

export class KubeClient {
  private readonly objects: ObjectApi;

  private constructor(readonly config: k8s.KubeConfig) {
    this.objects = ObjectApi.forConfig(config);
  }

  static fromFile(kubeconfigPath: string): KubeClient {
    const config = new k8s.KubeConfig();
    config.loadFromFile(kubeconfigPath);
    return new KubeClient(config);
  }

  get server(): string {
    return this.config.getCurrentCluster()?.server ?? '';
  }

  /** Server-side apply with our field manager; returns the object as stored (or as it would be, on dry-run). */
  async apply<T extends KubeObject>(obj: T, options: ApplyOptions = {}): Promise<T> {
    // Server-side apply refuses managedFields and resourceVersion in the request body.
    const body = stripForApply(obj);
    try {
      return (await this.objects.patch(
        asLib(body),
        undefined,
        options.dryRun ? 'All' : undefined,
        fieldManager,
        options.force ?? true,
        k8s.PatchStrategy.ServerSideApply,
      )) as T;
    } catch (error) {
      throw translate(error, describeRef(obj));
    }
  }

  async get<T extends KubeObject>(ref: Pick<KubeObject, 'apiVersion' | 'kind'> & { metadata: { name: string; namespace?: string } }): Promise<T | undefined> {
    try {
      return (await this.objects.read(asLib(ref) as LibObject & { metadata: { name: string } })) as unknown as T;
    } catch (error) {
      const e = translate(error, describeRef(ref as KubeObject));
      if (e.isNotFound) return undefined;
      throw e;
    }
  }

  async list<T extends KubeObject>(apiVersion: string, kind: string, options: ListOptions = {}): Promise<T[]> {
    const items: T[] = [];
    let continueToken: string | undefined;
    try {
      do {
        const page = await this.objects.list(apiVersion, kind, options.namespace, undefined, undefined, undefined, undefined, options.labelSelector, 500, continueToken);
        for (const item of page.items) items.push({ ...(item as unknown as T), apiVersion, kind });
        continueToken = page.metadata?._continue || undefined;
      } while (continueToken);
    } catch (error) {
      throw translate(error, `${kind} list`);
    }
    return items;
  }

  /** Deletes; a missing object is not an error. Returns false when it was already gone. */
  async delete(ref: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>, options: { propagation?: 'Foreground' | 'Background' | 'Orphan' } = {}): Promise<boolean> {
    try {
      await this.objects.delete(asLib(ref), undefined, undefined, undefined, undefined, options.propagation ?? 'Background');
      return true;
    } catch (error) {
      const e = translate(error, describeRef(ref as KubeObject));
      if (e.isNotFound) return false;
      throw e;
    }
  }

  /** GET a raw API path (e.g. `/readyz`, `/version`); returns the body text. */
  async raw(path: string, timeoutMs = 10_000): Promise<string> {
    const cluster = this.config.getCurrentCluster();
    if (!cluster) throw new KubeApiError(0, 'NoCluster', 'kubeconfig has no current cluster');
    const url = new URL(path, cluster.server);
    const options: https.RequestOptions = { method: 'GET', timeout: timeoutMs };
    await this.config.applyToHTTPSOptions(options);
    return new Promise((resolve, reject) => {
      const request = https.request(url, options, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          const code = response.statusCode ?? 0;
          if (code >= 200 && code < 300) resolve(text);
          else reject(new KubeApiError(code, response.statusMessage ?? '', text.slice(0, 500), path));
        });
      });
      request.on('timeout', () => request.destroy(new Error(`timed out after ${timeoutMs} ms`)));
      request.on('error', (error) => reject(translate(error, path)));
      request.end();
    });
  }

  /**
   * Watches a collection; calls onEvent for each change until the returned stop()
   * is called or the server closes the watch (then onDone runs with the error, if any).
   */
  async watch(
    apiPath: string,
    query: Record<string, string | number | boolean | undefined>,
    onEvent: (phase: WatchPhase, obj: KubeObject) => void,
    onDone: (error?: Error) => void,
  ): Promise<() => void> {
    const watcher = new k8s.Watch(this.config);
    const controller = await watcher.watch(
      apiPath,
      query,
      (phase, obj) => onEvent(phase as WatchPhase, obj as KubeObject),
      (error: unknown) => onDone(error ? translate(error, apiPath) : undefined),
    );
    return () => controller.abort();
  }

  /** Resolves the REST path of a kind's collection, e.g. `/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters`. */
  async collectionPath(apiVersion: string, kind: string, namespace?: string): Promise<string> {
    const resource = await this.objects.resourceOf(apiVersion, kind);
    if (!resource) throw new KubeApiError(404, 'NotFound', `the server does not serve ${kind} in ${apiVersion}`);
    const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    return resource.namespaced && namespace ? `${base}/namespaces/${namespace}/${resource.name}` : `${base}/${resource.name}`;
  }
}

function stripForApply<T extends KubeObject>(obj: T): T {
  const { managedFields: _m, resourceVersion: _r, uid: _u, creationTimestamp: _c, generation: _g, ...metadata } = obj.metadata;
  return { ...obj, metadata } as T;
}
