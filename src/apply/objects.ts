/**
 * The applies of `create cluster`, through the desired-set engine (src/apply): the
 * preflight plans the whole set and dry-runs it against the real CRDs and webhooks;
 * each stage applies its part without pruning; the last stage plans the whole set again
 * with pruning, so objects a new generation dropped (a removed machine pool) are
 * deleted, and nothing else is.
 */
import { dryRunPlan, executePlan, formatPlan, planApply, type KindRef } from './index.js';
import { ownershipMetadata, type DesiredSetOwner } from '../config/index.js';
import type { FieldProblem } from '../errors.js';
import { log, type EventSink } from '../events.js';
import type { KubeClient, KubeObject } from '../kube/client.js';

export interface ApplyRequest {
  owner: DesiredSetOwner;
  sink: EventSink;
  signal: AbortSignal;
  /**
   * Kinds listed for pruning even when the new generation has none of them (a removed
   * last worker pool must still delete its MachineDeployment and templates): the
   * platform's (platforms' `prunableKinds`).
   */
  prunableKinds: readonly KindRef[];
}

/** Objects from user-added files join the set, so later generations can prune them too. */
function withOwnership(objects: readonly KubeObject[], owner: DesiredSetOwner): KubeObject[] {
  const meta = ownershipMetadata(owner);
  return objects.map((o) => ({
    ...o,
    metadata: {
      ...o.metadata,
      annotations: { ...meta.annotations, ...(o.metadata.annotations ?? {}) },
      labels: { ...meta.labels, ...(o.metadata.labels ?? {}) },
    },
  }));
}

/** Applies one stage's objects (no pruning). */
export async function applyObjects(client: KubeClient, objects: readonly KubeObject[], request: ApplyRequest, options: { prune?: boolean; all?: readonly KubeObject[] } = {}): Promise<void> {
  const set = { owner: request.owner, objects: withOwnership(options.all ?? objects, request.owner) };
  const plan = await planApply(client, set, { sink: request.sink, signal: request.signal, ...(options.prune ? { extraKinds: request.prunableKinds } : {}) });
  log(request.sink, 'debug', formatPlan(plan));
  await executePlan(client, plan, { sink: request.sink, signal: request.signal, prune: options.prune ?? false });
}

/** Dry-runs the whole set; returns one problem per object the server refused. Writes nothing. */
export async function dryRunObjects(client: KubeClient, objects: readonly KubeObject[], request: ApplyRequest): Promise<{ problems: FieldProblem[]; planText: string }> {
  const set = { owner: request.owner, objects: withOwnership(objects, request.owner) };
  const plan = await planApply(client, set, { sink: request.sink, signal: request.signal, extraKinds: request.prunableKinds });
  const report = await dryRunPlan(client, plan, { sink: request.sink, signal: request.signal });
  return {
    problems: report.problems.map((p) => ({ path: p.key, message: p.message })),
    planText: formatPlan(plan),
  };
}
