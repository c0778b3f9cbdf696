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
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
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
 * How `watching` rides out an API that does not answer (a workload cluster's server that
 * is still starting, or restarting): a list or watch that fails is reported through
 * `unanswered` and tried again after `pollMs`. Without it such a failure fails the wait.
 */
export interface WhileUnanswered<T> {
  /** The observation to report for a failed list or watch; its `progress` says what failed. */
  unanswered: (error: unknown) => Observation<T>;
  /** Pause before listing again after a failure, or after a watch that ended within this long of its list. */
  pollMs: number;
}

/**
 * A source for `until` that lists, then watches, every kind in `kinds`, and judges the
 * objects after the lists and after every change, once every kind has been listed. A watch
 * the server ends is started again from a fresh list, which is judged too: it holds what
 * changed while no watch ran.
 */
export function watching<T>(
  client: KubeClient,
  kinds: readonly WatchedKind[],
  judge: (snapshot: Snapshot) => Observation<T>,
  whileUnanswered?: WhileUnanswered<T>,
): ObservationSource<T> {
  return (observe, fail) => {
    const snapshot = new Map<string, Map<string, KubeObject>>();
    const stops = new Map<string, () => void>();
    const retries = new Set<NodeJS.Timeout>();
    let stopped = false;
    const reevaluate = () => {
      // A kind not listed yet is unknown, not empty: judging it empty could end a wait for deletions.
      if (stopped || snapshot.size < kinds.length) return;
      let observation: Observation<T>;
      try {
        observation = judge(snapshot);
      } catch (error) {
        return fail(error);
      }
      observe(observation);
    };
    const retryLater = (kind: WatchedKind, pollMs: number) => {
      const timer = setTimeout(() => {
        retries.delete(timer);
        start(kind);
      }, pollMs);
      retries.add(timer);
    };
    const start = (kind: WatchedKind): void => {
      if (stopped) return;
      startWatch(kind).then(reevaluate, (error: unknown) => {
        if (stopped) return;
        if (!whileUnanswered) return fail(error);
        observe(whileUnanswered.unanswered(error));
        retryLater(kind, whileUnanswered.pollMs);
      });
    };
    const startWatch = async (kind: WatchedKind): Promise<void> => {
      const key = kindKey(kind);
      const listedAt = Date.now();
      // List first, then watch from the list's resourceVersion: a deletion between the two is
      // still seen. (A watch without one starts "now": an object deleted in that gap stayed in
      // the snapshot until the next re-list, minutes later, and a destroy's wait stalled on it.)
      // A resourceVersion the server no longer has ends the watch (410), and this lists again.
      const listed = await client.listVersioned(kind.apiVersion, kind.kind, kind.namespace ? { namespace: kind.namespace } : {});
      const objects = new Map(listed.items.map((obj) => [snapshotKey(obj), obj]));
      snapshot.set(key, objects);
      const path = await client.collectionPath(kind.apiVersion, kind.kind, kind.namespace);
      if (stopped) return;
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
        (error) => {
          if (stopped) return;
          if (!whileUnanswered) return start(kind);
          // A resourceVersion the server no longer keeps (410 Gone) is no failure to report: list again.
          const gone = error instanceof KubeApiError && error.statusCode === 410;
          if (error && !gone) observe(whileUnanswered.unanswered(error));
          // A server that ends every watch at once is not asked again in a loop.
          if ((error && !gone) || Date.now() - listedAt < whileUnanswered.pollMs) retryLater(kind, whileUnanswered.pollMs);
          else start(kind);
        },
      );
      if (stopped) stop();
      else stops.set(key, stop);
    };
    for (const kind of kinds) start(kind);
    return () => {
      stopped = true;
      for (const timer of retries) clearTimeout(timer);
      for (const stop of stops.values()) stop();
    };
  };
}
