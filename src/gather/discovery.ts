/**
 * Which Cluster API kinds a server serves, from API discovery (`/apis`, then
 * `/apis/<group>/<version>`). Read through `KubeClient.raw`, so whatever providers are
 * installed — bundled or not — their objects are gathered without a list kept here.
 */
import type { KubeClient } from '../kube/client.js';

/** One kind to list: its group version, kind, resource (plural) and scope. */
export interface ServedKind {
  group: string;
  apiVersion: string;
  kind: string;
  resource: string;
  namespaced: boolean;
}

interface ApiGroupList {
  groups?: { name: string; versions?: { groupVersion: string }[]; preferredVersion?: { groupVersion: string } }[];
}

interface ApiResourceList {
  resources?: { name: string; kind: string; namespaced: boolean; verbs?: string[] }[];
}

/** The Cluster API groups: core, bootstrap, control plane, infrastructure, addons, and any other `*.cluster.x-k8s.io` (ipam, runtime, clusterctl). */
function isClusterApiGroup(group: string): boolean {
  return group === 'cluster.x-k8s.io' || group.endsWith('.cluster.x-k8s.io');
}

/**
 * Every listable kind of the groups `include` accepts, each once: from the group's
 * preferred version, and from other versions only for kinds the preferred one lacks.
 */
export async function discoverKinds(client: KubeClient, include: (group: string) => boolean = isClusterApiGroup): Promise<ServedKind[]> {
  const groups = (JSON.parse(await client.raw('/apis')) as ApiGroupList).groups ?? [];
  const kinds: ServedKind[] = [];
  for (const group of groups.filter((g) => include(g.name)).sort((a, b) => a.name.localeCompare(b.name))) {
    const preferred = group.preferredVersion?.groupVersion;
    const versions = (group.versions ?? []).map((v) => v.groupVersion);
    const ordered = preferred ? [preferred, ...versions.filter((v) => v !== preferred)] : versions;
    const seen = new Set<string>();
    for (const apiVersion of ordered) {
      const list = JSON.parse(await client.raw(`/apis/${apiVersion}`)) as ApiResourceList;
      for (const r of list.resources ?? []) {
        if (r.name.includes('/') || seen.has(r.kind) || !(r.verbs ?? []).includes('list')) continue;
        seen.add(r.kind);
        kinds.push({ group: group.name, apiVersion, kind: r.kind, resource: r.name, namespaced: r.namespaced });
      }
    }
  }
  return kinds;
}
