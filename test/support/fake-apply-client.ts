/**
 * A test double of ApplyClient for the apply engine's unit tests: an in-memory store of
 * objects with label-selector lists, served kinds, failure injection, and a log of every
 * call with the number in flight. Server-side apply is modelled as "the object becomes
 * what was sent, plus server metadata and whatever others added" (enough for planning:
 * the engine compares only the fields it sets).
 */
import { KubeApiError, type ApplyOptions, type KubeObject, type ListOptions } from '../../src/kube/client.js';
import { groupKind, objectKey, type ApplyClient } from '../../src/apply/client.js';

export interface FakeCall {
  op: 'apply' | 'list' | 'delete';
  /** Object key for apply and delete; `group/Kind` for list. */
  key: string;
  dryRun?: boolean;
  labelSelector?: string;
  namespace?: string;
  /** Calls in flight when this one started, itself included. */
  inFlight: number;
}

/** Decides whether a call fails: return an error to throw it. `attempt` counts calls of this op on this key, from 1. */
export type FailureRule = (call: FakeCall, attempt: number) => Error | undefined;

export class FakeApplyClient implements ApplyClient {
  readonly objects = new Map<string, KubeObject>();
  readonly calls: FakeCall[] = [];
  /** `group/Kind`s the server does not serve; lists and applies of them fail with 404. */
  readonly unserved = new Set<string>();
  failure: FailureRule | undefined;
  maxInFlight = 0;
  private inFlight = 0;
  private resourceVersion = 1;
  private readonly attempts = new Map<string, number>();

  /** Stores an object as if someone else created it. */
  put(obj: KubeObject): void {
    this.objects.set(objectKey(obj), structuredClone({ ...obj, metadata: { uid: `uid-${this.resourceVersion}`, resourceVersion: String(this.resourceVersion++), ...obj.metadata } }));
  }

  get(obj: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>): KubeObject | undefined {
    return this.objects.get(objectKey(obj));
  }

  callsOf(op: FakeCall['op']): FakeCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  async apply<T extends KubeObject>(obj: T, options: ApplyOptions = {}): Promise<T> {
    return this.run({ op: 'apply', key: objectKey(obj), ...(options.dryRun ? { dryRun: true } : {}) }, () => {
      if (this.unserved.has(groupKind(obj.apiVersion, obj.kind))) throw new KubeApiError(404, 'NotFound', `the server does not serve ${obj.kind} in ${obj.apiVersion}`);
      const existing = this.objects.get(objectKey(obj));
      const stored = structuredClone({
        ...existing,
        ...obj,
        metadata: { ...obj.metadata, uid: existing?.metadata.uid ?? `uid-${this.resourceVersion}`, resourceVersion: String(this.resourceVersion++) },
      }) as T;
      if (!options.dryRun) this.objects.set(objectKey(obj), stored);
      return stored;
    });
  }

  async list<T extends KubeObject>(apiVersion: string, kind: string, options: ListOptions = {}): Promise<T[]> {
    const gk = groupKind(apiVersion, kind);
    return this.run({ op: 'list', key: gk, ...(options.labelSelector ? { labelSelector: options.labelSelector } : {}), ...(options.namespace ? { namespace: options.namespace } : {}) }, () => {
      if (this.unserved.has(gk)) throw new KubeApiError(404, 'NotFound', `the server does not serve ${kind} in ${apiVersion}`);
      const [labelKey, labelValue] = options.labelSelector ? options.labelSelector.split('=') : [];
      return [...this.objects.values()]
        .filter((o) => groupKind(o.apiVersion, o.kind) === gk)
        .filter((o) => !options.namespace || o.metadata.namespace === options.namespace)
        .filter((o) => !labelKey || o.metadata.labels?.[labelKey] === labelValue)
        .map((o) => structuredClone({ ...o, apiVersion }) as T);
    });
  }

  async delete(ref: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>): Promise<boolean> {
    return this.run({ op: 'delete', key: objectKey(ref) }, () => this.objects.delete(objectKey(ref)));
  }

  private async run<T>(call: Omit<FakeCall, 'inFlight'>, body: () => T): Promise<T> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const recorded: FakeCall = { ...call, inFlight: this.inFlight };
    this.calls.push(recorded);
    try {
      await new Promise((resolve) => setImmediate(resolve)); // let other calls start: concurrency is observable
      const attemptKey = `${call.op}:${call.key}:${call.dryRun ? 'dry' : ''}`;
      const attempt = (this.attempts.get(attemptKey) ?? 0) + 1;
      this.attempts.set(attemptKey, attempt);
      const error = this.failure?.(recorded, attempt);
      if (error) throw error;
      return body();
    } finally {
      this.inFlight -= 1;
    }
  }
}
