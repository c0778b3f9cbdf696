/**
 * The workload cluster's own word on its nodes. Cluster API conditions can be stale —
 * copied by a pivot, or left from before every process was restarted — so a healthy
 * cluster is one whose API answers with every expected node Ready. This lists the nodes,
 * then watches them, so the wait ends the moment the last one turns Ready; while the API
 * does not answer (its server may be (re)starting, and a watch cannot start on a server
 * that does not answer) it looks again every `pollMs`. It waits through the one waiting
 * primitive: it fails once what it sees has not changed for the no-progress timeout.
 */
import { MachinesError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { sleep } from '../concurrency.js';
import { until, type Observation, type ObservationSource } from '../progress/until.js';

export interface ReadyNodesOptions {
  sink: EventSink;
  signal: AbortSignal;
  /** Fails when what the workload API answers did not change for this long. Default 10 min. */
  noProgressTimeoutMs?: number;
  /** Pause before looking again after the API did not answer (or a watch it ended at once). Default 1 s. */
  pollMs?: number;
  /** Count nodes that are Ready; false: nodes that exist at all (a cluster without a pod network). Default true. */
  ready?: boolean;
}

type NodeObject = KubeObject & { status?: { conditions?: { type: string; status: string }[] } };

/** Until the workload cluster's API lists `expected` Ready nodes (or registered ones, with `ready: false`). */
export async function waitForReadyNodes(workload: KubeClient, expected: number, options: ReadyNodesOptions): Promise<void> {
  const requireReady = options.ready ?? true;
  const state = requireReady ? 'Ready' : 'registered';
  const judge = (nodes: Iterable<NodeObject>): Observation<number> => {
    let ready = 0;
    for (const n of nodes) if (!requireReady || n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ready++;
    return { state: ready >= expected ? 'done' : 'waiting', value: ready, progress: `${ready} of ${expected} node(s) ${state}` };
  };
  // Not answering yet is something to wait through, not a failure: the stall deadline bounds it.
  const unanswered = (error: unknown): Observation<number> => ({ state: 'waiting', value: 0, progress: `the workload cluster's API at ${workload.server} does not answer: ${messageOf(error)}` });
  const ready = await until(watchingNodes(workload, judge, unanswered, options.pollMs ?? 1000), {
    what: `${expected} ${state} node(s) in the workload cluster`,
    signal: options.signal,
    ...(options.noProgressTimeoutMs !== undefined ? { noProgressTimeoutMs: options.noProgressTimeoutMs } : {}),
    onProgress: (seen) => {
      if (seen.state === 'waiting') log(options.sink, 'info', `Waiting: ${seen.progress}`);
    },
    onStall: (last, stalledMs) =>
      new MachinesError(`No progress for ${Math.round(stalledMs / 1000)} s: ${last?.progress ?? `the workload cluster's API at ${workload.server} never answered`}`, {
        hint: "Run `provisioner gather bootstrap` and read the infrastructure provider's log; then run the same command again to resume.",
      }),
  });
  log(options.sink, 'info', `The workload cluster's API answers with ${ready} ${state} node(s)`);
}

/**
 * Lists the nodes and judges them, then judges them again at every change a watch from that
 * list brings; when the watch ends it lists again. A list or watch that fails is judged by
 * `unanswered` and tried again after `pollMs`, as is a watch that ended sooner than that (so a
 * server that closes every watch at once is not asked in a loop).
 */
function watchingNodes(
  workload: KubeClient,
  judge: (nodes: Iterable<NodeObject>) => Observation<number>,
  unanswered: (error: unknown) => Observation<number>,
  pollMs: number,
): ObservationSource<number> {
  return (observe, fail) => {
    const stopped = new AbortController();
    let stopWatch: (() => void) | undefined;
    const loop = async () => {
      while (!stopped.signal.aborted) {
        const started = Date.now();
        try {
          const listed = await workload.listVersioned<NodeObject>('v1', 'Node');
          if (stopped.signal.aborted) return;
          const nodes = new Map(listed.items.map((n) => [n.metadata.name, n]));
          observe(judge(nodes.values()));
          const path = await workload.collectionPath('v1', 'Node');
          // A `done` judged above stops this source: no watch is started then.
          if (stopped.signal.aborted) return;
          const ended = await new Promise<Error | undefined>((resolve, reject) => {
            workload
              .watch(
                path,
                { allowWatchBookmarks: true, ...(listed.resourceVersion ? { resourceVersion: listed.resourceVersion } : {}) },
                (phase, obj) => {
                  if (phase === 'BOOKMARK' || phase === 'ERROR') return;
                  if (phase === 'DELETED') nodes.delete(obj.metadata.name);
                  else nodes.set(obj.metadata.name, obj as NodeObject);
                  observe(judge(nodes.values()));
                },
                resolve,
              )
              .then((stop) => {
                stopWatch = stop;
                if (stopped.signal.aborted) stop();
              }, reject);
            stopped.signal.addEventListener('abort', () => resolve(undefined), { once: true });
          });
          // A resourceVersion the server no longer keeps (410 Gone) is no failure to report: list again.
          if (ended && !(ended instanceof KubeApiError && ended.statusCode === 410)) throw ended;
          if (Date.now() - started < pollMs) await sleep(pollMs, stopped.signal);
        } catch (error) {
          if (stopped.signal.aborted) return;
          observe(unanswered(error));
          await sleep(pollMs, stopped.signal);
        }
      }
    };
    loop().catch(fail);
    return () => {
      stopped.abort();
      stopWatch?.();
    };
  };
}
