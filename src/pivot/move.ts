/**
 * The journaled move of Cluster API objects from a source cluster (the local control
 * plane) to a target (a lasting management cluster), after clusterctl's `mover.go`:
 *
 *   planned → paused → copied → verified → agents-followed → source-deleted → unpaused → done
 *
 * Each phase is recorded in the journal once complete, and every step is idempotent, so
 * a run that failed or was killed is resumed by running again from the recorded phase.
 * Until the source is deleted a move can be rolled back (copies deleted from the target,
 * the source unpaused); after that, only forward. The Clusters stay paused (spec.paused)
 * in both places while objects are in flight, so no controller acts on a half-moved set.
 */
import { capiCoreApiVersion, capiGroups } from '../capi.js';
import type { StoredObjectRef } from '../controlplane/etcd-storage.js';
import { groupOf } from '../object-key.js';
import { ExternalError, InterruptedError, UsageError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { apiRequestsMade, KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { defaultRetryPolicy, mapLimit, sleep, withRetry } from '../concurrency.js';
import { polling, until, type Observation } from '../progress/until.js';
import {
  clusterctlLabel,
  contentDifference,
  copiedContent,
  copyBody,
  countByKind,
  keyOf,
  mergePatchBetween,
  orderByOwners,
  remapOwnerReferences,
  selectObjects,
  statusForCopy,
  statusRebuiltByControllers,
  type ObjectRef,
} from './graph.js';
import { agentGroup, handOverAgents, isAgentHost, movingHosts, planNamespace, planNamespaceObjects, withdrawHandover } from './agents.js';
import { phaseIndex, writePivotJournal, type JournalObject, type PivotJournal, type PivotPhase } from './journal.js';

/** Annotation on every copy: the source UID it was copied from (tells our copies from a name clash after a crash). */
export const sourceUidAnnotation = 'pivot.provisioner.dev/source-uid';

const crdApiVersion = 'apiextensions.k8s.io/v1';

/**
 * Requests in flight at once against either cluster (creates, patches, deletes, lists):
 * default 32, one keep-alive agent's sockets. A request mostly waits on the API server, its
 * admission webhooks and etcd, so more in flight keeps a busy server fed; our admin
 * credential is exempt from priority and fairness, and the server's in-flight limits
 * (400 + 200 by default) are far above it. Not tuned by measurement: 8 was the default before.
 */
const defaultConcurrency = 32;
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

export interface PlanOptions {
  /** Only this Cluster (and its objects). Default: every Cluster. */
  clusterName?: string;
  /** Lists in flight at once. Default `defaultConcurrency`. */
  concurrency?: number;
  /** The kinds that move, when the caller discovered them already (the re-plan after the pause). Default: discovered from the CRDs. */
  kinds?: readonly MoveKind[];
  /**
   * Read the objects from the API server's watch cache as it is, without waiting for it to
   * catch up (the plan before the pause: the one after it reads the latest state and is
   * what moves). The Clusters are always read as they are now. Default false.
   */
  fromCache?: boolean;
}

/** Reads the source and builds the move: the Clusters (all, or the one named), their objects, owners first. */
export async function planMove(source: KubeClient, options: PlanOptions = {}): Promise<MovePlan> {
  const kinds = options.kinds?.filter((k) => k.crdName) ?? (await discoverMoveKinds(source));
  const clusterKind = kinds.find((k) => k.group === capiGroups.core && k.kind === 'Cluster');
  if (!clusterKind) throw new ExternalError('The source serves no Cluster kind labelled for clusterctl', { hint: 'Check that the Cluster API core provider is installed in the source.' });
  let clusters = await source.list<KubeObject>(clusterKind.apiVersion, 'Cluster');
  if (options.clusterName !== undefined) clusters = clusters.filter((c) => c.metadata.name === options.clusterName);
  if (clusters.length === 0) return { clusters: [], tiers: [], global: [], kinds };
  const namespaces = [...new Set(clusters.map((c) => c.metadata.namespace!))].sort();
  const fromCache = options.fromCache ?? false;
  const candidates: KubeObject[] = [];
  const configs: KubeObject[] = [];
  const global: KubeObject[] = [];
  const lists: (() => Promise<void>)[] = [];
  for (const kind of kinds) {
    if (!kind.namespaced) {
      lists.push(async () => void global.push(...(await source.list<KubeObject>(kind.apiVersion, kind.kind, { fromCache }))));
      continue;
    }
    for (const namespace of namespaces) lists.push(async () => void candidates.push(...(await source.list<KubeObject>(kind.apiVersion, kind.kind, { namespace, fromCache }))));
  }
  for (const kind of coreKinds) for (const namespace of namespaces) lists.push(async () => void configs.push(...(await source.list<KubeObject>(kind.apiVersion, kind.kind, { namespace, fromCache }))));
  await mapLimit(lists, options.concurrency ?? defaultConcurrency, (list) => list());
  const selection = selectObjects({
    clusters,
    candidates: candidates.filter((o) => !(o.kind === 'Cluster' && groupOf(o.apiVersion) === capiGroups.core)),
    secretsAndConfigMaps: configs,
    // The agent's Hosts are not global copies: those the moved clusters claim move, the rest stay (agents.ts).
    global: global.filter((o) => !isAgentHost(o)),
    onlyTheseClusters: options.clusterName !== undefined,
  });
  const inventory = await hostInventory(source, kinds, movingHosts(global.filter(isAgentHost), clusters), options.concurrency ?? defaultConcurrency, fromCache);
  return { clusters, tiers: orderByOwners([...selection.objects, ...inventory]), global: selection.global, kinds: [...kinds, ...coreKinds] };
}

/** The moving Hosts with every NodePlan of their plan namespaces and the Secrets and ConfigMaps those plans name. */
async function hostInventory(source: KubeClient, kinds: readonly MoveKind[], hosts: readonly KubeObject[], concurrency: number, fromCache: boolean): Promise<KubeObject[]> {
  const planKind = kinds.find((k) => k.group === agentGroup && k.kind === 'NodePlan');
  if (hosts.length === 0 || !planKind) return [...hosts];
  const plans: KubeObject[] = [];
  const configs: KubeObject[] = [];
  const lists = hosts.flatMap((h) => {
    const namespace = planNamespace(h.metadata.name);
    return [
      async () => void plans.push(...(await source.list<KubeObject>(planKind.apiVersion, planKind.kind, { namespace, fromCache }))),
      ...coreKinds.map((k) => async () => void configs.push(...(await source.list<KubeObject>(k.apiVersion, k.kind, { namespace, fromCache })))),
    ];
  });
  await mapLimit(lists, concurrency, (list) => list());
  return [...hosts, ...planNamespaceObjects(plans, configs)];
}

/** The plan as lines: objects by kind in creation order, then the cluster-scoped copies. */
export function describePlan(plan: MovePlan): string[] {
  const lines = plan.tiers.map((tier, i) => `tier ${i + 1}: ${countByKind([tier]).map((k) => `${k.count} ${k.kind}`).join(', ')}`);
  if (plan.global.length > 0) lines.push(`cluster-scoped (copied, kept in the source): ${countByKind([plan.global]).map((k) => `${k.count} ${k.kind}`).join(', ')}`);
  return lines;
}

/**
 * A source the move fences instead of emptying it through its API: the install's own local
 * control plane, whose controllers and storage this command owns. Its controllers stop
 * right after its Clusters are paused: they would otherwise answer the pause by writing a
 * Paused condition on every object (thousands of status writes, with conflicts, all
 * through the copy), and once they are gone nothing in the source can act on the moved
 * objects again. The moved objects then leave its storage directly, a transaction per 128,
 * where the API would need a finalizer patch and a delete per object, each through the
 * webhooks of the controllers just stopped.
 */
export interface FencedSource {
  /** Stops the source's controllers (idempotent: a resume calls it again on a restarted source). */
  stopControllers(): Promise<void>;
  /** Removes objects from the source's storage; returns how many were there. */
  removeObjects(refs: readonly StoredObjectRef[]): Promise<number>;
}

export interface PivotEngineOptions {
  source: KubeClient;
  target: KubeClient;
  /** Install directory (the journal's home). */
  dir: string;
  journal: PivotJournal;
  sink: EventSink;
  signal?: AbortSignal;
  /** Requests in flight at once. Default `defaultConcurrency` (32). */
  concurrency?: number;
  /** Called after each phase is journaled; tests throw here to simulate a crash at that point. Default none. */
  afterPhase?: (phase: PivotPhase) => void | Promise<void>;
  /**
   * Re-reads the set to move once the Clusters are paused (controllers may have created
   * objects since the plan) and checks it against the target. Default: the planned set.
   */
  replan?: () => Promise<Replanned>;
  /**
   * Runs after the source let go of the objects and before the target's controllers take
   * them (the in-memory platform stops the source here, so that its endpoint listeners are
   * free for the target's provider). Runs again on a resume from `source-deleted`. Default none.
   */
  beforeUnpause?: () => Promise<void>;
  /** How long the hand-over waits for the moved hosts' agents to follow. Default `defaultHandoverTimeoutMs` (agents.ts). */
  handoverTimeoutMs?: number;
  /** The source as a fence (see FencedSource): how its controllers stop and the moved objects leave it. */
  fence: FencedSource;
}

/** What `replan` read: the objects to move, and their live content as listed (so the copy need not list the source again). */
export interface Replanned {
  objects: JournalObject[];
  live: KubeObject[];
}

/** A new journal for a plan. */
export function journalFor(plan: MovePlan, target: { kubeconfig: string; server: string }): PivotJournal {
  // Status is copied only where no controller rebuilds it (statusRebuiltByControllers): one write less per object.
  const hasStatus = new Map(plan.kinds.map((k) => [`${k.group}/${k.kind}`, k.hasStatus && !statusRebuiltByControllers(k.group)]));
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
  await mapLimit([...needed.values()], defaultConcurrency, async (kind) => {
    try {
      await target.collectionPath(kind.apiVersion, kind.kind);
    } catch {
      problems.push(`kind ${kind.kind} (${kind.apiVersion}) is not served`);
      return;
    }
    if (!kind.crdName) return;
    const crd = await target.get<CrdJson>({ apiVersion: crdApiVersion, kind: 'CustomResourceDefinition', metadata: { name: kind.crdName } });
    if (!crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) problems.push(`CRD ${kind.crdName} is not Established`);
  });
  problems.sort(); // the kinds were checked in parallel: the report keeps one order
  problems.push(...(await compareInventories(source, target)));
  if (problems.length > 0) {
    throw new ExternalError(`The target cluster lacks ${problems.length} thing(s) the move needs`, {
      details: problems,
      hint: 'Install the same providers there (for example `provisioner management start`, or `clusterctl init` with the same versions), then run pivot again.',
    });
  }
  const ours = new Set(journal.objects.map((o) => o.sourceUid));
  const moving = journal.objects.filter((o) => !o.global && !madeByTargetControllers(o));
  const inTarget = await listEntries(target, moving, defaultConcurrency);
  const clashes = moving.filter((o) => {
    const existing = inTarget.get(keyOf(o));
    return existing !== undefined && !ours.has(existing.metadata.annotations?.[sourceUidAnnotation] ?? '');
  }).map((o) => keyOf(o));
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
  const result = await withRetry(op, { policy: defaultRetryPolicy, isRetryable: isTransient, sleep, ...(signal ? { signal } : {}) });
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
  const concurrency = Math.max(1, options.concurrency ?? defaultConcurrency);
  let phaseStarted = performance.now();
  let requestsBefore = apiRequestsMade();
  const advance = async (phase: PivotPhase) => {
    // An interrupt stops the bounded loops early without an error: never record a phase as complete then.
    if (signal?.aborted) {
      throw new InterruptedError(`The pivot was interrupted before ${phase}`, { hint: 'Run `provisioner pivot` again to resume it, or with --rollback to undo it.' });
    }
    journal.phase = phase;
    delete journal.lastError;
    await writePivotJournal(dir, journal);
    sink.emit({ type: 'stage', stage: `pivot:${phase}`, state: 'succeeded', durationMs: Math.round(performance.now() - phaseStarted), requests: apiRequestsMade() - requestsBefore });
    await options.afterPhase?.(phase);
    phaseStarted = performance.now();
    requestsBefore = apiRequestsMade();
  };
  const at = (phase: PivotPhase) => phaseIndex(journal.phase) < phaseIndex(phase);
  try {
    // The source's content as the replan listed it, right after the pause: what the copy starts from in this run.
    let listed: Map<string, KubeObject> | undefined;
    if (at('paused')) {
      await setPaused(source, journal, true, signal);
      // After the pause, which goes through the source's webhooks: the controllers serve them.
      await options.fence.stopControllers();
      if (options.replan) {
        const replanned = await options.replan();
        journal.objects = replanned.objects;
        listed = new Map(replanned.live.map((o) => [keyOf(o), o]));
      }
      await advance('paused');
    } else if (at('source-deleted')) {
      // A resume: the source was started again, controllers and all.
      await options.fence.stopControllers();
    }
    if (at('copied')) {
      await copyAll(options, concurrency, listed);
      await advance('copied');
    }
    if (at('verified')) {
      await verifyAll(options, concurrency);
      await advance('verified');
    }
    if (at('agents-followed')) {
      // Before the source lets go: an agent that has not followed still has a manager that knows its Host.
      await handOverAgents({ source, target, journal, sink, ...(signal ? { signal } : {}), ...(options.handoverTimeoutMs ? { timeoutMs: options.handoverTimeoutMs } : {}) });
      await advance('agents-followed');
    }
    if (at('source-deleted')) {
      await removeFromStorage(source, options.fence, journal, concurrency, sink, signal);
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

/**
 * The live objects of `entries` in `client`, by `keyOf`: one list per kind and namespace
 * (one per cluster-scoped kind), never a request per object.
 */
async function listEntries(client: KubeClient, entries: readonly ObjectRef[], concurrency: number, signal?: AbortSignal): Promise<Map<string, KubeObject>> {
  const collections = new Map<string, ObjectRef>();
  for (const e of entries) collections.set(`${e.apiVersion}|${e.kind}|${e.namespace ?? ''}`, e);
  const found = new Map<string, KubeObject>();
  await mapLimit(
    [...collections.values()],
    concurrency,
    async (c) => {
      try {
        for (const o of await client.list<KubeObject>(c.apiVersion, c.kind, c.namespace ? { namespace: c.namespace } : {})) found.set(keyOf(o), o);
      } catch (error) {
        // A kind the cluster does not serve holds nothing (a rollback from a target that lacked it).
        if (!(error instanceof KubeApiError && error.isNotFound)) throw error;
      }
    },
    signal,
  );
  return found;
}

/** Copies every object, tier by tier (owners first), `concurrency` at once; records each target UID. */
async function copyAll(options: PivotEngineOptions, concurrency: number, listed?: Map<string, KubeObject>): Promise<void> {
  const { target, journal, sink, signal } = options;
  const targetUidOf = new Map(journal.objects.filter((o) => o.targetUid).map((o) => [o.sourceUid, o.targetUid!]));
  // The namespaces first, as clusterctl does; they stay in the target even on a rollback (they may hold other things).
  const namespaces = [...new Set(journal.objects.map((o) => o.namespace).filter((n): n is string => !!n))].sort();
  const existing = new Set((await target.list<KubeObject>('v1', 'Namespace')).map((n) => n.metadata.name));
  for (const namespace of namespaces.filter((n) => !existing.has(n))) {
    await retrying(`Namespace ${namespace}`, () => target.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }), signal);
  }
  const copied = await copyEntries(options, journal.objects, concurrency, targetUidOf, listed);
  log(sink, 'info', `Copied ${copied} object(s) to the target`);
}

/**
 * Copies `entries` into the target from the source's current content (`listed`, or one
 * list per kind), tier by tier: each is created with a POST; a name already taken (a resume,
 * a create whose answer was lost, a verify round) is read and, when it is a copy this pivot
 * made, patched level with its source where it differs. Owner references remapped; status
 * through its subresource only where `hasStatus` says so. Journals the target UIDs after
 * each tier. Returns how many were copied.
 */
async function copyEntries(options: PivotEngineOptions, entries: readonly JournalObject[], concurrency: number, targetUidOf: Map<string, string>, listed?: Map<string, KubeObject>): Promise<number> {
  const { source, target, journal, sink, signal, dir } = options;
  const inSource = listed ?? (await listEntries(source, entries, concurrency, signal));
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
        const obj = inSource.get(keyOf(entry));
        if (!obj) throw new ExternalError(`${keyOf(entry)} disappeared from the source during the move`, { hint: 'Run pivot again: it re-plans what is left, or roll back with --rollback.' });
        const { refs, complete } = remapOwnerReferences(obj.metadata.ownerReferences, targetUidOf);
        const body = copyBody(obj, refs, { [sourceUidAnnotation]: entry.sourceUid });
        const copy = await retrying(keyOf(entry), () => createCopy(target, entry, body, signal), signal);
        if (copy !== 'preexisting') {
          if (!complete) incomplete.push(entry);
          if (entry.hasStatus && obj['status'] !== undefined) await retrying(`${keyOf(entry)} status`, () => target.applyStatus(statusForCopy(obj, copy.metadata.generation)), signal);
          entry.targetUid = copy.metadata.uid!;
        }
        targetUidOf.set(entry.sourceUid, entry.targetUid!);
        copied++;
        if (copied % 100 === 0) progress();
      },
      signal,
    );
    await writePivotJournal(dir, journal); // target UIDs of this tier, for a rollback after a crash
  }
  // Owners that were created after their dependents (a cycle): set the references now.
  for (const entry of incomplete) {
    const { refs } = remapOwnerReferences(inSource.get(keyOf(entry))?.metadata.ownerReferences, targetUidOf);
    await retrying(keyOf(entry), () => target.mergePatch(asRef(entry) as KubeObject, { metadata: { ownerReferences: refs } }), signal);
  }
  progress(true);
  return copied;
}

/**
 * Creates a copy (POST). When the name is taken: a copy this pivot made is levelled with
 * `body`; a cluster-scoped object the target had before the move is left as it is and
 * recorded as `preexisting` (never overwritten, never rolled back); anything else fails.
 */
async function createCopy(target: KubeClient, entry: JournalObject, body: KubeObject, signal?: AbortSignal): Promise<KubeObject | 'preexisting'> {
  try {
    return await target.create(body);
  } catch (error) {
    if (!(error instanceof KubeApiError && error.isConflict)) throw error;
  }
  const existing = await target.get<KubeObject>(asRef(entry));
  // Deleted since the create said it exists: a conflict, so the caller's retry creates it again.
  if (!existing) throw new KubeApiError(409, 'Conflict', 'deleted while it was being created', keyOf(entry));
  if (entry.global && existing.metadata.annotations?.[sourceUidAnnotation] !== entry.sourceUid) {
    entry.preexisting = true;
    entry.targetUid = existing.metadata.uid!;
    return 'preexisting';
  }
  return levelCopy(target, entry, existing, body, signal);
}

/**
 * Brings a copy in the target level with `body` (its source, owners remapped) by a merge
 * patch of what differs; no request when nothing does. An object of the same name that
 * this pivot did not copy is never touched (preflight refuses those; this is a race).
 */
async function levelCopy(target: KubeClient, entry: JournalObject, existing: KubeObject, body: KubeObject, signal?: AbortSignal): Promise<KubeObject> {
  if (existing.metadata.annotations?.[sourceUidAnnotation] !== entry.sourceUid && !madeByTargetControllers(entry)) {
    throw new ExternalError(`${keyOf(entry)} appeared in the target during the move, and it is not a copy of this pivot`, {
      hint: 'Move it out of the way in the target, then run pivot again (or roll back with --rollback).',
    });
  }
  const marked = existing.metadata.annotations?.[sourceUidAnnotation] === entry.sourceUid;
  // A controller-made object is adopted: marked as this move's copy, so a resume or rollback knows it.
  const current = marked ? copiedContent(existing) : { metadata: {} };
  const desired = marked ? copiedContent(body) : { ...copiedContent(body), metadata: { ...(copiedContent(body)['metadata'] as object), annotations: { [sourceUidAnnotation]: entry.sourceUid } } };
  const patch = mergePatchBetween(current, desired);
  if (patch === undefined) return existing;
  return retrying(keyOf(entry), () => target.mergePatch<KubeObject>(asRef(entry) as KubeObject, patch), signal);
}

/**
 * Kinds the target's own controllers create for a copied object before the move's copy of
 * them arrives: the ClusterResourceSetBinding, which Cluster API's ClusterResourceSet
 * controller makes for each matching Cluster (it heeds only the ClusterResourceSet's paused
 * annotation, not the paused Cluster). Such an object is levelled with the source's content,
 * as `clusterctl move` overwrites an object that already exists in the target.
 */
function madeByTargetControllers(entry: ObjectRef): boolean {
  return entry.kind === 'ClusterResourceSetBinding' && groupOf(entry.apiVersion) === capiGroups.addons;
}

/** Rounds of re-copying objects that changed in the source after their copy (a reconcile in flight when the pause landed). */
const verifyRounds = 3;

/**
 * Every object is in the target with the source's content and owner references remapped
 * (one list per kind on each side). An object whose source changed after it was copied (a
 * controller's reconcile that was in flight when the pause landed) is copied again, up to
 * `verifyRounds` times.
 */
async function verifyAll(options: PivotEngineOptions, concurrency: number): Promise<void> {
  const { source, target, journal, sink, signal } = options;
  const targetUidOf = new Map(journal.objects.filter((o) => o.targetUid).map((o) => [o.sourceUid, o.targetUid!]));
  let pending = journal.objects.filter((o) => !o.preexisting);
  for (let round = 1; ; round++) {
    const problems: string[] = [];
    const stale: JournalObject[] = [];
    const [inSource, inTarget] = await Promise.all([listEntries(source, pending, concurrency, signal), listEntries(target, pending, concurrency, signal)]);
    // An interrupt cut the lists short: what they lack is not missing (the caller's advance reports the interrupt).
    if (signal?.aborted) return;
    for (const entry of pending) {
      const from = inSource.get(keyOf(entry));
      const to = inTarget.get(keyOf(entry));
      if (!from) {
        problems.push(`${keyOf(entry)} is missing in the source`);
        continue;
      }
      if (!to) {
        stale.push(entry);
        problems.push(`${keyOf(entry)} is missing in the target`);
        continue;
      }
      const difference = contentDifference(from, to, from.kind === 'Cluster');
      const expected = remapOwnerReferences(from.metadata.ownerReferences, targetUidOf).refs.map((r) => r.uid).sort();
      const actual = (to.metadata.ownerReferences ?? []).map((r) => r.uid).sort();
      const ownersDiffer = JSON.stringify(expected) !== JSON.stringify(actual);
      if (difference !== undefined || ownersDiffer) {
        stale.push(entry);
        problems.push(`${keyOf(entry)} ${difference !== undefined ? `differs at ${difference}` : `has owners ${actual.join(',')}, expected ${expected.join(',')}`}`);
      }
    }
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

/**
 * Removes the moved (namespaced) objects from a fenced source's storage, then lists them
 * through its API (one list per kind and namespace) until none is left: the API server
 * learns of the removals through its watch on the storage, as of any deletion.
 */
async function removeFromStorage(source: KubeClient, fence: FencedSource, journal: PivotJournal, concurrency: number, sink: EventSink, signal?: AbortSignal): Promise<void> {
  const entries = journal.objects.filter((o) => !o.global);
  const refs = await mapLimit(
    entries,
    concurrency,
    async (e): Promise<StoredObjectRef> => {
      const resource = await source.resource(e.apiVersion, e.kind);
      return { group: groupOf(e.apiVersion), resource: resource.name, ...(resource.namespaced && e.namespace ? { namespace: e.namespace } : {}), name: e.name };
    },
    signal,
  );
  if (signal?.aborted) return;
  const removed = await fence.removeObjects(refs);
  // The API server's lists may trail its watch by a moment: look until none is left.
  let still: string[] = [];
  const look = async (): Promise<Observation<void>> => {
    const left = await listEntries(source, entries, concurrency, signal);
    still = entries.filter((e) => left.has(keyOf(e))).map((e) => keyOf(e));
    return still.length === 0 ? { state: 'done', value: undefined, progress: 'gone' } : { state: 'waiting', value: undefined, progress: `${still.length} left` };
  };
  await until(polling(look, deletionPollMs), {
    what: 'the removal of the moved objects from the source',
    noProgressTimeoutMs: deletionNoProgressTimeoutMs,
    ...(signal ? { signal } : {}),
    onStall: () =>
      new ExternalError(`${still.length} moved object(s) are still in the source after their removal from its storage`, {
        details: still.sort(),
        hint: 'Run pivot again to remove them again; every copy in the target is complete and verified.',
      }),
  });
  sink.emit({ type: 'progress', task: 'pivot:delete', label: 'Removing moved objects from the stopped source', current: removed, total: entries.length, unit: 'objects', done: true });
}

/** Dependents before owners: one tier at a time, highest first, so no owner's deletion cascades into a dependent still to be handled. */
async function forEachTierReversed(entries: readonly JournalObject[], concurrency: number, signal: AbortSignal | undefined, fn: (entry: JournalObject) => Promise<void>): Promise<void> {
  const tiers = [...new Set(entries.map((e) => e.tier))].sort((a, b) => b - a);
  for (const tier of tiers) await mapLimit(entries.filter((e) => e.tier === tier), concurrency, fn, signal);
}

/** Tells CAPI controllers that a deletion is a move, not a teardown (no infrastructure cleanup), as clusterctl does. */
const deleteForMoveAnnotation = 'clusterctl.cluster.x-k8s.io/delete-for-move';

/**
 * Deletes those of `entries` that `client` holds (and `mine` accepts, as it lists them),
 * dependents first, and makes sure they are gone. One list per kind, then per object: a
 * merge patch that adds clusterctl's `delete-for-move` annotation and drops the finalizers
 * (left out for a core Secret or ConfigMap without finalizers: no provider validates or
 * finalizes those), then the delete. A finalizer a paused controller re-added between the
 * two (it cannot once the deletion started) is caught by a second list and dropped, with
 * each such object watched until it is gone. Returns how many were deleted.
 */
async function deleteEntries(client: KubeClient, entries: readonly JournalObject[], concurrency: number, signal?: AbortSignal, mine: (live: KubeObject) => boolean = () => true): Promise<number> {
  const live = await listEntries(client, entries, concurrency, signal);
  const doomed = entries.filter((e) => {
    const obj = live.get(keyOf(e));
    return obj !== undefined && mine(obj);
  });
  await forEachTierReversed(doomed, concurrency, signal, async (entry) => {
    const obj = live.get(keyOf(entry))!;
    const ref = asRef(entry) as KubeObject;
    const finalized = (obj.metadata.finalizers ?? []).length > 0;
    await retrying(`deleting ${keyOf(entry)}`, async () => {
      try {
        if (finalized || groupOf(entry.apiVersion) !== '') {
          await client.mergePatch(ref, { metadata: obj.metadata.deletionTimestamp ? { finalizers: null } : { annotations: { [deleteForMoveAnnotation]: '' }, finalizers: null } });
        }
        await client.delete(ref);
      } catch (error) {
        if (!(error instanceof KubeApiError && error.isNotFound)) throw error;
      }
    }, signal);
  });
  if (signal?.aborted) return 0;
  const left = await listEntries(client, doomed, concurrency, signal);
  await mapLimit(doomed.filter((e) => left.has(keyOf(e))), concurrency, (entry) => removeFinalizersAndDelete(client, entry, signal), signal);
  return doomed.length;
}

/** Time an object being deleted may stay as it is (not deleted, or holding the same finalizers) before the move fails: 1 minute. */
const deletionNoProgressTimeoutMs = 60_000;
/** Pause between two looks at an object being deleted. */
const deletionPollMs = 100;

/**
 * Deletes an object and makes sure it is gone, one look at a time: delete first, then drop
 * the finalizers (once the deletion has started no controller can add one back). For what
 * the batch of `deleteEntries` left: it waits, on the one waiting primitive, through
 * transient answers and fails when the object stayed as it was for a minute. Resolves to
 * whether the object was there at the first look.
 */
export async function removeFinalizersAndDelete(client: KubeClient, entry: ObjectRef & { sourceUid?: string }, signal?: AbortSignal): Promise<boolean> {
  const ref = asRef(entry) as KubeObject;
  let seen = 'not read yet';
  let wasThere: boolean | undefined;
  const look = async (): Promise<Observation<void>> => {
    try {
      let live = await client.get<KubeObject>(ref);
      wasThere ??= live !== undefined;
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
  return wasThere ?? false;
}

/**
 * Undoes a move that has not deleted anything from the source: deletes the copies in the
 * target (by the journal's names, only those carrying this pivot's source UIDs) and unpauses the source.
 */
export async function rollbackPivot(options: Omit<PivotEngineOptions, 'afterPhase' | 'replan' | 'fence'>): Promise<{ deleted: number }> {
  const { source, target, journal, sink, signal, dir } = options;
  if (phaseIndex(journal.phase) >= phaseIndex('agents-followed')) {
    throw new UsageError(`The move already ${journal.phase === 'agents-followed' ? 'handed the hosts\' agents over to the target' : 'deleted the objects from the source'} (phase ${journal.phase}); it cannot be rolled back`, {
      hint: 'Run `provisioner pivot` again (without --rollback) to finish the move into the target.',
    });
  }
  const followedAlready = await withdrawHandover(source, target, journal);
  if (followedAlready.length > 0) {
    throw new UsageError(`The agents of ${followedAlready.length} host(s) already follow the target (${followedAlready.join(', ')}); the move cannot be rolled back`, {
      hint: 'Run `provisioner pivot` again (without --rollback) to finish the move into the target: those agents no longer talk to the source.',
    });
  }
  const mine = new Set(journal.objects.map((o) => o.sourceUid));
  const entries = journal.objects.filter((o) => !o.preexisting);
  // Only the copies: an object of the same name that this pivot did not make is never deleted.
  const deleted = await deleteEntries(target, entries, Math.max(1, options.concurrency ?? defaultConcurrency), signal, (live) => mine.has(live.metadata.annotations?.[sourceUidAnnotation] ?? ''));
  if (signal?.aborted) throw new InterruptedError('The rollback was interrupted', { hint: 'Run `provisioner pivot --rollback` again to finish it.' });
  await setPaused(source, journal, false, signal);
  journal.rolledBack = true;
  journal.phase = 'planned';
  for (const o of journal.objects) delete o.targetUid;
  await writePivotJournal(dir, journal);
  log(sink, 'info', `Rolled back: deleted ${deleted} copied object(s) from the target and unpaused the source`);
  return { deleted };
}
