/**
 * The move of an install's Cluster API objects from its local control plane into a lasting
 * management cluster (`pivotFrom`), journaled in the install's pivot journal, from a source
 * the caller attached and under the caller's directory lock: `provisioner pivot`
 * (services/pivot.ts) and `create cluster --pivot-to` share it.
 */
import path from 'node:path';
import { capiCoreApiVersion } from '../capi.js';
import { removeRecordedControlPlane, stopRecordedControlPlane } from '../controlplane/local-controlplane.js';
import { ExternalError, InternalError, ProvisionerError, UsageError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { recordExternalManagement } from '../installdir/management.js';
import { recordRelativePath } from '../installdir/paths.js';
import { KubeClient, type KubeObject } from '../kube/client.js';
import type { AttachedControlPlane } from '../management/attach.js';
import { countByKind } from './graph.js';
import { phaseIndex, readPivotJournal, writePivotJournal, type PivotJournal, type PivotPhase } from './journal.js';
import { selfMoveSteadyMs, untilSteady } from './steady.js';
import { isSelfManaged } from './target.js';
import { coreKinds, describePlan, discoverMoveKinds, journalFor, planMove, preflight, rollbackPivot, runPivot, type FencedSource, type MovePlan } from './move.js';

export interface PivotRequest {
  dir: string;
  /** Kubeconfig of the target management cluster. */
  toKubeconfig: string;
  /** Print the plan, change nothing. Default false. */
  dryRun?: boolean;
  /** Undo an unfinished move. Default false. */
  rollback?: boolean;
  /** Move only this Cluster (and its objects). Default: every Cluster of the source. */
  clusterName?: string;
  /** Requests in flight at once against either cluster. Default 32 (`defaultConcurrency` of pivot/move.ts). */
  concurrency?: number;
  sink: EventSink;
  signal: AbortSignal;
  /** Called after each phase is journaled (tests inject failures here). Default none. */
  afterPhase?: (phase: PivotPhase) => void | Promise<void>;
}

export interface PivotResult {
  action: 'moved' | 'planned' | 'rolled-back' | 'nothing-to-move';
  phase?: PivotPhase;
  /** Objects by kind, in creation order. */
  kinds: { kind: string; count: number }[];
  clusters: string[];
  /** The plan's lines (dry-run) or a summary. */
  lines: string[];
  resumedFrom?: PivotPhase;
  /** The source control plane was stopped (its controllers ran the machines, and no Cluster is left). */
  sourceStopped: boolean;
  rolledBackObjects?: number;
}

/**
 * A move into the install's own cluster begins only once both API servers answered every probe
 * for 5 s in a row (pivot/steady.ts); other moves go to a cluster that has been serving for a while.
 */
async function steadyBeforeSelfMove(dir: string, toKubeconfig: string, source: KubeClient, target: KubeClient, sink: EventSink, signal: AbortSignal): Promise<void> {
  if (!isSelfManaged(dir, toKubeconfig)) return;
  const started = performance.now();
  await untilSteady([{ name: 'the local control plane', client: source }, { name: 'the cluster', client: target }], { steadyMs: selfMoveSteadyMs, signal });
  log(sink, 'info', `Both API servers answered every probe for ${selfMoveSteadyMs / 1000} s in a row (checked in ${((performance.now() - started) / 1000).toFixed(1)} s): the move begins`);
}

/** A pivot journal with work left: neither done nor rolled back. */
export function isUnfinished(journal: PivotJournal | undefined): journal is PivotJournal {
  return journal !== undefined && journal.phase !== 'done' && !journal.rolledBack;
}

/**
 * Reads the pivot journal of `dir` and checks it fits the request: an unfinished move may
 * only be resumed (or rolled back) against the cluster it started to fill, and a rollback
 * needs an unfinished move.
 */
export async function openPivotJournal(dir: string, toKubeconfig: string, rollback: boolean): Promise<PivotJournal | undefined> {
  const journal = await readPivotJournal(dir);
  if (!isUnfinished(journal)) {
    if (rollback) throw new UsageError(`No unfinished pivot in ${dir} to roll back`, { hint: 'Nothing to do; `provisioner pivot` starts a move.' });
    return journal;
  }
  const target = KubeClient.fromFile(toKubeconfig);
  try {
    if (journal.targetServer !== target.server) {
      throw new UsageError(`An unfinished pivot of ${dir} targets ${journal.targetServer}, not ${target.server}`, {
        hint: `Finish it with --to-kubeconfig ${journal.targetKubeconfig}, or undo it with --rollback and that kubeconfig.`,
      });
    }
  } finally {
    target.close();
  }
  return journal;
}

export interface PivotFromRequest extends Omit<PivotRequest, 'dir'> {
  /** Absolute install directory, whose lock the caller holds. */
  dir: string;
  /** The running source: the install's local control plane. */
  source: AttachedControlPlane;
  /** The install's machines live in the source's infrastructure controller (Platform.lifecycle.machinesInController). */
  machinesInController: boolean;
  /** The journal as the caller read and checked it (openPivotJournal). Default: read and checked here. */
  journal?: PivotJournal | undefined;
  /** Record the target as the install's management cluster once the move is done. Default true; false for the move back of `destroy cluster` (pivot/back.ts). */
  recordTarget?: boolean;
}

/**
 * The move itself, from a source control plane the caller attached and under the caller's
 * directory lock (`pivot` and `create cluster --pivot-to` share it). When the machines live
 * in the source's controllers, the source is stopped once it holds no Cluster, before the
 * target unpauses, so that the target's provider can serve the cluster's endpoint on its port; the
 * source's data stays (`destroy bootstrap` removes it), except after a move into the install's
 * own cluster (`self`), which removes it once the move is done. A finished move records the target
 * as the install's management cluster, so `destroy cluster`, `wait-for` and `create
 * cluster` work against it from then on.
 */
export async function pivotFrom(request: PivotFromRequest): Promise<PivotResult> {
  const { dir, sink, signal, source, machinesInController } = request;
  const toKubeconfig = path.resolve(request.toKubeconfig);
  let journal = 'journal' in request ? request.journal : await openPivotJournal(dir, toKubeconfig, request.rollback ?? false);
  const unfinished = isUnfinished(journal);
  const target = KubeClient.fromFile(toKubeconfig);
  let sourceStopped = false;
  const stopSourceIfEmpty = async () => {
    if (!machinesInController || sourceStopped) return;
    const left = await source.client.list<KubeObject>(capiCoreApiVersion, 'Cluster');
    if (left.length > 0) {
      log(sink, 'warn', `The local control plane still manages ${left.length} other Cluster(s), so it keeps running; the moved cluster's endpoint stays with it until it stops`);
      return;
    }
    await source.stop();
    await stopRecordedControlPlane(dir, sink);
    sourceStopped = true;
    log(sink, 'info', `The local control plane of ${dir} manages no cluster any more and was stopped, so the target's provider can take over the cluster's endpoint; its data stays (destroy bootstrap removes it)`);
  };
  try {
    if (request.rollback) {
      const { deleted } = await rollbackPivot({ source: source.client, target, dir, journal: journal!, sink, signal, ...(request.concurrency ? { concurrency: request.concurrency } : {}) });
      return {
        action: 'rolled-back',
        kinds: [],
        clusters: journal!.clusters.map((c) => `${c.namespace}/${c.name}`),
        lines: [`deleted ${deleted} copied object(s) from the target; source unpaused`],
        sourceStopped: false,
        rolledBackObjects: deleted,
      };
    }

    let resumedFrom: PivotPhase | undefined;
    let plan: MovePlan | undefined;
    if (unfinished) {
      resumedFrom = journal!.phase;
      log(sink, 'info', `Resuming the pivot of ${dir} from phase ${journal!.phase}${journal!.lastError ? ` (it stopped on: ${journal!.lastError})` : ''}`);
      if (request.dryRun) {
        return { action: 'planned', phase: journal!.phase, kinds: kindsOf(journal!), clusters: clusterNames(journal!), lines: [`an unfinished pivot is at phase ${journal!.phase}; running pivot resumes it`], resumedFrom, sourceStopped: false };
      }
      if (phaseIndex(journal!.phase) < phaseIndex('paused')) await steadyBeforeSelfMove(dir, toKubeconfig, source.client, target, sink, signal);
      if (phaseIndex(journal!.phase) < phaseIndex('source-deleted')) await preflight(source.client, target, journal!, await discoverMoveKinds(source.client).then((k) => [...k, ...coreKinds]));
    } else {
      // From the watch cache: what moves is read again, as it is, once the Clusters are paused (replan).
      plan = await planMove(source.client, { ...(request.clusterName !== undefined ? { clusterName: request.clusterName } : {}), ...(request.concurrency ? { concurrency: request.concurrency } : {}), fromCache: true });
      if (plan.clusters.length === 0) {
        return {
          action: 'nothing-to-move',
          kinds: [],
          clusters: [],
          lines: [request.clusterName ? `no Cluster named ${request.clusterName} in the source` : 'the source holds no Cluster'],
          sourceStopped: false,
        };
      }
      journal = journalFor(plan, { kubeconfig: toKubeconfig, server: target.server });
      const lines = describePlan(plan);
      sink.emit({ type: 'progress', task: 'pivot:plan', label: 'Objects to move', current: journal.objects.length, total: journal.objects.length, unit: 'objects', done: true });
      await preflight(source.client, target, journal, plan.kinds);
      if (!request.dryRun) await steadyBeforeSelfMove(dir, toKubeconfig, source.client, target, sink, signal);
      if (request.dryRun) return { action: 'planned', kinds: countByKind([plan.global, ...plan.tiers]), clusters: clusterNames(journal), lines, sourceStopped: false };
      for (const line of lines) log(sink, 'info', `Plan: ${line}`);
      await writePivotJournal(dir, journal);
      await request.afterPhase?.('planned');
    }

    const moving = journal!;
    const kinds = plan?.kinds;
    const replan = async () => {
      const again = await planMove(source.client, { ...(request.clusterName !== undefined ? { clusterName: request.clusterName } : {}), ...(request.concurrency ? { concurrency: request.concurrency } : {}), ...(kinds ? { kinds } : {}) });
      const next = journalFor(again, { kubeconfig: moving.targetKubeconfig, server: moving.targetServer });
      // Only the recorded Clusters: one created meanwhile is not part of this move.
      const recorded = new Set(moving.clusters.map((c) => `${c.namespace}/${c.name}`));
      const objects = next.objects.filter((o) => o.global || recorded.has(`${o.namespace ?? ''}/${o.name}`) || o.kind !== 'Cluster');
      await preflight(source.client, target, { ...moving, objects }, again.kinds);
      if (objects.length !== moving.objects.length) log(sink, 'info', `After pausing, ${objects.length} object(s) move (planned ${moving.objects.length})`);
      return { objects, live: [...again.global, ...again.tiers.flat()] };
    };
    await runPivot({
      replan,
      beforeUnpause: stopSourceIfEmpty,
      source: source.client,
      target,
      dir,
      journal: moving,
      sink,
      signal,
      fence: fenceOf(source),
      ...(request.concurrency ? { concurrency: request.concurrency } : {}),
      ...(request.afterPhase ? { afterPhase: request.afterPhase } : {}),
    });
    // A move finished earlier (journal done) on a resume still stops a source that runs the machines, left running.
    await stopSourceIfEmpty();
    if (request.recordTarget ?? true) await recordExternalManagement(dir, toKubeconfig);
    // A cluster that manages itself needs nothing on this machine: the stopped source's data goes too.
    if (sourceStopped && isSelfManaged(dir, toKubeconfig)) {
      await removeRecordedControlPlane(dir, sink);
      log(sink, 'info', `The cluster manages itself: the local control plane's data was removed from ${dir}`);
    }
    return {
      action: 'moved',
      phase: moving.phase,
      kinds: kindsOf(moving),
      clusters: clusterNames(moving),
      lines: [`moved ${moving.objects.length} object(s) of ${clusterNames(moving).join(', ')} to ${target.server}`],
      ...(resumedFrom ? { resumedFrom } : {}),
      sourceStopped,
    };
  } catch (error) {
    if (error instanceof ProvisionerError) throw error;
    throw new ExternalError(`The pivot failed: ${messageOf(error)}`, {
      cause: error,
      hint: `Run the same command again to resume from where it stopped, or \`provisioner pivot --rollback\` to undo it; the journal is in ${recordRelativePath('pivot')}.`,
    });
  } finally {
    target.close();
  }
}

/** The source's fence; every pivot source is an install's local control plane, which has one. */
function fenceOf(source: AttachedControlPlane): FencedSource {
  if (!source.fence) throw new InternalError('the source of a pivot is not a local control plane (it has no fence)');
  return source.fence;
}

function kindsOf(journal: PivotJournal): { kind: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const o of [...journal.objects].sort((a, b) => a.tier - b.tier)) counts.set(o.kind, (counts.get(o.kind) ?? 0) + 1);
  return [...counts].map(([kind, count]) => ({ kind, count }));
}

function clusterNames(journal: PivotJournal): string[] {
  return journal.clusters.map((c) => `${c.namespace}/${c.name}`);
}

