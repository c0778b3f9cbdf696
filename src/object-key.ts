/**
 * How an object is named in messages, diffs and maps (assets' diff, pivot). Light on
 * purpose: no Kubernetes client. Two keys stay apart on purpose: the apply plan's
 * (`group/Kind/namespace/name`, the path of a dry-run problem) and the live view's (its
 * events carry no apiVersion).
 */

/** What names an object to the API server; the version is no part of it. */
export interface ObjectIdentity {
  apiVersion: string;
  kind: string;
  namespace?: string | undefined;
  name: string;
}

/** The API group of an apiVersion: `cluster.x-k8s.io` of `cluster.x-k8s.io/v1beta2`, '' for the core group (`v1`). */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/** `group/Kind namespace/name` (`core/` for the core group, no namespace for cluster-scoped objects), e.g. `core/Secret demo/demo-kubeconfig`. */
export function objectKey(id: ObjectIdentity): string {
  return `${groupOf(id.apiVersion) || 'core'}/${id.kind} ${id.namespace ? `${id.namespace}/` : ''}${id.name}`;
}
