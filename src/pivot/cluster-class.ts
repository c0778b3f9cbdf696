/**
 * ClusterClasses in a move, as clusterctl's object graph treats them: a Cluster whose
 * `spec.topology.classRef` names a class takes the class along, and the class takes the
 * templates it names. The class goes first: it is created in the target before the
 * Clusters that use it (the Cluster webhook checks a topology against its class) and
 * deleted from the source after them (the ClusterClass webhook refuses to delete a class
 * a Cluster still uses). Pure: no I/O.
 */
import type { KubeObject } from '../kube/client.js';
import { capiGroups } from '../capi.js';

const isCore = (obj: KubeObject) => obj.apiVersion.startsWith(`${capiGroups.core}/`);

/** `namespace/name` of the ClusterClass a Cluster's topology names; undefined for anything else. */
function classKeyOf(obj: KubeObject): string | undefined {
  if (obj.kind !== 'Cluster' || !isCore(obj)) return undefined;
  const classRef = (obj.spec as { topology?: { classRef?: { name?: string; namespace?: string } } } | undefined)?.topology?.classRef;
  if (!classRef?.name) return undefined;
  return `${classRef.namespace ?? obj.metadata.namespace ?? ''}/${classRef.name}`;
}

/** `namespace/Kind/name` of every template a ClusterClass names (its `templateRef`s, in its namespace). */
function templateKeysOf(obj: KubeObject): string[] {
  if (obj.kind !== 'ClusterClass' || !isCore(obj)) return [];
  const keys: string[] = [];
  const walk = (value: unknown, key: string): void => {
    if (Array.isArray(value)) for (const item of value) walk(item, key);
    else if (value && typeof value === 'object') {
      const record = value as Record<string, unknown>;
      if (key === 'templateRef' && typeof record.kind === 'string' && typeof record.name === 'string') keys.push(`${obj.metadata.namespace ?? ''}/${record.kind}/${record.name}`);
      else for (const [k, v] of Object.entries(record)) walk(v, k);
    }
  };
  walk(obj.spec, '');
  return keys;
}

/** Whether `obj` is a ClusterClass or template that a selected object (a Cluster, or a class) names. */
export function namedByTopology(obj: KubeObject, selected: Iterable<KubeObject>): boolean {
  const wanted = new Set<string>();
  for (const s of selected) {
    const classKey = classKeyOf(s);
    if (classKey) wanted.add(`class:${classKey}`);
    for (const template of templateKeysOf(s)) wanted.add(`template:${template}`);
  }
  if (obj.kind === 'ClusterClass' && isCore(obj) && wanted.has(`class:${obj.metadata.namespace ?? ''}/${obj.metadata.name}`)) return true;
  return wanted.has(`template:${obj.metadata.namespace ?? ''}/${obj.kind}/${obj.metadata.name}`);
}

/** The UIDs each object must come after besides its owners: a topology Cluster's ClusterClass (when it moves too). */
export function classDependencies(objects: readonly KubeObject[]): Map<string, string[]> {
  const classUids = new Map<string, string>();
  for (const o of objects) if (o.kind === 'ClusterClass' && isCore(o) && o.metadata.uid) classUids.set(`${o.metadata.namespace ?? ''}/${o.metadata.name}`, o.metadata.uid);
  const dependencies = new Map<string, string[]>();
  for (const o of objects) {
    const classKey = classKeyOf(o);
    const classUid = classKey ? classUids.get(classKey) : undefined;
    if (classUid && o.metadata.uid) dependencies.set(o.metadata.uid, [classUid]);
  }
  return dependencies;
}
