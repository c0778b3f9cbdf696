/**
 * `provisioner pivot`: moves the Cluster API objects of an install from its local control
 * plane into a lasting management cluster, journaled in `<dir>/.provisioner/pivot.json`.
 *
 * - A journal with unfinished work is resumed from its phase (same target only).
 * - `--rollback` undoes an unfinished move that has not yet deleted from the source.
 * - `--dry-run` prints the plan (objects by kind, in creation order) and changes nothing.
 *
 * The source is the local control plane of the dir: adopted when running, else started
 * from its data with the platform's controllers (detached when the platform's machines live
 * in its controllers). After a move on such a platform the source is stopped once it holds
 * no Cluster; its data stays (`destroy bootstrap` removes it).
 */
import path from 'node:path';
import { exists } from '../files.js';
import { readInstallConfig } from '../assets/index.js';
import { capiCoreApiVersion } from '../capi.js';
import { installConfigFile, installConfigFileName, type InstallConfig } from '../config/index.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { stopRecordedControlPlane } from '../controlplane/local-controlplane.js';
import { ExternalError, InternalError, ProvisionerError, UsageError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { readYamlFile } from '../input-files.js';
import { KubeClient, type KubeObject } from '../kube/client.js';
import { checkKubeconfigFile } from '../kube/kubeconfig-file.js';
import { countByKind } from '../pivot/graph.js';
import { phaseIndex, readPivotJournal, writePivotJournal, type PivotJournal, type PivotPhase } from '../pivot/journal.js';
import { coreKinds, describePlan, discoverMoveKinds, journalFor, planMove, preflight, rollbackPivot, runPivot, type FencedSource, type MovePlan } from '../pivot/move.js';
import { platformOfDocument, type Platform } from '../platforms/index.js';
import { acquireDirLock } from '../process/lock.js';
import { attachManagement, type AttachedControlPlane } from '../management/attach.js';
import { recordExternalManagement } from '../installdir/management.js';
import { recordRelativePath } from '../installdir/paths.js';

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
 * The platform the install config names, read without validating it (the config may have
 * been edited since the cluster was made); undefined when it names none or several.
 */
async function platformOfInstall(dir: string): Promise<Platform | undefined> {
  return platformOfDocument(await readYamlFile(path.join(dir, installConfigFileName), installConfigFile));
}

/**
 * The install config as create cluster ran the source with, so that a pivot that has to start
 * a stopped control plane again (a resume after a kill) runs the cloud controller with its
 * credentials and the forwarder where the hosts' agents reach it. One that no longer
 * validates (edited since) gives undefined, with a warning: the platform's controllers only.
 */
async function sourceConfig(dir: string, sink: EventSink, signal: AbortSignal): Promise<InstallConfig | undefined> {
  try {
    return await readInstallConfig({ dir, sink, signal });
  } catch (error) {
    log(sink, 'warn', `install-config.yaml cannot be read (${messageOf(error)}): a stopped local control plane starts without its credentials files and listen address`);
    return undefined;
  }
}

export async function pivot(request: PivotRequest): Promise<PivotResult> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const layout = controlPlaneLayout(dir);
  const toKubeconfig = path.resolve(request.toKubeconfig);
  await checkKubeconfigFile(toKubeconfig, '--to-kubeconfig');
  if (!(await exists(layout.etcdDataDir))) {
    throw new UsageError(`No local control plane data in ${dir}: there is nothing to pivot`, { hint: 'Run `provisioner create cluster --dir` first, or pass the install directory that holds the cluster.' });
  }
  const lock = await acquireDirLock(dir, { command: 'pivot', events: sink });
  const platform = await platformOfInstall(dir);
  const machinesInController = platform?.lifecycle.machinesInController ?? false;
  let source: AttachedControlPlane | undefined;
  try {
    // Checked before the source boots: a wrong target or a rollback with nothing to undo costs nothing.
    const journal = await openPivotJournal(dir, toKubeconfig, request.rollback ?? false);
    source = await attachManagement({ dir, config: await sourceConfig(dir, sink, signal), platform, detached: machinesInController, sink, signal });
    const result = await pivotFrom({ ...request, dir, toKubeconfig, source, machinesInController, journal });
    if (result.sourceStopped) source = undefined;
    return result;
  } finally {
    if (source) {
      // A control plane that manages simulated machines stays up; otherwise stop what this command started.
      if (machinesInController) source.client.close();
      else await source.stop().catch((error: unknown) => log(sink, 'warn', `While stopping the local control plane: ${messageOf(error)}`));
    }
    await lock.release();
  }
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
async function openPivotJournal(dir: string, toKubeconfig: string, rollback: boolean): Promise<PivotJournal | undefined> {
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
}

/**
 * The move itself, from a source control plane the caller attached and under the caller's
 * directory lock (`pivot` and `create cluster --pivot-to` share it). When the machines live
 * in the source's controllers, the source is stopped once it holds no Cluster, before the
 * target unpauses, so that the target's provider can serve the cluster's endpoint on its port; the
 * source's data stays (`destroy bootstrap` removes it). A finished move records the target
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
    await recordExternalManagement(dir, toKubeconfig);
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

export type PivotToSelfRequest = Omit<PivotRequest, 'toKubeconfig'>;

/**
 * `pivot --dir D --to self` (issue 28, item 2, first slice): the cluster of D becomes its own
 * management cluster, as Cluster API's self-hosted flow does it. First `management install`
 * into it with D (the providers as pods, their images loaded onto its nodes by the local
 * control plane, which still serves them), then the journaled move into `D/auth/kubeconfig`;
 * the hosts' agents follow to the in-cluster agent manager through the cluster's own API
 * endpoint (the kubeconfig's server), and the local control plane, which manages no cluster
 * any more, is stopped. A resume whose move has begun (journal past `planned`) goes straight to
 * the move: the providers were installed before it began, and the source's controllers are
 * fenced by then. Not yet: node artifacts served from inside the cluster (a host registered
 * after the pivot cannot download them), and destroy of a self-managed cluster (item 3).
 */
export async function pivotToSelf(request: PivotToSelfRequest): Promise<PivotResult> {
  const dir = path.resolve(request.dir);
  const kubeconfig = path.join(dir, 'auth', 'kubeconfig');
  await checkKubeconfigFile(kubeconfig, '--to self');
  const journal = await readPivotJournal(dir);
  if (journal?.phase === 'done' && !journal.rolledBack && path.resolve(journal.targetKubeconfig) === kubeconfig) {
    return { action: 'nothing-to-move', kinds: [], clusters: journal.clusters.map((c) => `${c.namespace}/${c.name}`), lines: [`the cluster of ${dir} already manages itself`], sourceStopped: false };
  }
  const begun = isUnfinished(journal) && phaseIndex(journal.phase) > phaseIndex('planned');
  if (!request.rollback && !begun) {
    const { installManagement } = await import('./management-install.js');
    await installManagement({ kubeconfig, dir, dryRun: request.dryRun ?? false, sink: request.sink, signal: request.signal });
  }
  return pivot({ ...request, toKubeconfig: kubeconfig });
}
