/**
 * When is a cluster healthy, and how many machines must it have: the one wait that
 * `create cluster` (wait-cluster, wait-pivoted) and `wait-for install-complete` share.
 */
import { capiGroups } from '../capi.js';
import { InfrastructureError } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { KubeClient, type KubeObject } from '../kube/client.js';
import { clusterKinds, clusterReady, clusterRegistered, stallError } from './capi.js';
import { waitForReadyNodes } from './nodes.js';
import { waitFor } from './waiter.js';

export interface HealthyWait {
  clusterName: string;
  namespace: string;
  /** Machines the manifests ask for (`countMachines`): each needs a Ready node. */
  expectedMachines: number;
  /** What is waited for, in messages. */
  what: string;
  sink: EventSink;
  signal: AbortSignal;
  /** Fails the wait at once when it rejects (a local controller past its restart budget). Default: never. */
  fatal?: Promise<never>;
  /** Time without any observable change before the wait fails. Default 10 min. */
  noProgressTimeoutMs?: number;
  /**
   * The nodes become Ready: false only where the user said `networking.cni: none` (no pod network: they register and stay
   * NotReady, which is what is waited for). A platform without the bundled add-ons, where cni is unset, waits for Ready
   * nodes as it always did (its machines bring their network, or simulate it). Default true.
   */
  podNetwork?: boolean;
  /**
   * What the management side must show before the workload API has the last word. 'conditions': the Cluster Available and
   * every machine's Ready condition (Cluster API's summaries, which trail the nodes by their resyncs, 15-20 s on hosts).
   * 'nodes': the control plane initialized and every expected machine linked to its node (nodeRef), so the wait ends the
   * moment the workload API lists the last node Ready (create cluster's wait-cluster when no pivot follows). Default 'conditions'.
   */
  settle?: 'conditions' | 'nodes';
}

/**
 * Until `management` reports the cluster healthy (control plane available, every machine
 * with a Ready node; with `settle: 'nodes'`, the control plane initialized and every machine
 * linked to its node), then until the workload cluster's own API lists every node Ready:
 * conditions can be stale (copied by a pivot, or left from before every process was
 * restarted), so the workload API has the last word. `create cluster`'s wait-cluster and
 * wait-pivoted, and `wait-for install-complete`, all wait with this.
 */
export async function waitHealthy(management: KubeClient, wait: HealthyWait): Promise<void> {
  const { what, sink, signal } = wait;
  const podNetwork = wait.podNetwork ?? true;
  const limits = wait.noProgressTimeoutMs ? { noProgressTimeoutMs: wait.noProgressTimeoutMs } : {};
  await waitFor(management, {
    what,
    kinds: clusterKinds(wait.namespace),
    evaluate: podNetwork && wait.settle !== 'nodes' ? clusterReady(wait.clusterName, wait.expectedMachines) : clusterRegistered(wait.clusterName, wait.expectedMachines),
    onStall: (last, ms) => stallError(what, last, ms, 'machines'),
    events: sink,
    signal,
    ...(wait.fatal ? { fatal: wait.fatal } : {}),
    ...limits,
  });
  const workload = KubeClient.fromText(await workloadKubeconfig(management, wait.clusterName, wait.namespace));
  try {
    await waitForReadyNodes(workload, wait.expectedMachines, { sink, signal, ready: podNetwork, ...limits });
    if (!podNetwork) {
      log(sink, 'warn', `The ${wait.expectedMachines} node(s) registered and stay NotReady until a pod network runs: networking.cni is none. Apply your CNI's manifest to the cluster (kubectl --kubeconfig auth/kubeconfig apply -f <your CNI manifest>); nodes become Ready once it runs.`);
    }
  } finally {
    workload.close();
  }
}

/** The workload cluster's admin kubeconfig, from the `<cluster>-kubeconfig` Secret the control-plane provider writes. */
export async function workloadKubeconfig(client: KubeClient, clusterName: string, namespace: string): Promise<string> {
  const secret = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `${clusterName}-kubeconfig`, namespace } });
  const value = secret?.data?.value;
  if (!value) {
    throw new InfrastructureError(`The cluster's kubeconfig Secret ${namespace}/${clusterName}-kubeconfig has no data`, {
      hint: 'Run `provisioner gather bootstrap` and look at the kubeadm control-plane controller log.',
    });
  }
  return Buffer.from(value, 'base64').toString('utf8');
}

/** Machines the manifests ask for: control-plane replicas plus every MachineDeployment's replicas, written as objects or in a Cluster's topology. */
export function countMachines(objects: readonly KubeObject[]): number {
  let count = 0;
  for (const obj of objects) {
    if (obj.kind === 'KubeadmControlPlane' || obj.kind === 'MachineDeployment') count += Number((obj.spec as { replicas?: number } | undefined)?.replicas ?? 1);
    const topology = topologyOf(obj);
    if (topology) {
      count += Number(topology.controlPlane?.replicas ?? 1);
      for (const md of topology.workers?.machineDeployments ?? []) count += Number(md.replicas ?? 1);
    }
  }
  return count;
}

interface ClusterTopology {
  controlPlane?: { replicas?: number };
  workers?: { machineDeployments?: { replicas?: number }[] };
}

/** A Cluster's `spec.topology` (the ClusterClass layout); undefined for any other object. */
export function topologyOf(obj: KubeObject): ClusterTopology | undefined {
  if (obj.kind !== 'Cluster' || !obj.apiVersion.startsWith(`${capiGroups.core}/`)) return undefined;
  return (obj.spec as { topology?: ClusterTopology } | undefined)?.topology;
}
