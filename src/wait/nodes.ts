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
import type { KubeClient, KubeObject } from '../kube/client.js';
import { until, type Observation } from '../progress/until.js';
import { snapshotObjects, watching, type Snapshot } from './waiter.js';

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

const nodeKind = { apiVersion: 'v1', kind: 'Node' };

/** Until the workload cluster's API lists `expected` Ready nodes (or registered ones, with `ready: false`). */
export async function waitForReadyNodes(workload: KubeClient, expected: number, options: ReadyNodesOptions): Promise<void> {
  const requireReady = options.ready ?? true;
  const state = requireReady ? 'Ready' : 'registered';
  const judge = (snapshot: Snapshot): Observation<number> => {
    let ready = 0;
    for (const n of snapshotObjects<NodeObject>(snapshot, nodeKind)) if (!requireReady || n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ready++;
    return { state: ready >= expected ? 'done' : 'waiting', value: ready, progress: `${ready} of ${expected} node(s) ${state}` };
  };
  // Not answering yet is something to wait through, not a failure: the stall deadline bounds it.
  const unanswered = (error: unknown): Observation<number> => ({ state: 'waiting', value: 0, progress: `the workload cluster's API at ${workload.server} does not answer: ${messageOf(error)}` });
  const ready = await until(watching(workload, [nodeKind], judge, { unanswered, pollMs: options.pollMs ?? 1000 }), {
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
