/**
 * The apply order, by kind, in one table. Objects are applied rank by rank (all of a
 * rank, with bounded parallelism, before any of the next); deletes run last, in reverse
 * rank order.
 *
 * Why this order: an object goes after everything it names, so a controller's first
 * reconcile of it finds its references instead of "not found" errors, which Cluster API
 * answers with exponential requeues (a referent created a moment later can then wait
 * seconds to minutes to be noticed). The API server itself checks only one dependency,
 * and strictly: a namespaced object cannot be created before its Namespace.
 *
 *   0 namespaces        everything else lives in them.
 *   1 configuration     Secrets, ConfigMaps and ServiceAccounts that templates and
 *                       bootstrap configs name (credentials, files, addon sources).
 *   2 templates and     machine, bootstrap and control-plane templates, the
 *     infrastructure    infrastructure cluster, ClusterClasses: the objects that the
 *                       control plane, the Cluster and the MachineDeployments point at.
 *                       Kinds we do not know (a user's extra objects) go here too: before
 *                       any Cluster API object that might use them.
 *   3 control plane     KubeadmControlPlane: it names its machine template (rank 2).
 *   4 cluster           the Cluster names the infrastructure cluster and the control plane;
 *                       applying it starts the whole reconciliation, so it comes once
 *                       what it names exists.
 *   5 machines          MachineDeployments (and MachineSets, MachinePools, health checks)
 *                       name the Cluster and the worker templates; workers are requested
 *                       only once the cluster and its control plane are declared.
 *
 * Deletes in reverse: worker machines go first while what they were built from still
 * exists, and a Namespace goes last, because deleting a Namespace deletes everything in
 * it at once, with none of the order above.
 */
import { groupKind } from './client.js';

export interface ApplyRank {
  rank: number;
  name: string;
  /**
   * Patterns of `group/Kind` (core group: empty, as in `/Namespace`): an exact kind, a
   * `group/*` for a whole group, or `group/*Suffix` (`*` alone for any group) for kinds
   * by suffix. The most specific pattern wins: exact, then suffix, then whole group.
   */
  kinds: readonly string[];
}

export const applyRanks: readonly ApplyRank[] = [
  { rank: 0, name: 'namespaces', kinds: ['/Namespace'] },
  { rank: 1, name: 'configuration', kinds: ['/Secret', '/ConfigMap', '/ServiceAccount'] },
  {
    rank: 2,
    name: 'templates and infrastructure',
    kinds: ['infrastructure.cluster.x-k8s.io/*', 'bootstrap.cluster.x-k8s.io/*', '*/*Template', 'cluster.x-k8s.io/ClusterClass'],
  },
  { rank: 3, name: 'control plane', kinds: ['controlplane.cluster.x-k8s.io/*'] },
  { rank: 4, name: 'cluster', kinds: ['cluster.x-k8s.io/Cluster'] },
  {
    rank: 5,
    name: 'machines',
    kinds: ['cluster.x-k8s.io/MachineDeployment', 'cluster.x-k8s.io/MachineSet', 'cluster.x-k8s.io/Machine', 'cluster.x-k8s.io/MachinePool', 'cluster.x-k8s.io/MachineHealthCheck'],
  },
];

/** Rank of kinds no pattern matches (see "templates and infrastructure" above). */
export const unknownKindRank = 2;

interface Matcher {
  rank: number;
  /** 3 exact, 2 suffix, 1 whole group. */
  specificity: number;
  matches(group: string, kind: string): boolean;
}

const matchers: Matcher[] = applyRanks.flatMap(({ rank, kinds }) =>
  kinds.map((pattern): Matcher => {
    const slash = pattern.lastIndexOf('/');
    const group = slash < 0 ? '*' : pattern.slice(0, slash);
    const kind = pattern.slice(slash + 1);
    const groupMatches = (g: string) => group === '*' || group === g;
    if (kind === '*') return { rank, specificity: 1, matches: (g) => groupMatches(g) };
    if (kind.startsWith('*')) {
      const suffix = kind.slice(1);
      return { rank, specificity: 2, matches: (g, k) => groupMatches(g) && k.endsWith(suffix) };
    }
    return { rank, specificity: 3, matches: (g, k) => groupMatches(g) && k === kind };
  }),
);

const rankCache = new Map<string, number>();

/** The apply rank of a kind (see the table above). */
export function rankOf(apiVersion: string, kind: string): number {
  const key = groupKind(apiVersion, kind);
  let rank = rankCache.get(key);
  if (rank === undefined) {
    const group = key.slice(0, key.length - kind.length - 1);
    let best: Matcher | undefined;
    for (const m of matchers) if (m.matches(group, kind) && (!best || m.specificity > best.specificity)) best = m;
    rank = best?.rank ?? unknownKindRank;
    rankCache.set(key, rank);
  }
  return rank;
}

export function rankName(rank: number): string {
  return applyRanks.find((r) => r.rank === rank)?.name ?? `rank ${rank}`;
}
