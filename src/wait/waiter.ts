/**
 * Waiting on Kubernetes objects with watches (no polling loops) and a deadline that
 * moves: it expires only when nothing observable changed for `noProgressTimeoutMs`.
 * A terminal failure the evaluator recognises (a failed machine, a terminal condition
 * reason) fails the wait at once, naming the object, its condition and message — an
 * install never sits out a timeout on a machine that already failed.
 */
import { InterruptedError, ProvisionerError } from '../errors.js';
import type { EventSink, ObjectEvent } from '../events.js';
import type { KubeClient, KubeObject } from '../kube/client.js';

export interface WatchedKind {
  apiVersion: string;
  kind: string;
  namespace?: string;
}

/** What an evaluator concludes from the current objects. */
export type Verdict =
  | { state: 'waiting'; /** The objects as the user should see them. */ objects: ObjectEvent[] }
  | { state: 'done'; objects: ObjectEvent[] }
  | { state: 'failed'; objects: ObjectEvent[]; error: ProvisionerError };

/** Objects by kind, then by `namespace/name`. */
export type Snapshot = ReadonlyMap<string, ReadonlyMap<string, KubeObject>>;

export interface WaitOptions {
  /** Stage name for messages, e.g. `control plane`. */
  what: string;
  kinds: readonly WatchedKind[];
  evaluate: (snapshot: Snapshot) => Verdict;
  /** Fails when nothing changed for this long. Default 10 min. */
  noProgressTimeoutMs?: number;
  /** Builds the error thrown on lack of progress, from the last verdict. */
  onStall: (last: Verdict, stalledMs: number) => ProvisionerError;
  events: EventSink;
  signal?: AbortSignal;
  /** Rejecting this promise fails the wait at once (e.g. a controller crashed past its restart budget). */
  fatal?: Promise<never>;
}

/** Default time without any observable change before a wait fails: 10 minutes. */
export const defaultNoProgressTimeoutMs = 10 * 60_000;

export function snapshotKey(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

/**
 * Resolves with the final verdict when `evaluate` says done; rejects with its error
 * when it says failed, with `onStall(...)` on lack of progress, with InterruptedError
 * when `signal` aborts.
 */
export async function waitFor(client: KubeClient, options: WaitOptions): Promise<Verdict> {
  const timeoutMs = options.noProgressTimeoutMs ?? defaultNoProgressTimeoutMs;
  const snapshot = new Map<string, Map<string, KubeObject>>();
  const stops: (() => void)[] = [];
  let last: Verdict = { state: 'waiting', objects: [] };
  let lastFingerprint = '';
  let lastProgress = Date.now();
  const shown = new Map<string, string>();

  return new Promise<Verdict>((resolve, reject) => {
    let settled = false;
    let stallTimer: NodeJS.Timeout | undefined;
    const finish = (error: unknown, verdict?: Verdict) => {
      if (settled) return;
      settled = true;
      clearTimeout(stallTimer);
      options.signal?.removeEventListener('abort', onAbort);
      for (const stop of stops) stop();
      if (error) reject(error);
      else resolve(verdict!);
    };
    const armStallTimer = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => finish(options.onStall(last, Date.now() - lastProgress)), timeoutMs);
    };
    const onAbort = () => finish(new InterruptedError(`Interrupted while waiting for ${options.what}`, { hint: 'Run the same command again to resume.' }));
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    options.fatal?.catch((error: unknown) => finish(error));

    const reevaluate = () => {
      if (settled) return;
      let verdict: Verdict;
      try {
        verdict = options.evaluate(snapshot);
      } catch (error) {
        return finish(error);
      }
      last = verdict;
      for (const obj of verdict.objects) {
        const key = `${obj.kind}/${obj.namespace ?? ''}/${obj.name}`;
        const line = JSON.stringify(obj);
        if (shown.get(key) !== line) {
          shown.set(key, line);
          options.events.emit(obj);
        }
      }
      // Progress is any change in what the user would see: phases, readiness, blocking conditions, object count.
      const fingerprint = JSON.stringify(verdict.objects);
      if (fingerprint !== lastFingerprint) {
        lastFingerprint = fingerprint;
        lastProgress = Date.now();
        armStallTimer();
      }
      if (verdict.state === 'done') finish(undefined, verdict);
      else if (verdict.state === 'failed') finish(verdict.error);
    };

    const startWatch = async (kind: WatchedKind): Promise<void> => {
      const key = `${kind.apiVersion}/${kind.kind}`;
      const objects = snapshot.get(key) ?? new Map<string, KubeObject>();
      snapshot.set(key, objects);
      // List first (the watch then starts from the list's resourceVersion, losing nothing).
      const listed = await client.list(kind.apiVersion, kind.kind, kind.namespace ? { namespace: kind.namespace } : {});
      objects.clear();
      for (const obj of listed) objects.set(snapshotKey(obj), obj);
      const path = await client.collectionPath(kind.apiVersion, kind.kind, kind.namespace);
      const stop = await client.watch(
        path,
        { allowWatchBookmarks: true },
        (phase, obj) => {
          if (phase === 'BOOKMARK' || phase === 'ERROR') return;
          const full = { ...obj, apiVersion: kind.apiVersion, kind: kind.kind };
          if (phase === 'DELETED') objects.delete(snapshotKey(full));
          else objects.set(snapshotKey(full), full);
          reevaluate();
        },
        () => {
          // The server ends watches after a while; start again from a fresh list, and judge
          // that list: it holds what changed while no watch ran.
          if (!settled) void startWatch(kind).then(reevaluate, (error: unknown) => finish(error));
        },
      );
      if (settled) stop();
      else stops.push(stop);
    };

    armStallTimer();
    Promise.all(options.kinds.map(startWatch)).then(reevaluate, (error: unknown) => finish(error));
  });
}
