/**
 * Waiting on Kubernetes objects with watches (no polling loops), on the one waiting
 * primitive (`progress/until.ts`): the deadline moves, and expires only when nothing the
 * user would see changed for `noProgressTimeoutMs`.
 * A terminal failure the evaluator recognises (a failed machine, a terminal condition
 * reason) fails the wait at once, naming the object, its condition and message — an
 * install never sits out a timeout on a machine that already failed.
 */
import type { ProvisionerError } from '../errors.js';
import type { EventSink, ObjectEvent } from '../events.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { until, type Observation, type ObservationSource } from '../progress/until.js';

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

/** The snapshot's key of a kind's objects. */
function kindKey(kind: Pick<WatchedKind, 'apiVersion' | 'kind'>): string {
  return `${kind.apiVersion}/${kind.kind}`;
}

/** The objects of one watched kind in `snapshot` (none when the kind is not watched or has none). */
export function snapshotObjects<T extends KubeObject = KubeObject>(snapshot: Snapshot, kind: Pick<WatchedKind, 'apiVersion' | 'kind'>): T[] {
  return [...(snapshot.get(kindKey(kind))?.values() ?? [])] as T[];
}

export function snapshotKey(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

/**
 * Resolves with the final verdict when `evaluate` says done; rejects with its error
 * when it says failed, with `onStall(...)` on lack of progress, with InterruptedError
 * when `signal` aborts. Progress is any change in the objects as the user sees them
 * (phases, readiness, blocking conditions, object count), never a resourceVersion alone.
 */
export function waitFor(client: KubeClient, options: WaitOptions): Promise<Verdict> {
  const shown = new Map<string, string>();
  const judge = (snapshot: Snapshot): Observation<Verdict> => {
    const verdict = options.evaluate(snapshot);
    for (const obj of verdict.objects) {
      const key = `${obj.kind}/${obj.namespace ?? ''}/${obj.name}`;
      const line = JSON.stringify(obj);
      if (shown.get(key) !== line) {
        shown.set(key, line);
        options.events.emit(obj);
      }
    }
    const progress = JSON.stringify(verdict.objects);
    return verdict.state === 'failed' ? { state: 'failed', value: verdict, progress, error: verdict.error } : { state: verdict.state, value: verdict, progress };
  };
  return until(watching(client, options.kinds, judge), {
    what: options.what,
    onStall: (last, stalledMs) => options.onStall(last?.value ?? { state: 'waiting', objects: [] }, stalledMs),
    ...(options.noProgressTimeoutMs !== undefined ? { noProgressTimeoutMs: options.noProgressTimeoutMs } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.fatal ? { fatal: options.fatal } : {}),
  });
}

/**
 * A source for `until` that lists, then watches, every kind in `kinds`, and judges the
 * objects after the list and after every change. A watch the server ends is started
 * again from a fresh list, which is judged too: it holds what changed while no watch ran.
 */
export function watching<T>(client: KubeClient, kinds: readonly WatchedKind[], judge: (snapshot: Snapshot) => Observation<T>): ObservationSource<T> {
  return (observe, fail) => {
    const snapshot = new Map<string, Map<string, KubeObject>>();
    const stops: (() => void)[] = [];
    let stopped = false;
    const reevaluate = () => {
      if (stopped) return;
      let observation: Observation<T>;
      try {
        observation = judge(snapshot);
      } catch (error) {
        return fail(error);
      }
      observe(observation);
    };
    const startWatch = async (kind: WatchedKind): Promise<void> => {
      const key = kindKey(kind);
      const objects = snapshot.get(key) ?? new Map<string, KubeObject>();
      snapshot.set(key, objects);
      // List first, then watch from the list's resourceVersion: a deletion between the two is
      // still seen. (A watch without one starts "now": an object deleted in that gap stayed in
      // the snapshot until the next re-list, minutes later, and a destroy's wait stalled on it.)
      // A resourceVersion the server no longer has ends the watch (410), and this lists again.
      const listed = await client.listVersioned(kind.apiVersion, kind.kind, kind.namespace ? { namespace: kind.namespace } : {});
      objects.clear();
      for (const obj of listed.items) objects.set(snapshotKey(obj), obj);
      const path = await client.collectionPath(kind.apiVersion, kind.kind, kind.namespace);
      const stop = await client.watch(
        path,
        { allowWatchBookmarks: true, ...(listed.resourceVersion ? { resourceVersion: listed.resourceVersion } : {}) },
        (phase, obj) => {
          if (phase === 'BOOKMARK' || phase === 'ERROR') return;
          const full = { ...obj, apiVersion: kind.apiVersion, kind: kind.kind };
          if (phase === 'DELETED') objects.delete(snapshotKey(full));
          else objects.set(snapshotKey(full), full);
          reevaluate();
        },
        () => {
          if (!stopped) void startWatch(kind).then(reevaluate, fail);
        },
      );
      if (stopped) stop();
      else stops.push(stop);
    };
    Promise.all(kinds.map(startWatch)).then(reevaluate, fail);
    return () => {
      stopped = true;
      for (const stop of stops) stop();
    };
  };
}
