/**
 * The object graph of a move, as clusterctl's `objectgraph.go` builds it, on plain JSON
 * objects: which objects belong to the clusters being moved, in what order they are
 * created in the target (owners first), how owner references are remapped to the UIDs
 * the target gave, and what "equal" means when a copy is verified. Pure: no I/O.
 */
import type { KubeObject, OwnerReference } from '../kube/client.js';
import { objectKey } from '../object-key.js';
import { classDependencies, namedByTopology } from './cluster-class.js';

/** Label that marks a CRD whose objects `clusterctl move` (and we) move. */
export const clusterctlLabel = 'clusterctl.cluster.x-k8s.io';
/** Label that makes an object (Secret, ConfigMap, any kind) move with its cluster. */
const moveLabel = 'clusterctl.cluster.x-k8s.io/move';
/** Label that makes an object and everything it owns, transitively, move. */
const moveHierarchyLabel = 'clusterctl.cluster.x-k8s.io/move-hierarchy';
/** Label CAPI sets on every object of a cluster. */
export const clusterNameLabel = 'cluster.x-k8s.io/cluster-name';
/** Secrets CAPI names after a cluster (`<cluster>-<suffix>`). */
const clusterSecretSuffixes = ['kubeconfig', 'ca', 'etcd', 'sa', 'proxy', 'apiserver-etcd-client', 'etcd-client'] as const;

/** One object of the move, as the journal records it. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

function refOf(obj: KubeObject): ObjectRef {
  return { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}) };
}

/** `group/Kind ns/name` (object-key.ts), for messages and map keys. */
export function keyOf(ref: ObjectRef | KubeObject): string {
  return objectKey('metadata' in ref ? refOf(ref) : ref);
}

/** What a move takes: the namespaced objects to move, and cluster-scoped ones to copy (never deleted from the source). */
export interface MoveSelection {
  objects: KubeObject[];
  global: KubeObject[];
}

export interface SelectOptions {
  /** The Clusters being moved (each with its namespace). */
  clusters: readonly KubeObject[];
  /** Every namespaced object of the labelled CRDs in the clusters' namespaces. */
  candidates: readonly KubeObject[];
  /** Secrets and ConfigMaps of those namespaces. */
  secretsAndConfigMaps: readonly KubeObject[];
  /** Cluster-scoped objects of the labelled CRDs (copied, not deleted). Default none. */
  global?: readonly KubeObject[];
  /**
   * Only the named clusters' objects (label, owner chain, references), when other clusters
   * share the namespace. Default false: every candidate of the namespaces moves.
   */
  onlyTheseClusters?: boolean;
}

/**
 * Picks what moves: the candidates (all, or those reachable from the Clusters through
 * the cluster-name label, owner references and spec references, a topology's
 * ClusterClass and the templates it names among them), plus the Secrets and
 * ConfigMaps that are owned by, referenced by or named after a moving object or cluster,
 * or labelled to move; `move-hierarchy` pulls in everything its holder owns.
 */
export function selectObjects(options: SelectOptions): MoveSelection {
  const clusterKeys = new Set(options.clusters.map((c) => `${c.metadata.namespace}/${c.metadata.name}`));
  const inCluster = (o: KubeObject) => clusterKeys.has(`${o.metadata.namespace}/${o.metadata.labels?.[clusterNameLabel] ?? ''}`);
  const all = [...options.candidates, ...options.secretsAndConfigMaps];
  const byUid = new Map([...options.clusters, ...all].filter((o) => o.metadata.uid).map((o) => [o.metadata.uid!, o]));
  const selected = new Map<string, KubeObject>();
  const add = (o: KubeObject) => selected.set(o.metadata.uid ?? keyOf(o), o);
  const isSelected = (o: KubeObject) => selected.has(o.metadata.uid ?? keyOf(o));

  for (const c of options.clusters) add(c);
  for (const o of options.candidates) {
    if (!options.onlyTheseClusters || inCluster(o) || o.metadata.labels?.[moveLabel] !== undefined) add(o);
  }
  for (const o of options.secretsAndConfigMaps) {
    const labels = o.metadata.labels ?? {};
    if (labels[moveLabel] !== undefined || labels[moveHierarchyLabel] !== undefined || inCluster(o)) add(o);
    else if (options.clusters.some((c) => c.metadata.namespace === o.metadata.namespace && clusterSecretSuffixes.some((s) => o.metadata.name === `${c.metadata.name}-${s}`))) add(o);
  }
  // Closure: owners' dependents, move-hierarchy descendants, objects named in specs.
  for (let changed = true; changed; ) {
    changed = false;
    const referenced = new Set<string>();
    for (const o of selected.values()) for (const name of referencedNames(o)) referenced.add(`${o.metadata.namespace ?? ''}/${name}`);
    for (const o of all) {
      if (isSelected(o)) continue;
      const ownedBySelected = (o.metadata.ownerReferences ?? []).some((r) => {
        const owner = byUid.get(r.uid);
        return owner !== undefined && isSelected(owner);
      });
      const isConfig = o.kind === 'Secret' || o.kind === 'ConfigMap';
      const named = (isConfig && referenced.has(`${o.metadata.namespace ?? ''}/${o.metadata.name}`)) || namedByTopology(o, selected.values());
      if (ownedBySelected || named) {
        add(o);
        changed = true;
      }
    }
  }
  return { objects: [...selected.values()], global: [...(options.global ?? [])] };
}

/** Every `name`-like string in an object's spec: refs (`{kind, name}`), `dataSecretName`, `secretName`... */
export function referencedNames(obj: KubeObject): string[] {
  const names: string[] = [];
  const walk = (value: unknown, key: string): void => {
    if (Array.isArray(value)) for (const v of value) walk(v, key);
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, k);
    else if (typeof value === 'string' && (key === 'name' || /SecretName$|secretName$|^dataSecretName$/.test(key))) names.push(value);
  };
  walk(obj['spec'], '');
  return names;
}

/**
 * Creation order: tiers of objects whose owners (within the set) are all in earlier
 * tiers, so an owner's target UID is known before its dependents are created; a
 * topology Cluster's ClusterClass counts as its owner here, as in clusterctl (deletes
 * run in reverse, so the class goes after its Clusters). Objects of one tier may be
 * created in parallel. An owner cycle (never made by CAPI) ends up
 * in the last tier, its references set in the fix-up pass.
 */
export function orderByOwners(objects: readonly KubeObject[]): KubeObject[][] {
  const uids = new Set(objects.map((o) => o.metadata.uid).filter((u): u is string => !!u));
  const classes = classDependencies(objects);
  const dependencies = (o: KubeObject) => [...(o.metadata.ownerReferences ?? []).map((r) => r.uid), ...(classes.get(o.metadata.uid ?? '') ?? [])];
  const placed = new Set<string>();
  let remaining = [...objects];
  const tiers: KubeObject[][] = [];
  while (remaining.length > 0) {
    const ready = remaining.filter((o) => dependencies(o).every((uid) => !uids.has(uid) || placed.has(uid) || uid === o.metadata.uid));
    if (ready.length === 0) {
      tiers.push(sortStable(remaining));
      break;
    }
    tiers.push(sortStable(ready));
    for (const o of ready) if (o.metadata.uid) placed.add(o.metadata.uid);
    const readySet = new Set(ready);
    remaining = remaining.filter((o) => !readySet.has(o));
  }
  return tiers;
}

function sortStable(objects: KubeObject[]): KubeObject[] {
  return [...objects].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
}

/**
 * Owner references with source UIDs replaced by the target's. A reference whose owner
 * has no target UID (yet) is left out — a reference to a UID that does not exist would
 * make the target's garbage collector delete the object. `complete` says whether any was left out.
 */
export function remapOwnerReferences(refs: readonly OwnerReference[] | undefined, targetUidOf: ReadonlyMap<string, string>): { refs: OwnerReference[]; complete: boolean } {
  const out: OwnerReference[] = [];
  let complete = true;
  for (const r of refs ?? []) {
    const uid = targetUidOf.get(r.uid);
    if (uid) out.push({ ...r, uid });
    else complete = false;
  }
  return { refs: out, complete };
}

/** Metadata that the target assigns or that describes the source's copy, never copied. */
const serverMetadata = ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink'] as const;

/** The body to create in the target: the object without server metadata, owner references, or status (set through its subresource). */
export function copyBody(obj: KubeObject, ownerReferences: OwnerReference[], annotations: Record<string, string>): KubeObject {
  const metadata: KubeObject['metadata'] = { ...obj.metadata };
  for (const key of serverMetadata) delete metadata[key];
  delete metadata.ownerReferences;
  if (ownerReferences.length > 0) metadata.ownerReferences = ownerReferences;
  metadata.annotations = { ...(obj.metadata.annotations ?? {}), ...annotations };
  const { status: _status, ...rest } = obj;
  return { ...rest, metadata } as KubeObject;
}

/**
 * The source's object with the status its copy gets. A copy's generation starts again at 1,
 * so an `observedGeneration` (the status's own, or a condition's) that was current in the
 * source, equal to its generation, becomes the copy's: whoever compares the two then sees
 * the copy as handled, not as a spec never acted on (an Applied NodePlan at generation 3
 * would otherwise be run again by its agent). One that lagged stays behind the copy's too.
 */
export function statusForCopy(source: KubeObject, copyGeneration: number | undefined): KubeObject {
  const status = source['status'];
  const generation = source.metadata.generation;
  if (!status || typeof status !== 'object' || generation === undefined || copyGeneration === undefined) return source;
  const rebase = (observed: unknown): unknown => (observed === generation ? copyGeneration : typeof observed === 'number' ? Math.min(observed, copyGeneration - 1) : observed);
  const rebased: Record<string, unknown> = { ...(status as Record<string, unknown>) };
  if ('observedGeneration' in rebased) rebased['observedGeneration'] = rebase(rebased['observedGeneration']);
  if (Array.isArray(rebased['conditions'])) {
    rebased['conditions'] = rebased['conditions'].map((c: unknown) =>
      c && typeof c === 'object' && 'observedGeneration' in c ? { ...(c as Record<string, unknown>), observedGeneration: rebase((c as Record<string, unknown>)['observedGeneration']) } : c,
    );
  }
  return { ...source, status: rebased };
}

/**
 * What must be equal between a source object and its copy: everything but metadata and
 * status (spec, data, type...), plus labels. `ignorePaused` leaves out a Cluster's
 * `spec.paused`, which the move itself toggles.
 */
function normalizeForCompare(obj: KubeObject, ignorePaused = false): unknown {
  const { metadata, status: _status, apiVersion: _a, kind: _k, ...rest } = obj;
  const body = JSON.parse(JSON.stringify(rest)) as Record<string, unknown>;
  if (ignorePaused && body['spec'] && typeof body['spec'] === 'object') delete (body['spec'] as Record<string, unknown>)['paused'];
  return canonical({ ...body, labels: metadata.labels ?? {} });
}

/** JSON with sorted keys, so key order never makes two equal objects differ. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

export function sameContent(source: KubeObject, target: KubeObject, ignorePaused = false): boolean {
  return contentDifference(source, target, ignorePaused) === undefined;
}

/** The first path (e.g. `spec.replicas`, `labels.a`) at which the compared content differs; undefined when equal. */
export function contentDifference(source: KubeObject, target: KubeObject, ignorePaused = false): string | undefined {
  const walk = (a: unknown, b: unknown, at: string): string | undefined => {
    if (a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
      for (const key of keys) {
        const found = walk((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], at ? `${at}.${key}` : key);
        if (found !== undefined) return found;
      }
      return undefined;
    }
    return JSON.stringify(a) === JSON.stringify(b) ? undefined : at || '(root)';
  };
  return walk(normalizeForCompare(source, ignorePaused), normalizeForCompare(target, ignorePaused), '');
}

/**
 * Whether a kind's controllers rebuild its status by themselves, so that a move need not
 * copy it: the kinds of Cluster API's groups (`cluster.x-k8s.io` and `*.cluster.x-k8s.io`:
 * core, bootstrap, control plane, infrastructure, IPAM, add-ons), whose providers are
 * bound by Cluster API's clusterctl contract — "Status subresource is never restored"
 * by `clusterctl move`, and must be rebuildable from spec, metadata and the outside world.
 * Any other group (our own agent provider's Hosts, say, whose status records what nothing
 * can rebuild) keeps its status through the move.
 */
export function statusRebuiltByControllers(group: string): boolean {
  return group === 'cluster.x-k8s.io' || group.endsWith('.cluster.x-k8s.io');
}

/** What a copy must match its source in, as one JSON value: everything but metadata and status, plus labels and owner references. */
export function copiedContent(obj: KubeObject): Record<string, unknown> {
  const { metadata, status: _status, apiVersion: _a, kind: _k, ...rest } = obj;
  return { ...rest, metadata: { labels: metadata.labels ?? {}, ownerReferences: metadata.ownerReferences ?? [] } };
}

/**
 * The JSON merge patch (RFC 7386) that turns `current` into `desired`: changed and new
 * keys set, missing keys set to null, arrays replaced whole; undefined when they are equal.
 * How a stale copy is brought level with its source without owning its fields (a copy is
 * created with a POST, so a server-side apply could not remove a field the source dropped).
 */
export function mergePatchBetween(current: unknown, desired: unknown): unknown {
  const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isMap(current) && isMap(desired)) {
    const patch: Record<string, unknown> = {};
    for (const key of new Set([...Object.keys(current), ...Object.keys(desired)])) {
      if (!(key in desired)) patch[key] = null;
      else if (!(key in current)) patch[key] = desired[key];
      else {
        const inner = mergePatchBetween(current[key], desired[key]);
        if (inner !== undefined) patch[key] = inner;
      }
    }
    return Object.keys(patch).length > 0 ? patch : undefined;
  }
  return JSON.stringify(canonical(current)) === JSON.stringify(canonical(desired)) ? undefined : desired;
}

/** Objects per kind, in the order of first appearance: the dry-run plan. */
export function countByKind(tiers: readonly KubeObject[][]): { kind: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const o of tiers.flat()) counts.set(o.kind, (counts.get(o.kind) ?? 0) + 1);
  return [...counts].map(([kind, count]) => ({ kind, count }));
}
