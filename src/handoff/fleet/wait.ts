/**
 * What the waits of a Fleet registration conclude from the objects they watch: a
 * registration token answered by Fleet's controller (its `status.secretName`), and a Fleet
 * Cluster an agent has checked in for. Both pick their object by the registration's labels.
 */
import type { ObjectEvent } from '../../events.js';
import type { KubeObject } from '../../kube/client.js';
import { snapshotObjects, type Snapshot, type Verdict, type WatchedKind } from '../../wait/waiter.js';
import { agentRegistered, blockingCondition, fleetApiVersion, type ClusterRegistrationToken, type FleetCluster } from './objects.js';

/** How a Fleet Cluster shows in progress views (its kind alone would read as a Cluster API Cluster). */
const fleetClusterKind = 'Cluster.fleet.cattle.io';

export function fleetKinds(kind: 'Cluster' | 'ClusterRegistrationToken', namespace: string): WatchedKind[] {
  return [{ apiVersion: fleetApiVersion, kind, namespace }];
}

function labelled<T extends KubeObject>(snapshot: Snapshot, kind: string, labels: Readonly<Record<string, string>>): T[] {
  return snapshotObjects<T>(snapshot, { apiVersion: fleetApiVersion, kind }).filter((o) => !o.metadata.deletionTimestamp && Object.entries(labels).every(([key, value]) => o.metadata.labels?.[key] === value));
}

/** The Fleet Cluster as the user sees it: registered, or what it waits on. */
export function fleetClusterEvent(cluster: FleetCluster): ObjectEvent {
  const registered = agentRegistered(cluster);
  const condition = blockingCondition(cluster);
  const blocking: ObjectEvent['blocking'] = registered
    ? undefined
    : condition
      ? { condition: condition.type, ...(condition.reason ? { reason: condition.reason } : {}), ...(condition.message ? { message: condition.message } : {}) }
      : { condition: 'AgentCheckIn', reason: 'WaitCheckIn', message: 'no Fleet agent has checked in for this cluster yet' };
  return {
    type: 'object',
    kind: fleetClusterKind,
    namespace: cluster.metadata.namespace ?? '',
    name: cluster.metadata.name,
    phase: registered ? 'Registered' : (cluster.status?.display?.state ?? 'WaitCheckIn'),
    ready: registered,
    ...(blocking ? { blocking } : {}),
  };
}

/** Done when the labelled Fleet Cluster's agent has checked in. */
export function agentCheckedIn(labels: Readonly<Record<string, string>>): (snapshot: Snapshot) => Verdict {
  return (snapshot) => {
    const clusters = labelled<FleetCluster>(snapshot, 'Cluster', labels);
    const objects = clusters.map(fleetClusterEvent);
    return { state: clusters.some(agentRegistered) ? 'done' : 'waiting', objects };
  };
}

/** Done when Fleet's controller has answered the labelled registration token with its Secret. */
export function tokenIssued(labels: Readonly<Record<string, string>>): (snapshot: Snapshot) => Verdict {
  return (snapshot) => {
    const tokens = labelled<ClusterRegistrationToken>(snapshot, 'ClusterRegistrationToken', labels);
    const objects: ObjectEvent[] = tokens.map((token) => ({
      type: 'object',
      kind: 'ClusterRegistrationToken',
      namespace: token.metadata.namespace ?? '',
      name: token.metadata.name,
      phase: token.status?.secretName ? 'Issued' : 'Pending',
      ready: Boolean(token.status?.secretName),
      ...(token.status?.secretName ? {} : { blocking: { condition: 'SecretName', reason: 'Pending', message: "Fleet's controller has not created the token's Secret yet" } }),
    }));
    return { state: tokens.some((t) => t.status?.secretName) ? 'done' : 'waiting', objects };
  };
}
