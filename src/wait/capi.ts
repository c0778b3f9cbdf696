/**
 * What "ready" and "failed" mean for Cluster API objects (v1beta2), as evaluators for
 * `waitFor`, plus the object view the progress tree shows: each object's phase, whether
 * it is ready, and the condition blocking it with its reason and message.
 */
import { InfrastructureError, MachinesError } from '../errors.js';
import type { ObjectEvent } from '../events.js';
import { capiCoreApiVersion, kubeadmControlPlaneApiVersion } from '../capi.js';
import type { KubeObject } from '../kube/client.js';
import { snapshotObjects, type Snapshot, type Verdict, type WatchedKind } from './waiter.js';

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
}

type Obj = KubeObject & {
  spec?: Record<string, unknown>;
  status?: { phase?: string; conditions?: Condition[]; nodeRef?: { name: string }; initialization?: Record<string, boolean>; [k: string]: unknown };
};

function conditionOf(obj: Obj, type: string): Condition | undefined {
  return obj.status?.conditions?.find((c) => c.type === type);
}

function isTrue(obj: Obj, type: string): boolean {
  return conditionOf(obj, type)?.status === 'True';
}

/** The first condition, in order of preference, that is not True: what blocks the object. */
function blockingCondition(obj: Obj, preference: readonly string[]): ObjectEvent['blocking'] | undefined {
  for (const type of preference) {
    const c = conditionOf(obj, type);
    if (c && c.status !== 'True') {
      return { condition: type, ...(c.reason ? { reason: c.reason } : {}), ...(c.message ? { message: firstLine(c.message) } : {}) };
    }
  }
  return undefined;
}

function firstLine(message: string): string {
  const line = message.split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 2).join(' ');
  return line.length > 200 ? `${line.slice(0, 197)}...` : line;
}

function view(obj: Obj, ready: boolean, preference: readonly string[], parent?: string): ObjectEvent {
  const blocking = ready ? undefined : blockingCondition(obj, preference);
  return {
    type: 'object',
    kind: obj.kind,
    ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}),
    name: obj.metadata.name,
    ...(obj.status?.phase ? { phase: obj.status.phase } : {}),
    ready,
    ...(blocking ? { blocking } : {}),
    ...(parent ? { parent } : {}),
  };
}

export function clusterKinds(namespace: string): WatchedKind[] {
  return [
    { apiVersion: capiCoreApiVersion, kind: 'Cluster', namespace },
    { apiVersion: kubeadmControlPlaneApiVersion, kind: 'KubeadmControlPlane', namespace },
    { apiVersion: capiCoreApiVersion, kind: 'MachineDeployment', namespace },
    { apiVersion: capiCoreApiVersion, kind: 'Machine', namespace },
  ];
}

function objectsOf(snapshot: Snapshot, apiVersion: string, kind: string, clusterName: string): Obj[] {
  const all = snapshotObjects<Obj>(snapshot, { apiVersion, kind });
  if (kind === 'Cluster') return all.filter((o) => o.metadata.name === clusterName);
  return all.filter((o) => o.metadata.labels?.['cluster.x-k8s.io/cluster-name'] === clusterName || (o.spec as { clusterName?: string } | undefined)?.clusterName === clusterName);
}

/** A machine that failed for good: its phase says so. The message comes from its conditions. */
function terminalMachineFailure(machine: Obj): string | undefined {
  if (machine.status?.phase !== 'Failed') return undefined;
  const c = machine.status.conditions?.find((x) => x.status === 'False' && x.message);
  return c ? `${c.type}: ${c.reason ?? ''} ${c.message ?? ''}`.trim() : 'phase Failed';
}

interface ClusterView {
  cluster: Obj | undefined;
  objects: ObjectEvent[];
  machines: Obj[];
  failed?: MachinesError;
}

function clusterView(snapshot: Snapshot, clusterName: string): ClusterView {
  const [cluster] = objectsOf(snapshot, capiCoreApiVersion, 'Cluster', clusterName);
  const kcps = objectsOf(snapshot, kubeadmControlPlaneApiVersion, 'KubeadmControlPlane', clusterName);
  const deployments = objectsOf(snapshot, capiCoreApiVersion, 'MachineDeployment', clusterName);
  const machines = objectsOf(snapshot, capiCoreApiVersion, 'Machine', clusterName);
  const objects: ObjectEvent[] = [];
  if (cluster) objects.push(view(cluster, isTrue(cluster, 'Available'), ['InfrastructureReady', 'ControlPlaneInitialized', 'ControlPlaneAvailable', 'WorkersAvailable', 'Available']));
  const clusterRef = `Cluster/${clusterName}`;
  for (const kcp of kcps) objects.push(view(kcp, isTrue(kcp, 'Available'), ['Initialized', 'EtcdClusterHealthy', 'ControlPlaneComponentsHealthy', 'MachinesReady', 'Available'], clusterRef));
  for (const md of deployments) objects.push(view(md, isTrue(md, 'Available'), ['MachinesReady', 'Available'], clusterRef));
  let failed: MachinesError | undefined;
  for (const m of machines.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
    const labels = m.metadata.labels ?? {};
    const parent = labels['cluster.x-k8s.io/control-plane-name']
      ? `KubeadmControlPlane/${labels['cluster.x-k8s.io/control-plane-name']}`
      : labels['cluster.x-k8s.io/deployment-name']
        ? `MachineDeployment/${labels['cluster.x-k8s.io/deployment-name']}`
        : clusterRef;
    objects.push(view(m, machineReady(m), ['BootstrapConfigReady', 'InfrastructureReady', 'NodeHealthy', 'NodeReady', 'Ready'], parent));
    const failure = terminalMachineFailure(m);
    if (failure && !failed) {
      failed = new MachinesError(`Machine ${m.metadata.namespace}/${m.metadata.name} failed: ${failure}`, {
        hint: 'Run `provisioner gather bootstrap` for the provider logs; fix the cause, then run `provisioner create cluster` again to resume.',
      });
    }
  }
  return { cluster, objects, machines, ...(failed ? { failed } : {}) };
}

function machineReady(machine: Obj): boolean {
  return Boolean(machine.status?.nodeRef) && isTrue(machine, 'Ready');
}

/**
 * The infrastructure cluster (the platform's kind, named like the Cluster) as the
 * progress tree shows it: what blocks it is its first condition that is False with a
 * message — the provider's own error (a cloud API it cannot reach), which the Cluster's
 * InfrastructureReady only summarises. Providers differ in condition names, so none is preferred.
 */
function infrastructureClusterView(snapshot: Snapshot, clusterName: string, kind: { apiVersion: string; kind: string }): ObjectEvent | undefined {
  const infra = snapshotObjects<Obj>(snapshot, kind).find((o) => o.metadata.name === clusterName);
  if (!infra) return undefined;
  const failing = (infra.status?.conditions ?? []).filter((c) => c.status === 'False' && c.message && c.type !== 'Paused' && c.type !== 'Ready');
  const preference = [...failing.map((c) => c.type), 'Ready'];
  const ready = infra.status?.initialization?.provisioned === true || (infra.status as { ready?: boolean } | undefined)?.ready === true;
  return view(infra, ready, preference, `Cluster/${clusterName}`);
}

/**
 * Infrastructure provisioned and a control-plane endpoint published. Given the
 * infrastructure cluster's kind (watched too), its blocking condition is shown as well.
 */
export function infrastructureReady(clusterName: string, infrastructureKind?: { apiVersion: string; kind: string }): (snapshot: Snapshot) => Verdict {
  return (snapshot) => {
    const v = clusterView(snapshot, clusterName);
    const infra = infrastructureKind ? infrastructureClusterView(snapshot, clusterName, infrastructureKind) : undefined;
    const objects = [...v.objects.filter((o) => o.kind === 'Cluster'), ...(infra ? [infra] : [])];
    if (v.failed) return { state: 'failed', objects, error: v.failed };
    const endpoint = (v.cluster?.spec as { controlPlaneEndpoint?: { host?: string; port?: number } } | undefined)?.controlPlaneEndpoint;
    const provisioned = v.cluster?.status?.initialization?.infrastructureProvisioned === true;
    return provisioned && endpoint?.host ? { state: 'done', objects } : { state: 'waiting', objects };
  };
}

/** Control plane available, `expectedMachines` machines each with a Ready node, and the Cluster Available. */
export function clusterReady(clusterName: string, expectedMachines: number): (snapshot: Snapshot) => Verdict {
  return (snapshot) => {
    const v = clusterView(snapshot, clusterName);
    if (v.failed) return { state: 'failed', objects: v.objects, error: v.failed };
    const ready = v.machines.filter(machineReady).length;
    const done = Boolean(v.cluster && isTrue(v.cluster, 'Available')) && ready >= expectedMachines && v.machines.length >= expectedMachines;
    return { state: done ? 'done' : 'waiting', objects: v.objects };
  };
}

/**
 * Without a pod network (networking.cni: none) nodes register and stay NotReady: the
 * control plane initialized and `expectedMachines` machines each with a node.
 */
export function clusterRegistered(clusterName: string, expectedMachines: number): (snapshot: Snapshot) => Verdict {
  return (snapshot) => {
    const v = clusterView(snapshot, clusterName);
    if (v.failed) return { state: 'failed', objects: v.objects, error: v.failed };
    const registered = v.machines.filter((m) => Boolean(m.status?.nodeRef)).length;
    const done = Boolean(v.cluster && isTrue(v.cluster, 'ControlPlaneInitialized')) && registered >= expectedMachines;
    return { state: done ? 'done' : 'waiting', objects: v.objects };
  };
}

/** Every object of the cluster gone. */
export function clusterDeleted(clusterName: string): (snapshot: Snapshot) => Verdict {
  return (snapshot) => {
    const v = clusterView(snapshot, clusterName);
    return { state: v.objects.length === 0 ? 'done' : 'waiting', objects: v.objects };
  };
}

/** A stall error naming what blocks: the first object not ready and its condition. */
export function stallError(what: string, last: Verdict, stalledMs: number, kind: 'infrastructure' | 'machines'): InfrastructureError | MachinesError {
  const blocked = last.objects.filter((o) => !o.ready);
  const details = blocked.slice(0, 10).map((o) => {
    const b = o.blocking;
    return `${o.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name}: ${b ? `${b.condition} ${b.reason ?? ''}${b.message ? ` — ${b.message}` : ''}` : (o.phase ?? 'not ready')}`;
  });
  const message = `No progress on ${what} for ${Math.round(stalledMs / 1000)} s`;
  const options = { details, hint: 'Run `provisioner gather bootstrap` and read the controller logs; run `provisioner create cluster` again to resume waiting.' };
  return kind === 'infrastructure' ? new InfrastructureError(message, options) : new MachinesError(message, options);
}
