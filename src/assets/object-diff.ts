/**
 * Object-level diffs: match two sets of Kubernetes objects by identity (group, kind,
 * namespace, name) and show each difference as a unified diff of its YAML. Used by
 * `provisioner diff` for disk vs. generated, and — once a control plane runs — for live
 * vs. disk through a `LiveObjectSource`.
 */
import { stringify } from 'yaml';
import type { DesiredSetOwner } from '../config/index.js';
import { objectKey as identityKey } from '../object-key.js';
import { unifiedDiff } from './line-diff.js';

export interface LocatedObject {
  object: Record<string, unknown>;
  /** File holding it, relative to the install directory (absent for live objects). */
  file?: string;
}

export type ObjectChangeKind = 'added' | 'removed' | 'changed' | 'replaced' | 'unchanged';

export interface ObjectChange {
  kind: ObjectChangeKind;
  /** `group/Kind namespace/name` of the object (the new one for `replaced`). */
  key: string;
  /** For `replaced`: the identity of the object it replaces in the same file. */
  replacedKey?: string;
  file?: string;
  /** Unified diff from the `before` side to the `after` side; empty for `unchanged`. */
  diff: string;
}

export interface DiffLabels {
  /** Side names, e.g. `on disk` and `generated`. */
  before: string;
  after: string;
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** `group/Kind namespace/name` (object-key.ts) of an object read from a file, whatever fields it lacks. */
export function objectKey(object: Record<string, unknown>): string {
  const metadata = (object.metadata ?? {}) as Record<string, unknown>;
  return identityKey({ apiVersion: str(object.apiVersion), kind: str(object.kind), namespace: str(metadata.namespace), name: str(metadata.name) });
}

function toYaml(object: Record<string, unknown>): string {
  return stringify(object, { aliasDuplicateObjects: false, lineWidth: 0, sortMapEntries: false });
}

/**
 * Compares `before` and `after`. An object whose identity changed inside the same file
 * (a template renamed because its spec changed) is `replaced`, with the diff between the two.
 */
export function diffObjects(before: readonly LocatedObject[], after: readonly LocatedObject[], labels: DiffLabels): ObjectChange[] {
  const beforeByKey = new Map(before.map((o) => [objectKey(o.object), o]));
  const afterByKey = new Map(after.map((o) => [objectKey(o.object), o]));
  const changes: ObjectChange[] = [];
  const pairedBefore = new Set<string>();

  const label = (side: string, o: LocatedObject | undefined, key: string) => `${o?.file ?? key} (${side})`;

  for (const [key, target] of afterByKey) {
    const source = beforeByKey.get(key);
    if (source) {
      pairedBefore.add(key);
      const diff = unifiedDiff(toYaml(source.object), toYaml(target.object), { before: label(labels.before, source, key), after: label(labels.after, target, key) });
      changes.push({ kind: diff ? 'changed' : 'unchanged', key, diff, ...(target.file ? { file: target.file } : {}) });
      continue;
    }
    // Same file, one object on each side, different identity: a rename (new template hash).
    const sameFile = target.file !== undefined ? before.filter((o) => o.file === target.file) : [];
    const onlyOther = sameFile.length === 1 && after.filter((o) => o.file === target.file).length === 1 ? sameFile[0] : undefined;
    const otherKey = onlyOther ? objectKey(onlyOther.object) : undefined;
    if (onlyOther && otherKey && !afterByKey.has(otherKey)) {
      pairedBefore.add(otherKey);
      const diff = unifiedDiff(toYaml(onlyOther.object), toYaml(target.object), { before: label(labels.before, onlyOther, otherKey), after: label(labels.after, target, key) });
      changes.push({ kind: 'replaced', key, replacedKey: otherKey, diff, ...(target.file ? { file: target.file } : {}) });
      continue;
    }
    changes.push({ kind: 'added', key, diff: unifiedDiff('', toYaml(target.object), { before: '/dev/null', after: label(labels.after, target, key) }), ...(target.file ? { file: target.file } : {}) });
  }
  for (const [key, source] of beforeByKey) {
    if (pairedBefore.has(key)) continue;
    changes.push({ kind: 'removed', key, diff: unifiedDiff(toYaml(source.object), '', { before: label(labels.before, source, key), after: '/dev/null' }), ...(source.file ? { file: source.file } : {}) });
  }
  const order = (c: ObjectChange) => c.file ?? `~${c.key}`;
  return changes.sort((x, y) => (order(x) < order(y) ? -1 : order(x) > order(y) ? 1 : 0));
}

/**
 * Reads the live objects of a desired set from a running control plane: the extension
 * point for `provisioner diff` against live state. The apply engine implements it in
 * src/kube (only that module talks to the API server); `diff` uses it when given one.
 */
export interface LiveObjectSource {
  /** Where the objects come from, for the report, e.g. `local control plane https://127.0.0.1:43211`. */
  readonly description: string;
  /**
   * Every object carrying the set's hash label (`selector`, wrangler's), across kinds and
   * namespaces, with server-populated fields (status, managedFields, uid, resourceVersion,
   * creationTimestamp, generation, defaulted fields the manifests do not set) removed, so
   * that only differences the user can act on remain.
   */
  listDesiredSet(owner: DesiredSetOwner, selector: string, signal?: AbortSignal): Promise<Record<string, unknown>[]>;
}
