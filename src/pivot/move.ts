/**
 * The journaled move of Cluster API objects from a source cluster (the local control
 * plane) to a target (a lasting management cluster), after clusterctl's `mover.go`:
 *
 *   planned → paused → copied → verified → source-deleted → unpaused → done
 *
 * Each phase is recorded in the journal once complete, and every step is idempotent, so
 * a run that failed or was killed is resumed by running again from the recorded phase.
 * Until the source is deleted a move can be rolled back (copies deleted from the target,
 * the source unpaused); after that, only forward. The Clusters stay paused (spec.paused)
 * in both places while objects are in flight, so no controller acts on a half-moved set.
 */
import { capiCoreApiVersion, capiGroups } from '../capi.js';
import { groupOf } from '../object-key.js';
import { ExternalError, InterruptedError, UsageError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { defaultRetryPolicy, mapLimit, realSleep, withRetry } from '../concurrency.js';
import { polling, until, type Observation } from '../progress/until.js';
import {
  clusterctlLabel,
  contentDifference,
  copyBody,
  countByKind,
  keyOf,
  orderByOwners,
  remapOwnerReferences,
  selectObjects,
  type ObjectRef,
} from './graph.js';
import { phaseIndex, writePivotJournal, type JournalObject, type PivotJournal, type PivotPhase } from './journal.js';

/** Annotation on every copy: the source UID it was copied from (tells our copies from a name clash after a crash). */
export const sourceUidAnnotation = 'pivot.provisioner.dev/source-uid';

const crdApiVersion = 'apiextensions.k8s.io/v1';
const inventoryApiVersion = 'clusterctl.cluster.x-k8s.io/v1alpha3';

/** A kind the move takes, from its CRD (or core v1 for Secrets and ConfigMaps). */
export interface MoveKind {
  apiVersion: string;
  kind: string;
  group: string;
  /** `<plural>.<group>`; empty for core kinds. */
  crdName: string;
  namespaced: boolean;
  hasStatus: boolean;
}

export interface MovePlan {
  clusters: KubeObject[];
  /** Namespaced objects, owners first; one tier may be created in parallel. */
  tiers: KubeObject[][];
  /** Cluster-scoped objects: copied, not deleted. */
  global: KubeObject[];
  kinds: MoveKind[];
}

interface CrdJson extends KubeObject {
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: { kind: string; plural: string };
    versions: { name: string; served: boolean; storage: boolean; subresources?: { status?: unknown } }[];
  };
  status?: { conditions?: { type: string; status: string }[] };
}

/** The kinds of the CRDs labelled for clusterctl (its inventory's own group aside), at their storage version. */
export async function discoverMoveKinds(client: KubeClient): Promise<MoveKind[]> {
  const crds = await client.list<CrdJson>(crdApiVersion, 'CustomResourceDefinition', { labelSelector: clusterctlLabel });
  const kinds: MoveKind[] = [];
  for (const crd of crds) {
    if (crd.spec.group === 'clusterctl.cluster.x-k8s.io') continue;
    const version = crd.spec.versions.find((v) => v.storage) ?? crd.spec.versions.find((v) => v.served);
    if (!version) continue;
    kinds.push({
      apiVersion: `${crd.spec.group}/${version.name}`,
      kind: crd.spec.names.kind,
      group: crd.spec.group,
      crdName: crd.metadata.name,
      namespaced: crd.spec.scope === 'Namespaced',
      hasStatus: version.subresources?.status !== undefined,
    });
  }
  return kinds.sort((a, b) => `${a.group}/${a.kind}`.localeCompare(`${b.group}/${b.kind}`));
}

/** Secrets and ConfigMaps move too (those the cluster's objects own or name). */
export const coreKinds: MoveKind[] = [
  { apiVersion: 'v1', kind: 'Secret', group: '', crdName: '', namespaced: true, hasStatus: false },
  { apiVersion: 'v1', kind: 'ConfigMap', group: '', crdName: '', namespaced: true, hasStatus: false },
];

/** Reads the source and builds the move: the Clusters (all, or the one named), their objects, owners first. */
export async function planMove(source: KubeClient, options: { clusterName?: string; concurrency?: number } = {}): Promise<MovePlan> {
  const kinds = await discoverMoveKinds(source);
  const clusterKind = kinds.find((k) => k.group === capiGroups.core && k.kind === 'Cluster');
  if (!clusterKind) throw new ExternalError('The source serves no Cluster kind labelled for clusterctl', { hint: 'Check that the Cluster API core provider is installed in the source.' });
  let clusters = await source.list<KubeObject>(clusterKind.apiVersion, 'Cluster');
  if (options.clusterName !== undefined) clusters = clusters.filter((c) => c.metadata.name === options.clusterName);
  if (clusters.length === 0) return { clusters: [], tiers: [], global: [], kinds };
  const namespaces = [...new Set(clusters.map((c) => c.metadata.namespace!))].sort();
  const candidates: KubeObject[] = [];
  const configs: KubeObject[] = [];
  const global: KubeObject[] = [];
  const lists: (() => Promise<void>)[] = [];
  for (const kind of kinds) {
    if (!kind.namespaced) {
      lists.push(async () => void global.push(...(await source.list<KubeObject>(kind.apiVersion, kind.kind))));
      continue;
    }
    for (const namespace of namespaces) lists.push(async () => void candidates.push(...(await source.list<KubeObject>(kind.apiVersion, kind.kind, { namespace }))));
  }
  for (const kind of coreKinds) for (const namespace of namespaces) lists.push(async () => void configs.push(...(await source.list<KubeObject>(kind.apiVersion, kind.kind, { namespace }))));
  await mapLimit(lists, options.concurrency ?? 8, (list) => list());
  const selection = selectObjects({
    clusters,
    candidates: candidates.filter((o) => !(o.kind === 'Cluster' && groupOf(o.apiVersion) === capiGroups.core)),
    secretsAndConfigMaps: configs,
    global,
    onlyTheseClusters: options.clusterName !== undefined,
  });
  return { clusters, tiers: orderByOwners(selection.objects), global: selection.global, kinds: [...kinds, ...coreKinds] };
}

/** The plan as lines: objects by kind in creation order, then the cluster-scoped copies. */
export function describePlan(plan: MovePlan): string[] {
  const lines = plan.tiers.map((tier, i) => `tier ${i + 1}: ${countByKind([tier]).map((k) => `${k.count} ${k.kind}`).join(', ')}`);
  if (plan.global.length > 0) lines.push(`cluster-scoped (copied, kept in the source): ${countByKind([plan.global]).map((k) => `${k.count} ${k.kind}`).join(', ')}`);
  return lines;
}

export interface PivotEngineOptions {
  source: KubeClient;
  target: KubeClient;
  /** Install directory (the journal's home). */
  dir: string;
  journal: PivotJournal;
  sink: EventSink;
  signal?: AbortSignal;
  /** Objects created in the target at once. Default 8. */
  concurrency?: number;
  /** Called after each phase is journaled; tests throw here to simulate a crash at that point. Default none. */
  afterPhase?: (phase: PivotPhase) => void | Promise<void>;
  /**
   * Re-reads the set to move once the Clusters are paused (controllers may have created
   * objects since the plan) and checks it against the target. Default: the planned set.
   */
  replan?: () => Promise<JournalObject[]>;
  /**
   * Runs after the source let go of the objects and before the target's controllers take
   * them (the in-memory platform stops the source here, so that its endpoint listeners are
   * free for the target's provider). Runs again on a resume from `source-deleted`. Default none.
   */
  beforeUnpause?: () => Promise<void>;
}

/** A new journal for a plan. */
export function journalFor(plan: MovePlan, target: { kubeconfig: string; server: string }): PivotJournal {
  const hasStatus = new Map(plan.kinds.map((k) => [`${k.group}/${k.kind}`, k.hasStatus]));
  const entry = (o: KubeObject, tier: number, global: boolean): JournalObject => ({
    apiVersion: o.apiVersion,
    kind: o.kind,
    name: o.metadata.name,
    ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
    sourceUid: o.metadata.uid ?? '',
    global,
    hasStatus: hasStatus.get(`${groupOf(o.apiVersion)}/${o.kind}`) ?? false,
    tier,
  });
  const now = new Date().toISOString();
  return {
    version: 1,
    targetKubeconfig: target.kubeconfig,
    targetServer: target.server,
    phase: 'planned',
    startedAt: now,
    updatedAt: now,
    clusters: plan.clusters.map((c) => ({ namespace: c.metadata.namespace!, name: c.metadata.name, wasPaused: (c['spec'] as { paused?: boolean } | undefined)?.paused === true })),
    objects: [...plan.global.map((o) => entry(o, 0, true)), ...plan.tiers.flatMap((tier, i) => tier.map((o) => entry(o, i + 1, false)))],
  };
}

/**
 * Checks the target before anything changes: reachable, serves every kind of the move with
 * its CRD Established, has the providers the source has in its clusterctl inventory, and
 * holds no object of the move's names except copies this same pivot made.
 */
export async function preflight(source: KubeClient, target: KubeClient, journal: PivotJournal, kinds: readonly MoveKind[]): Promise<void> {
  try {
    await target.raw('/readyz');
  } catch (error) {
    throw new ExternalError(`The target cluster cannot be reached: ${messageOf(error)}`, { hint: 'Check --to-kubeconfig and that the target cluster is up.' });
  }
  const problems: string[] = [];
  const needed = new Map<string, MoveKind>();
  for (const o of journal.objects) {
    const kind = kinds.find((k) => k.kind === o.kind && k.group === groupOf(o.apiVersion));
    if (kind) needed.set(`${kind.group}/${kind.kind}`, kind);
  }
  for (const kind of needed.values()) {
    try {
      await target.collectionPath(kind.apiVersion, kind.kind);
    } catch {
      problems.push(`kind ${kind.kind} (${kind.apiVersion}) is not served`);
      continue;
    }
    if (!kind.crdName) continue;
    const crd = await target.get<CrdJson>({ apiVersion: crdApiVersion, kind: 'CustomResourceDefinition', metadata: { name: kind.crdName } });
    if (!crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) problems.push(`CRD ${kind.crdName} is not Established`);
  }
  problems.push(...(await compareInventories(source, target)));
  if (problems.length > 0) {
    throw new ExternalError(`The target cluster lacks ${problems.length} thing(s) the move needs`, {
      details: problems,
      hint: 'Install the same providers there (for example `provisioner management start`, or `clusterctl init` with the same versions), then run pivot again.',
    });
  }
  const ours = new Set(journal.objects.map((o) => o.sourceUid));
  const clashes: string[] = [];
  await mapLimit(
    journal.objects.filter((o) => !o.global),
    8,
    async (o) => {
      const existing = await target.get<KubeObject>(asRef(o));
      if (existing && !ours.has(existing.metadata.annotations?.[sourceUidAnnotation] ?? '')) clashes.push(keyOf(o));
    },
  );
  if (clashes.length > 0) {
    throw new ExternalError(`${clashes.length} object(s) of the move already exist in the target and were not copied by this pivot`, {
      details: clashes.sort(),
      hint: 'Move them out of the way in the target (or pivot into another cluster); nothing was changed.',
    });
  }
}

interface ProviderJson extends KubeObject {
  providerName?: string;
  type?: string;
  version?: string;
}

/** Providers of the source's clusterctl inventory that the target lacks (an error) or has at another version (a line too). */
async function compareInventories(source: KubeClient, target: KubeClient): Promise<string[]> {
  const read = async (client: KubeClient) => {
    try {
      return await client.list<ProviderJson>(inventoryApiVersion, 'Provider');
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) return undefined;
      throw error;
    }
  };
  const [wanted, present] = await Promise.all([read(source), read(target)]);
  if (!wanted || wanted.length === 0) return [];
  if (!present) return ['no clusterctl provider inventory (Provider kind of clusterctl.cluster.x-k8s.io is not served)'];
  const problems: string[] = [];
  for (const p of wanted) {
    const match = present.find((t) => t.type === p.type && t.providerName === p.providerName);
    if (!match) problems.push(`provider ${p.type ?? '?'} ${p.providerName ?? p.metadata.name} ${p.version ?? ''} is not installed`.trimEnd());
    else if (match.version !== p.version) problems.push(`provider ${p.type ?? '?'} ${p.providerName ?? p.metadata.name} is ${match.version ?? 'unversioned'} in the target, ${p.version ?? 'unversioned'} in the source`);
  }
  return problems;
}

function asRef(o: ObjectRef): { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } } {
  return { apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.name, ...(o.namespace ? { namespace: o.namespace } : {}) } };
}

const isTransient = (error: unknown) => error instanceof KubeApiError && (error.isTransient || error.isConflict);

async function retrying<T>(what: string, op: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const result = await withRetry(op, { policy: defaultRetryPolicy, isRetryable: isTransient, sleep: realSleep, ...(signal ? { signal } : {}) });
  if (result.ok) return result.value;
  throw result.error instanceof Error ? result.error : new ExternalError(`${what}: ${messageOf(result.error)}`);
}

/** The journal's clusters as objects to patch. */
function clusterRefs(journal: PivotJournal) {
  return journal.clusters.map((c) => ({ apiVersion: capiCoreApiVersion, kind: 'Cluster', metadata: { name: c.name, namespace: c.namespace } }));
}

async function setPaused(client: KubeClient, journal: PivotJournal, paused: boolean, signal?: AbortSignal): Promise<void> {
  for (const [i, ref] of clusterRefs(journal).entries()) {
    // A cluster the user had paused stays paused when the move lets go of it.
    const value = paused || journal.clusters[i]!.wasPaused;
    await retrying(`pausing ${ref.metadata.name}`, async () => {
      try {
        await client.mergePatch(ref, { spec: { paused: value } });
      } catch (error) {
        if (!(error instanceof KubeApiError && error.isNotFound)) throw error;
      }
    }, signal);
  }
}

/**
 * Runs (or resumes) the move from the journal's phase to `done`. Throws on a failure,
 * with the journal left at the last completed phase.
 */
export async function runPivot(options: PivotEngineOptions): Promise<PivotJournal> {
  const { source, target, journal, sink, signal, dir } = options;
  const concurrency = Math.max(1, options.concurrency ?? 8);
  const advance = async (phase: PivotPhase) => {
    // An interrupt stops the bounded loops early without an error: never record a phase as complete then.
    if (signal?.aborted) {
      throw new InterruptedError(`The pivot was interrupted before ${phase}`, { hint: 'Run `provisioner pivot` again to resume it, or with --rollback to undo it.' });
    }
    journal.phase = phase;
    delete journal.lastError;
    await writePivotJournal(dir, journal);
    sink.emit({ type: 'stage', stage: `pivot:${phase}`, state: 'succeeded' });
    await options.afterPhase?.(phase);
  };
  const at = (phase: PivotPhase) => phaseIndex(journal.phase) < phaseIndex(phase);
  try {
    if (at('paused')) {
      await setPaused(source, journal, true, signal);
      if (options.replan) journal.objects = await options.replan();
      await advance('paused');
    }
    if (at('copied')) {
      await copyAll(options, concurrency);
      await advance('copied');
    }
    if (at('verified')) {
      await verifyAll(options, concurrency);
      await advance('verified');
    }
    if (at('source-deleted')) {
      await deleteFromSource(source, journal, concurrency, sink, signal);
      await advance('source-deleted');
    }
    if (at('unpaused')) {
      await options.beforeUnpause?.();
      await setPaused(target, journal, false, signal);
      await advance('unpaused');
    }
    if (at('done')) await advance('done');
    return journal;
  } catch (error) {
    journal.lastError = messageOf(error);
    await writePivotJournal(dir, journal).catch(() => {});
    throw error;
  }
}

/** Copies every object, tier by tier (owners first), `concurrency` at once; records each target UID. */
async function copyAll(options: PivotEngineOptions, concurrency: number): Promise<void> {
  const { target, journal, sink, signal } = options;
  const targetUidOf = new Map(journal.objects.filter((o) => o.targetUid).map((o) => [o.sourceUid, o.targetUid!]));
  // The namespaces first, as clusterctl does; they stay in the target even on a rollback (they may hold other things).
  for (const namespace of [...new Set(journal.objects.map((o) => o.namespace).filter((n): n is string => !!n))].sort()) {
    if (!(await target.get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }))) {
      await retrying(`Namespace ${namespace}`, () => target.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }), signal);
    }
  }
  const copied = await copyEntries(options, journal.objects, concurrency, targetUidOf);
  log(sink, 'info', `Copied ${copied} object(s) to the target`);
}

/**
 * Creates (or updates: server-side apply) `entries` in the target from their current source
 * content, tier by tier, with status through the status subresource and owner references
 * remapped; journals the target UIDs after each tier. Returns how many were copied.
 */
async function copyEntries(options: PivotEngineOptions, entries: readonly JournalObject[], concurrency: number, targetUidOf: Map<string, string>): Promise<number> {
  const { source, target, journal, sink, signal, dir } = options;
  const tiers = new Map<number, JournalObject[]>();
  for (const o of entries) tiers.set(o.tier, [...(tiers.get(o.tier) ?? []), o]);
  const total = entries.length;
  let copied = 0;
  const incomplete: JournalObject[] = [];
  const progress = (done = false) => sink.emit({ type: 'progress', task: 'pivot:copy', label: 'Copying objects to the target', current: copied, total, unit: 'objects', ...(done ? { done } : {}) });
  for (const tier of [...tiers.keys()].sort((a, b) => a - b)) {
    await mapLimit(
      tiers.get(tier)!,
      concurrency,
      async (entry) => {
        const obj = await source.get<KubeObject>(asRef(entry));
        if (!obj) throw new ExternalError(`${keyOf(entry)} disappeared from the source during the move`, { hint: 'Run pivot again: it re-plans what is left, or roll back with --rollback.' });
        if (entry.global) {
          const existing = await target.get<KubeObject>(asRef(entry));
          if (existing && existing.metadata.annotations?.[sourceUidAnnotation] !== entry.sourceUid) {
            entry.preexisting = true; // the target's own object: left as it is, never rolled back
            entry.targetUid = existing.metadata.uid!;
            targetUidOf.set(entry.sourceUid, entry.targetUid);
            copied++;
            return;
          }
        }
        const { refs, complete } = remapOwnerReferences(obj.metadata.ownerReferences, targetUidOf);
        if (!complete) incomplete.push(entry);
        const body = copyBody(obj, refs, { [sourceUidAnnotation]: entry.sourceUid });
        const created = await retrying(keyOf(entry), () => target.apply(body), signal);
        if (entry.hasStatus && obj['status'] !== undefined) await retrying(`${keyOf(entry)} status`, () => target.applyStatus(obj), signal);
        entry.targetUid = created.metadata.uid!;
        targetUidOf.set(entry.sourceUid, entry.targetUid);
        copied++;
        if (copied % 25 === 0) progress();
      },
      signal,
    );
    await writePivotJournal(dir, journal); // target UIDs of this tier, for a rollback after a crash
  }
  // Owners that were created after their dependents (a cycle): set the references now.
  for (const entry of incomplete) {
    const obj = await source.get<KubeObject>(asRef(entry));
    const { refs } = remapOwnerReferences(obj?.metadata.ownerReferences, targetUidOf);
    await retrying(keyOf(entry), () => target.mergePatch(asRef(entry) as KubeObject, { metadata: { ownerReferences: refs } }), signal);
  }
  progress(true);
  return copied;
}

/** Rounds of re-copying objects that changed in the source after their copy (a reconcile in flight when the pause landed). */
const verifyRounds = 3;

/**
 * Every object is in the target with the source's content and owner references remapped.
 * An object whose source changed after it was copied (a controller's reconcile that was
 * in flight when the pause landed) is copied again, up to `verifyRounds` times.
 */
async function verifyAll(options: PivotEngineOptions, concurrency: number): Promise<void> {
  const { source, target, journal, sink, signal } = options;
  const targetUidOf = new Map(journal.objects.filter((o) => o.targetUid).map((o) => [o.sourceUid, o.targetUid!]));
  let pending = journal.objects.filter((o) => !o.preexisting);
  for (let round = 1; ; round++) {
    const problems: string[] = [];
    const stale: JournalObject[] = [];
    await mapLimit(pending, concurrency, async (entry) => {
      const [from, to] = await Promise.all([source.get<KubeObject>(asRef(entry)), target.get<KubeObject>(asRef(entry))]);
      if (!from) return void problems.push(`${keyOf(entry)} is missing in the source`);
      if (!to) {
        stale.push(entry);
        return void problems.push(`${keyOf(entry)} is missing in the target`);
      }
      const difference = contentDifference(from, to, from.kind === 'Cluster');
      const expected = remapOwnerReferences(from.metadata.ownerReferences, targetUidOf).refs.map((r) => r.uid).sort();
      const actual = (to.metadata.ownerReferences ?? []).map((r) => r.uid).sort();
      const ownersDiffer = JSON.stringify(expected) !== JSON.stringify(actual);
      if (difference !== undefined || ownersDiffer) {
        stale.push(entry);
        problems.push(`${keyOf(entry)} ${difference !== undefined ? `differs at ${difference}` : `has owners ${actual.join(',')}, expected ${expected.join(',')}`}`);
      }
    });
    if (problems.length === 0) return;
    if (round >= verifyRounds || stale.length < problems.length) {
      throw new ExternalError(`${problems.length} object(s) did not verify in the target`, {
        details: problems.sort(),
        hint: 'Run pivot again to copy them again, or `provisioner pivot --rollback` to undo the move; the source still holds everything (paused).',
      });
    }
    log(sink, 'info', `${stale.length} object(s) changed in the source after their copy (e.g. ${problems[0]}); copying them again`);
    await copyEntries({ ...options, signal }, stale, concurrency, targetUidOf);
    pending = stale;
  }
}

/** Deletes the moved (namespaced) objects from the source, dependents first, after dropping their finalizers. */
async function deleteFromSource(source: KubeClient, journal: PivotJournal, concurrency: number, sink: EventSink, signal?: AbortSignal): Promise<void> {
  const entries = journal.objects.filter((o) => !o.global);
  let deleted = 0;
  await forEachTierReversed(entries, concurrency, signal, async (entry) => {
    await removeFinalizersAndDelete(source, entry, signal);
    deleted++;
  });
  sink.emit({ type: 'progress', task: 'pivot:delete', label: 'Deleting moved objects from the source', current: deleted, total: entries.length, unit: 'objects', done: true });
}

/** Dependents before owners: one tier at a time, highest first, so no owner's deletion cascades into a dependent still to be handled. */
async function forEachTierReversed(entries: readonly JournalObject[], concurrency: number, signal: AbortSignal | undefined, fn: (entry: JournalObject) => Promise<void>): Promise<void> {
  const tiers = [...new Set(entries.map((e) => e.tier))].sort((a, b) => b - a);
  for (const tier of tiers) await mapLimit(entries.filter((e) => e.tier === tier), concurrency, fn, signal);
}

/** Tells CAPI controllers that a deletion is a move, not a teardown (no infrastructure cleanup), as clusterctl does. */
export const deleteForMoveAnnotation = 'clusterctl.cluster.x-k8s.io/delete-for-move';

/** Time an object being deleted may stay as it is (not deleted, or holding the same finalizers) before the move fails: 1 minute. */
const deletionNoProgressTimeoutMs = 60_000;
/** Pause between two looks at an object being deleted. */
const deletionPollMs = 100;

/**
 * Deletes an object and makes sure it is gone: delete first, then drop the finalizers (once
 * the deletion has started no controller can add one back; a paused controller that re-adds
 * its finalizer before the delete would leave the object terminating forever). Each look
 * takes the next step and reads the object again; it waits, on the one waiting primitive,
 * through transient answers and fails when the object stayed as it was for a minute.
 */
async function removeFinalizersAndDelete(client: KubeClient, entry: ObjectRef & { sourceUid?: string }, signal?: AbortSignal): Promise<void> {
  const ref = asRef(entry) as KubeObject;
  let seen = 'not read yet';
  const look = async (): Promise<Observation<void>> => {
    try {
      let live = await client.get<KubeObject>(ref);
      if (live && !live.metadata.deletionTimestamp) {
        await client.mergePatch(ref, { metadata: { annotations: { [deleteForMoveAnnotation]: '' } } });
        await client.delete(ref);
        live = await client.get<KubeObject>(ref);
      }
      if (live?.metadata.deletionTimestamp && (live.metadata.finalizers ?? []).length > 0) {
        await client.mergePatch(ref, { metadata: { finalizers: null } });
        live = await client.get<KubeObject>(ref);
      }
      if (!live) return { state: 'done', value: undefined, progress: 'gone' };
      seen = live.metadata.deletionTimestamp ? `being deleted, finalizers [${(live.metadata.finalizers ?? []).join(', ')}]` : 'not deleted';
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) return { state: 'done', value: undefined, progress: 'gone' };
      // An answer that may differ next time is waited through (it is not progress); any other fails the move.
      if (!isTransient(error)) throw error;
    }
    return { state: 'waiting', value: undefined, progress: seen };
  };
  await until(polling(look, deletionPollMs), {
    what: `the deletion of ${keyOf(entry)}`,
    noProgressTimeoutMs: deletionNoProgressTimeoutMs,
    ...(signal ? { signal } : {}),
    onStall: (_last, stalledMs) =>
      new ExternalError(`${keyOf(entry)} is still there ${Math.round(stalledMs / 1000)} s into its deletion: ${seen}`, { hint: 'Check what holds it (finalizers), then run pivot again.' }),
  });
}

/**
 * Undoes a move that has not deleted anything from the source: deletes the copies in the
 * target (by the journal's names, only those carrying this pivot's source UIDs) and unpauses the source.
 */
export async function rollbackPivot(options: Omit<PivotEngineOptions, 'afterPhase' | 'replan'>): Promise<{ deleted: number }> {
  const { source, target, journal, sink, signal, dir } = options;
  if (phaseIndex(journal.phase) >= phaseIndex('source-deleted')) {
    throw new UsageError(`The move already deleted the objects from the source (phase ${journal.phase}); it cannot be rolled back`, {
      hint: 'Run `provisioner pivot` again (without --rollback) to finish the move into the target.',
    });
  }
  const mine = new Set(journal.objects.map((o) => o.sourceUid));
  const entries = journal.objects.filter((o) => !o.preexisting);
  let deleted = 0;
  await forEachTierReversed(entries, Math.max(1, options.concurrency ?? 8), signal, async (entry) => {
    const live = await target.get<KubeObject>(asRef(entry));
    if (!live || !mine.has(live.metadata.annotations?.[sourceUidAnnotation] ?? '')) return;
    await removeFinalizersAndDelete(target, entry, signal);
    deleted++;
  });
  if (signal?.aborted) throw new InterruptedError('The rollback was interrupted', { hint: 'Run `provisioner pivot --rollback` again to finish it.' });
  await setPaused(source, journal, false, signal);
  journal.rolledBack = true;
  journal.phase = 'planned';
  for (const o of journal.objects) delete o.targetUid;
  await writePivotJournal(dir, journal);
  log(sink, 'info', `Rolled back: deleted ${deleted} copied object(s) from the target and unpaused the source`);
  return { deleted };
}
