/**
 * The narrow cluster interface the apply engine needs. `KubeClient` (src/kube/client.ts)
 * satisfies it structurally; unit tests pass a fake. Keeping it to three calls keeps the
 * engine honest about what it does to a cluster: list, server-side apply, delete.
 */
import type { ApplyOptions, KubeObject, ListOptions } from '../kube/client.js';
import { groupOf } from '../object-key.js';

export interface ApplyClient {
  /** Server-side apply with our field manager (force, unless told otherwise); `dryRun` validates without persisting. */
  apply<T extends KubeObject>(obj: T, options?: ApplyOptions): Promise<T>;
  /** Lists a kind; without `namespace`, across every namespace. */
  list<T extends KubeObject>(apiVersion: string, kind: string, options?: ListOptions): Promise<T[]>;
  /** Deletes; resolves false when the object was already gone. */
  delete(ref: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>, options?: { propagation?: 'Foreground' | 'Background' | 'Orphan' }): Promise<boolean>;
}

/** An object's identity: group (not version: one object is served under several), kind, namespace, name. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

/** `group/Kind`, the identity of a kind across its served versions (`/Namespace` for the core group). */
export function groupKind(apiVersion: string, kind: string): string {
  return `${groupOf(apiVersion)}/${kind}`;
}

/**
 * The plan's key of an object: `group/Kind/namespace/name` (namespace empty for cluster-scoped
 * objects). Not object-key.ts's `objectKey`: dry-run problems show it as their path.
 */
export function objectKey(obj: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>): string {
  return `${groupKind(obj.apiVersion, obj.kind)}/${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

export function refOf(obj: Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>): ObjectRef {
  return {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
    name: obj.metadata.name,
  };
}

/** `Kind ns/name`, or `Kind name` for cluster-scoped objects (as kubectl and our logs write it). */
export function describeObject(ref: ObjectRef): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;
}
