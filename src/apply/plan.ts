/**
 * The plan of a desired-set apply (Rancher's apply, wrangler's desiredset): computed
 * from the desired objects and what the cluster holds, before any write.
 *
 *   create     absent from the cluster
 *   patch      present and different (see compare.ts), or present outside any set (adopted)
 *   unchanged  present and the same
 *   delete     live in the set but absent from the new generation (the prune)
 *   conflict   present but recorded as another set's (never touched), or desired but
 *              still being deleted (applying it would only update an object about to vanish)
 *
 * The live set is found by the set's hash label, across namespaces, for every kind of
 * the desired objects plus the caller's extra kinds (a kind the new generation no longer
 * has at all can still be pruned). Membership is by annotations, not owner references,
 * so the set spans namespaces and cluster-scoped objects. A live object that carries our
 * hash label but a different set id or owner in its annotations is never touched. An
 * object of the set already being deleted (a finalizer holds it) needs no delete: it is
 * listed in `deleting`, not planned again. Objects Cluster API's topology controller
 * made from a ClusterClass (`topologyOwnedLabel`) are never the set's, even when they
 * carry its label: the controller copies a class template's metadata into its copies,
 * which it owns and deletes itself.
 */
import {
  desiredSetSelector,
  objectSetHashKey,
  objectSetIdKey,
  objectSetOwnerGvkKey,
  objectSetOwnerNameKey,
  objectSetOwnerNamespaceKey,
  ownershipMetadata,
  type DesiredSetOwner,
} from '../config/ownership.js';
import { ConfigError, type FieldProblem } from '../errors.js';
import { log, nullSink, type EventSink } from '../events.js';
import { KubeApiError, type KubeObject } from '../kube/client.js';
import { describeObject, groupKind, objectKey, refOf, type ApplyClient, type ObjectRef } from './client.js';
import { appliedHash, appliedHashKey, driftPaths, withAppliedHash } from './compare.js';
import { topologyOwnedLabel } from '../capi.js';
import { mapLimit } from '../concurrency.js';
import { rankOf } from './order.js';

/** The objects one generation contains, and their owner. */
export interface DesiredSet {
  owner: DesiredSetOwner;
  /** Each already carries the owner's annotations and hash label (ownershipMetadata). */
  objects: readonly KubeObject[];
}

export interface KindRef {
  apiVersion: string;
  kind: string;
}

export interface PlanOptions {
  /** Kinds to list for pruning besides those of the desired objects. Default: none. */
  extraKinds?: readonly KindRef[];
  /** List calls at once. Default 8 (as `defaultConcurrency` in execute.ts). */
  concurrency?: number;
  /** Default: events dropped. */
  sink?: EventSink;
  signal?: AbortSignal;
}

export type PlanAction = 'create' | 'patch' | 'unchanged' | 'delete' | 'conflict';
const planActions: readonly PlanAction[] = ['create', 'patch', 'unchanged', 'delete', 'conflict'];

export interface PlanEntry {
  action: PlanAction;
  ref: ObjectRef;
  /** `group/Kind/namespace/name`. */
  key: string;
  /** Apply rank (order.ts); deletes run in reverse. */
  rank: number;
  /**
   * What execution sends: for create, patch and unchanged the desired object with its
   * applied hash; for delete, the live object; for conflict, the desired object (unsent).
   */
  object: KubeObject;
  /** Why: a patch's drifted paths or cause, a conflict's owner. Empty otherwise. */
  reasons: string[];
  /** For a conflict: another set owns the object, or it is still being deleted. */
  blockedBy?: 'owner' | 'deletion';
}

export interface Plan {
  owner: DesiredSetOwner;
  /** The label selector that listed the live set. */
  selector: string;
  /** Applies by rank (desired order within a rank), then deletes in reverse rank order. */
  entries: PlanEntry[];
  counts: Record<PlanAction, number>;
  /** Objects of the set that are being deleted and no longer desired: nothing left to do. */
  deleting: ObjectRef[];
  /** `group/Kind` of every kind listed. */
  kindsListed: string[];
  /** Extra kinds the server does not serve (no CRD): nothing of theirs can be live. */
  kindsNotServed: string[];
  durationMs: number;
}

/** List calls at once while planning. */
const defaultListConcurrency = 8;

/**
 * Computes the plan. Reads only: one list per kind by label, plus, when there are objects
 * to create, one list per kind and namespace of them to tell a true create from an
 * object that exists outside the set (adopted, or another set's: a conflict).
 */
export async function planApply(client: ApplyClient, set: DesiredSet, options: PlanOptions = {}): Promise<Plan> {
  const started = performance.now();
  const sink = options.sink ?? nullSink;
  const concurrency = options.concurrency ?? defaultListConcurrency;
  checkDesired(set);
  const selector = desiredSetSelector(set.owner);

  // Kinds to list, once per group/Kind; a desired object's version is preferred.
  const kinds = new Map<string, KindRef>();
  for (const obj of set.objects) if (!kinds.has(groupKind(obj.apiVersion, obj.kind))) kinds.set(groupKind(obj.apiVersion, obj.kind), { apiVersion: obj.apiVersion, kind: obj.kind });
  for (const extra of options.extraKinds ?? []) if (!kinds.has(groupKind(extra.apiVersion, extra.kind))) kinds.set(groupKind(extra.apiVersion, extra.kind), extra);

  const live = new Map<string, KubeObject>();
  const notServed: string[] = [];
  await mapLimit(
    [...kinds.entries()],
    concurrency,
    async ([gk, kind]) => {
      const items = await listServed(client, kind, { labelSelector: selector });
      if (!items) return void notServed.push(gk);
      for (const item of items) if (item.metadata.labels?.[topologyOwnedLabel] === undefined) live.set(objectKey(item), item);
    },
    options.signal,
  );
  options.signal?.throwIfAborted();

  const entries: PlanEntry[] = [];
  const toCreate: { obj: KubeObject; entry: PlanEntry }[] = [];
  const desiredKeys = new Set<string>();
  for (const desired of set.objects) {
    const key = objectKey(desired);
    desiredKeys.add(key);
    const send = withAppliedHash(desired);
    const entry: PlanEntry = { action: 'create', ref: refOf(desired), key, rank: rankOf(desired.apiVersion, desired.kind), object: send, reasons: [] };
    entries.push(entry);
    const current = live.get(key);
    if (!current) {
      toCreate.push({ obj: desired, entry });
      continue;
    }
    const foreign = foreignOwner(current, set.owner);
    if (foreign) {
      entry.action = 'conflict';
      entry.blockedBy = 'owner';
      entry.reasons.push(foreign);
      continue;
    }
    if (current.metadata.deletionTimestamp) {
      entry.action = 'conflict';
      entry.blockedBy = 'deletion';
      entry.reasons.push(`is being deleted since ${current.metadata.deletionTimestamp}: apply again once it is gone`);
      continue;
    }
    const reasons = changeReasons(send, current);
    entry.action = reasons.length > 0 ? 'patch' : 'unchanged';
    entry.reasons.push(...reasons);
  }

  await classifyCreates(client, toCreate, set.owner, concurrency, options.signal);

  const deletes: PlanEntry[] = [];
  const deleting: ObjectRef[] = [];
  for (const [key, current] of live) {
    if (desiredKeys.has(key) || foreignOwner(current, set.owner)) continue;
    if (current.metadata.deletionTimestamp) {
      deleting.push(refOf(current));
      continue;
    }
    deletes.push({ action: 'delete', ref: refOf(current), key, rank: rankOf(current.apiVersion, current.kind), object: current, reasons: [] });
  }
  // Stable sort: desired order within a rank.
  entries.sort((a, b) => a.rank - b.rank);
  deletes.sort((a, b) => b.rank - a.rank || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  entries.push(...deletes);

  const counts = Object.fromEntries(planActions.map((a) => [a, 0])) as Record<PlanAction, number>;
  for (const entry of entries) counts[entry.action] += 1;
  const plan: Plan = {
    owner: set.owner,
    selector,
    entries,
    counts,
    deleting,
    kindsListed: [...kinds.keys()].filter((k) => !notServed.includes(k)),
    kindsNotServed: notServed.sort(),
    durationMs: performance.now() - started,
  };
  log(sink, 'debug', `apply plan: ${summarizeCounts(counts)} (${Math.round(plan.durationMs)} ms)`, { ...counts, durationMs: Math.round(plan.durationMs) });
  return plan;
}

/** Lists a kind; undefined when the server does not serve it. */
async function listServed(client: ApplyClient, kind: KindRef, options: { namespace?: string; labelSelector?: string }): Promise<KubeObject[] | undefined> {
  try {
    return await client.list(kind.apiVersion, kind.kind, options);
  } catch (error) {
    if (error instanceof KubeApiError && error.isNotFound) return undefined;
    throw error;
  }
}

/** Why `send` would change `current`: empty when applying it changes nothing. */
function changeReasons(send: KubeObject, current: KubeObject): string[] {
  const drift = driftPaths(send, current);
  if (drift.length > 0) return drift;
  // The same values, yet a different hash: something we used to set is no longer desired.
  const lastApplied = current.metadata.annotations?.[appliedHashKey];
  if (lastApplied === undefined) return ['not applied by provisioner before'];
  if (lastApplied !== appliedHash(send)) return ['fields removed since the last apply'];
  return [];
}

/**
 * A create can find the object already there without our label: made by hand or by
 * another tool (we adopt it: a patch), or recorded as another set's (a conflict).
 * One list per kind and namespace, only for kinds with objects to create.
 */
async function classifyCreates(client: ApplyClient, creates: { obj: KubeObject; entry: PlanEntry }[], owner: DesiredSetOwner, concurrency: number, signal?: AbortSignal): Promise<void> {
  const groups = new Map<string, { kind: KindRef; namespace: string | undefined; items: { obj: KubeObject; entry: PlanEntry }[] }>();
  for (const create of creates) {
    const ns = create.obj.metadata.namespace;
    const id = `${groupKind(create.obj.apiVersion, create.obj.kind)}/${ns ?? ''}`;
    let group = groups.get(id);
    if (!group) groups.set(id, (group = { kind: { apiVersion: create.obj.apiVersion, kind: create.obj.kind }, namespace: ns, items: [] }));
    group.items.push(create);
  }
  await mapLimit(
    [...groups.values()],
    concurrency,
    async (group) => {
      const items = await listServed(client, group.kind, group.namespace ? { namespace: group.namespace } : {});
      if (!items) return; // not served: the apply will say so, object by object
      const existing = new Map(items.map((item) => [objectKey(item), item]));
      for (const { entry } of group.items) {
        const current = existing.get(entry.key);
        if (!current) continue;
        const foreign = foreignOwner(current, owner);
        if (foreign) {
          entry.action = 'conflict';
          entry.blockedBy = 'owner';
          entry.reasons.push(foreign);
        } else if (current.metadata.deletionTimestamp) {
          entry.action = 'conflict';
          entry.blockedBy = 'deletion';
          entry.reasons.push(`is being deleted since ${current.metadata.deletionTimestamp}: apply again once it is gone`);
        } else {
          entry.action = 'patch';
          entry.reasons.push('exists outside any desired set: adopting it');
        }
      }
    },
    signal,
  );
  signal?.throwIfAborted();
}

/** Undefined when `obj` is ours or in no set; otherwise, whose it is. */
function foreignOwner(obj: KubeObject, owner: DesiredSetOwner): string | undefined {
  const annotations = obj.metadata.annotations ?? {};
  const label = obj.metadata.labels?.[objectSetHashKey];
  const id = annotations[objectSetIdKey];
  if (id === undefined && label === undefined && annotations[objectSetHashKey] === undefined) return undefined;
  const ours = ownershipMetadata(owner).annotations;
  const keys = [objectSetIdKey, objectSetOwnerGvkKey, objectSetOwnerNameKey, objectSetOwnerNamespaceKey];
  if (keys.every((k) => annotations[k] === ours[k]) && (label === undefined || label === ownershipMetadata(owner).labels[objectSetHashKey])) return undefined;
  const ownerNs = annotations[objectSetOwnerNamespaceKey];
  const ownerName = annotations[objectSetOwnerNameKey];
  return `belongs to desired set ${JSON.stringify(id ?? '')} of ${annotations[objectSetOwnerGvkKey] ?? 'an unknown owner'} ${ownerNs ? `${ownerNs}/` : ''}${ownerName ?? ''}`.trimEnd();
}

/** Every desired object must name itself and carry exactly the owner's ownership metadata, once. */
function checkDesired(set: DesiredSet): void {
  const expected = ownershipMetadata(set.owner);
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  set.objects.forEach((obj, index) => {
    const where = obj.metadata?.name ? describeObject(refOf(obj)) : `objects[${index}]`;
    if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) {
      problems.push({ path: where, message: 'apiVersion, kind and metadata.name are required' });
      return;
    }
    const key = objectKey(obj);
    if (seen.has(key)) problems.push({ path: where, message: 'appears twice in the desired set' });
    seen.add(key);
    for (const [k, v] of Object.entries(expected.annotations)) {
      if (obj.metadata.annotations?.[k] !== v) problems.push({ path: `${where} metadata.annotations[${JSON.stringify(k)}]`, message: `must be ${JSON.stringify(v)}, is ${JSON.stringify(obj.metadata.annotations?.[k] ?? null)}` });
    }
    for (const [k, v] of Object.entries(expected.labels)) {
      if (obj.metadata.labels?.[k] !== v) problems.push({ path: `${where} metadata.labels[${JSON.stringify(k)}]`, message: `must be ${JSON.stringify(v)}, is ${JSON.stringify(obj.metadata.labels?.[k] ?? null)}` });
    }
  });
  if (problems.length > 0) {
    throw new ConfigError(`${problems.length} problem(s) with the objects to apply`, problems, {
      hint: 'Keep the objectset.rio.cattle.io annotations and label the generator wrote (they record which install config owns each object), or regenerate the manifests.',
    });
  }
}

function summarizeCounts(counts: Record<PlanAction, number>): string {
  const parts = [`${counts.create} to create`, `${counts.patch} to patch`, `${counts.delete} to delete`, `${counts.unchanged} unchanged`];
  if (counts.conflict > 0) parts.push(`${counts.conflict} in conflict`);
  return parts.join(', ');
}

const symbols: Record<PlanAction, string> = { create: '+', patch: '~', unchanged: '=', delete: '-', conflict: '!' };

export interface FormatPlanOptions {
  /** List unchanged objects too. Default true (one line per object of the set). */
  unchanged?: boolean;
}

/** One line per object (`+ create Kind ns/name`, `~ patch … : why`, `- delete …`), then a summary line. */
export function formatPlan(plan: Plan, options: FormatPlanOptions = {}): string {
  const lines: string[] = [];
  for (const entry of plan.entries) {
    if (entry.action === 'unchanged' && options.unchanged === false) continue;
    const why = entry.reasons.length > 0 ? `: ${entry.reasons.join(', ')}` : '';
    lines.push(`${symbols[entry.action]} ${entry.action} ${describeObject(entry.ref)}${why}`);
  }
  if (plan.deleting.length > 0) lines.push(`(${plan.deleting.length} object(s) no longer desired are already being deleted: ${plan.deleting.map(describeObject).join(', ')})`);
  lines.push(`Plan: ${summarizeCounts(plan.counts)}.`);
  return lines.join('\n') + '\n';
}
