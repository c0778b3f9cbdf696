/**
 * The hosts platform's hooks: before the cluster's objects exist, the registration
 * command and a wait until every pool can be filled by registered hosts; while the
 * machines come up, a watch for a host whose bootstrap plan failed; on destroy, which
 * hosts the provider released.
 *
 * Hosts are cluster-scoped inventory and HostMachines namespaced, so labels link them
 * (the provider's claim labels below), not owner references.
 */
import { controlPlanePool, hasRole, machineSection, type InstallConfig, type MachinePool } from '../../config/index.js';
import { InfrastructureError, MachinesError, messageOf } from '../../errors.js';
import { KubeClient, type KubeObject } from '../../kube/client.js';
import { sleep } from '../../concurrency.js';
import { until, type Observation } from '../../progress/until.js';
import { snapshotObjects, watching, type Snapshot } from '../../wait/waiter.js';
import { agentApiVersion, issueRegistrationCommand } from '../../agent/registration.js';
import type { PlatformHookContext } from '../platform.js';
import { clusterNameLabel } from '../types.js';
import { artifactsConfigMap, hostArtifacts, publishArtifacts, publishedArtifactCount } from './artifacts.js';
import { hostsConfig } from './config.js';

/** The provider's claim of a Host: `<namespace>.<HostMachine name>` (the shared design; C's controller writes it). */
const claimedByLabel = 'infrastructure.provisioner.dev/claimed-by';
/** The provider's reservation of a Host as a cluster's control-plane endpoint: `<namespace>.<HostCluster name>`; only that cluster's control plane may take it. */
const endpointOfLabel = 'infrastructure.provisioner.dev/endpoint-of';
/** The reason of a HostMachine condition that says the host's plan failed for good. */
const planFailedReason = 'PlanFailed';
export const infrastructureApiVersion = 'infrastructure.provisioner.dev/v1alpha1';

/** Role strings of Host.spec.roles; empty roles offer both. */
export type HostRole = 'control-plane' | 'worker';

/** How long the printed registration commands work: a day, for hosts someone has to go and set up. */
const registrationTtl = '24h';
/** How often the HostMachines are listed while looking for a failed plan or a released host. */
const machineListIntervalMs = 2000;
/** Time without a new usable host before the wait fails, when the caller gives no no-progress timeout. */
const defaultRegistrationTimeoutMs = 30 * 60_000;

/** What a pool needs of the hosts. */
export interface PoolDemand {
  pool: string;
  role: HostRole;
  quantity: number;
  matchLabels: Record<string, string>;
}

/** A Host as the wait reads it. */
export interface HostView {
  name: string;
  address: string;
  roles: readonly string[];
  labels: Readonly<Record<string, string>>;
  registered: boolean;
  /** The claim label's value; undefined: free. */
  claimedBy?: string;
  /** The cluster that claimed it (label `cluster.x-k8s.io/cluster-name`). */
  clusterName?: string;
  /** The reservation label's value: the HostCluster whose endpoint it is. */
  endpointOf?: string;
}

/** The cluster that waits for hosts: its name and namespace (those of its HostCluster). */
export interface ClusterRef {
  name: string;
  namespace: string;
}

/** A pool's count of hosts it can take, and the hosts. */
export interface PoolSupply {
  demand: PoolDemand;
  hosts: string[];
  missing: number;
}

export function poolDemands(config: InstallConfig): PoolDemand[] {
  const cp = controlPlanePool(config);
  const pools = [cp, ...config.machinePools.filter((p) => p !== cp)];
  return pools.map((pool) => ({ pool: pool.name, role: roleOf(pool), quantity: pool.quantity, matchLabels: { ...(machineSection(pool, hostsConfig)?.hostSelector.matchLabels ?? {}) } }));
}

function roleOf(pool: MachinePool): HostRole {
  return hasRole(pool, 'controlPlane') ? 'control-plane' : 'worker';
}

/** Whether `cluster` claimed `host` (the claim names the HostMachine's namespace, the label the cluster). */
function claimedBy(host: HostView, cluster: ClusterRef): boolean {
  return host.claimedBy !== undefined && host.clusterName === cluster.name && host.claimedBy.startsWith(`${cluster.namespace}.`);
}

/**
 * Whether `host` may be taken for `demand` by `cluster`: registered, free or this
 * cluster's already, not reserved as another cluster's endpoint (this cluster's
 * endpoint host goes to its control plane only), offering the role, carrying the labels.
 */
function hostFits(host: HostView, demand: PoolDemand, cluster: ClusterRef): boolean {
  if (!host.registered) return false;
  if (host.claimedBy !== undefined && !claimedBy(host, cluster)) return false;
  if (host.endpointOf !== undefined && (host.endpointOf !== `${cluster.namespace}.${cluster.name}` || demand.role !== 'control-plane')) return false;
  if (host.roles.length > 0 && !host.roles.includes(demand.role)) return false;
  return Object.entries(demand.matchLabels).every(([key, value]) => host.labels[key] === value);
}

/**
 * Assigns hosts to pools so that as many pool slots as possible are filled (a maximum
 * bipartite matching: a host that fits two pools goes where it is needed), each host to
 * one pool at most; ties go to hosts in name order, so the answer is stable.
 */
export function assignHosts(demands: readonly PoolDemand[], hosts: readonly HostView[], cluster: ClusterRef): PoolSupply[] {
  const sorted = [...hosts].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const slots = demands.flatMap((demand, index) => Array.from({ length: demand.quantity }, () => index));
  const fits = slots.map((index) => sorted.flatMap((host, h) => (hostFits(host, demands[index]!, cluster) ? [h] : [])));
  const hostSlot = new Array<number | undefined>(sorted.length).fill(undefined);
  const augment = (slot: number, seen: boolean[]): boolean => {
    for (const h of fits[slot]!) {
      if (seen[h]) continue;
      seen[h] = true;
      const holder = hostSlot[h];
      if (holder === undefined || augment(holder, seen)) {
        hostSlot[h] = slot;
        return true;
      }
    }
    return false;
  };
  for (let slot = 0; slot < slots.length; slot++) augment(slot, new Array<boolean>(sorted.length).fill(false));
  return demands.map((demand, index) => {
    const taken = sorted.filter((_, h) => hostSlot[h] !== undefined && slots[hostSlot[h]!] === index).map((h) => h.name);
    return { demand, hosts: taken, missing: demand.quantity - taken.length };
  });
}

/** One line per pool: "2 of 3 control-plane hosts registered (pool control-plane)". */
export function supplyLine(supply: PoolSupply): string {
  const { demand } = supply;
  const selector = Object.entries(demand.matchLabels).map(([k, v]) => `${k}=${v}`).join(',');
  return `${supply.hosts.length} of ${demand.quantity} ${demand.role} hosts registered (pool ${demand.pool}${selector ? `, labels ${selector}` : ''})`;
}

interface HostObject extends KubeObject {
  spec?: { address?: string; roles?: string[] };
  status?: { conditions?: { type: string; status: string }[] };
}

export function hostView(host: HostObject): HostView {
  const labels = host.metadata.labels ?? {};
  return {
    name: host.metadata.name,
    address: host.spec?.address ?? '',
    roles: host.spec?.roles ?? [],
    labels,
    registered: host.status?.conditions?.some((c) => c.type === 'Registered' && c.status === 'True') ?? false,
    ...(labels[claimedByLabel] !== undefined ? { claimedBy: labels[claimedByLabel] } : {}),
    ...(labels[clusterNameLabel] !== undefined ? { clusterName: labels[clusterNameLabel] } : {}),
    ...(labels[endpointOfLabel] !== undefined ? { endpointOf: labels[endpointOfLabel] } : {}),
  };
}

async function listHostViews(client: KubeClient): Promise<HostView[]> {
  return (await client.list<HostObject>(agentApiVersion, 'Host')).map(hostView);
}

/** `--roles`/`--labels` of the register command for a host of this pool. */
function registerFlags(demand: PoolDemand): string {
  const labels = Object.entries(demand.matchLabels).map(([k, v]) => `${k}=${v}`).join(',');
  return ` --roles ${demand.role}${labels ? ` --labels ${labels}` : ''}`;
}

/**
 * preProvision: prints a registration command for each host a pool still lacks (one-use
 * tokens: one per host, with the pool's role and labels), then waits, reporting progress
 * per pool, until every pool can be filled by registered hosts that no other cluster
 * claimed. Fails (exit 5) after `noProgressTimeoutMs` without a new usable host, naming
 * what each pool still lacks.
 */
export async function waitForHosts(context: PlatformHookContext): Promise<void> {
  // The node files are published while the manager issues the tokens; the commands print once both are done.
  const offered = offerArtifacts(context);
  offered.catch(() => undefined); // awaited below; a failure is reported there, not as an unhandled rejection
  await waitForRegisteredHosts(context, offered);
}

/** Publishes what the hosts download before kubeadm (./artifacts.ts); before the commands print, so that a problem with it shows before anyone sets up hosts. */
export async function offerArtifacts(context: PlatformHookContext): Promise<void> {
  if (!context.nodeArtifacts) {
    // An external management cluster: a self-managed hosts cluster lists the node files it serves itself (in-cluster-artifacts.ts).
    const reader = KubeClient.fromFile(context.kubeconfig);
    const count = await publishedArtifactCount(reader).finally(() => reader.close());
    context.log(count > 0
      ? `The hosts download ${count} node files the management cluster lists (${artifactsConfigMap.namespace}/${artifactsConfigMap.name})`
      : 'This management cluster serves no node artifacts: the hosts must already have kubelet, kubeadm and the control-plane images');
    return;
  }
  const artifacts = hostArtifacts(await context.nodeArtifacts());
  const client = KubeClient.fromFile(context.kubeconfig);
  try {
    await publishArtifacts(client, artifacts);
  } finally {
    client.close();
  }
  context.log(`The hosts download ${artifacts.length} node files from the control plane (${artifactsConfigMap.namespace}/${artifactsConfigMap.name})`);
}

/** The wait of `waitForHosts`: `published` (the node files) is awaited before the commands print or the wait ends. */
async function waitForRegisteredHosts(context: PlatformHookContext, published: Promise<void>): Promise<void> {
  const { config, signal } = context;
  const clusterName = config.metadata.name;
  const cluster = { name: clusterName, namespace: config.metadata.namespace };
  const demands = poolDemands(config);
  const timeoutMs = context.noProgressTimeoutMs ?? defaultRegistrationTimeoutMs;
  const client = KubeClient.fromFile(context.kubeconfig);
  try {
    let supply = assignHosts(demands, await listHostViews(client), cluster);
    report(context, supply);
    if (supply.every((s) => s.missing === 0)) return await published;
    await printCommands(client, context, supply, published);

    // A newly filled place in a pool is progress: the timeout counts from the last one.
    let filled = filledCount(supply);
    // Watched, not polled: a host counts the moment its registration is recorded.
    const judge = (snapshot: Snapshot): Observation<PoolSupply[]> => {
      const hosts = snapshotObjects<HostObject>(snapshot, { apiVersion: agentApiVersion, kind: 'Host' }).map(hostView);
      const seen = assignHosts(demands, hosts, cluster);
      return { state: seen.every((s) => s.missing === 0) ? 'done' : 'waiting', value: seen, progress: String(filledCount(seen)) };
    };
    supply = await until(watching(client, [{ apiVersion: agentApiVersion, kind: 'Host' }], judge), {
      what: `hosts to register for ${clusterName}`,
      noProgressTimeoutMs: timeoutMs,
      signal,
      onProgress: ({ value }) => {
        if (filledCount(value) === filled) return; // the first look sees what was reported already
        filled = filledCount(value);
        report(context, value);
      },
      onStall: (last) => {
        const seen = last?.value ?? supply;
        const lacking = seen.filter((s) => s.missing > 0).map((s) => `pool ${s.demand.pool} lacks ${s.missing} ${s.demand.role} host(s)${Object.keys(s.demand.matchLabels).length ? ` labelled ${Object.entries(s.demand.matchLabels).map(([k, v]) => `${k}=${v}`).join(',')}` : ''}`);
        return new InfrastructureError(`Not enough hosts registered for ${clusterName} after ${Math.round(timeoutMs / 1000)} s without a new one: ${lacking.join('; ')}`, {
          details: seen.map(supplyLine),
          hint: 'Run the printed registration commands on the missing hosts (`provisioner hosts list` shows who registered, with roles and labels), then run `provisioner create cluster` again.',
        });
      },
    });
    context.log(`Every pool can be filled: ${supply.map((s) => `${s.demand.pool} ← ${s.hosts.join(', ')}`).join('; ')}`);
  } finally {
    client.close();
  }
}

function filledCount(supply: readonly PoolSupply[]): number {
  return supply.reduce((sum, s) => sum + s.hosts.length, 0);
}

/** Typed progress per pool, and one log line each. */
function report(context: PlatformHookContext, supply: readonly PoolSupply[]): void {
  for (const s of supply) {
    context.events.emit({
      type: 'progress',
      task: `hosts:${s.demand.pool}`,
      label: `${s.demand.role} hosts registered (pool ${s.demand.pool})`,
      current: s.hosts.length,
      total: s.demand.quantity,
      unit: 'machines',
      ...(s.missing === 0 ? { done: true } : {}),
    });
    context.log(supplyLine(s));
  }
}

/**
 * One registration command per missing host, as a secret result (the tokens are credentials).
 * Every token is issued at once (the manager issues them in parallel); the commands print once
 * they all are and `published` (the node files) is done.
 */
async function printCommands(client: KubeClient, context: PlatformHookContext, supply: readonly PoolSupply[], published: Promise<void>): Promise<void> {
  const lines: string[] = [];
  const commands: { pool: string; role: HostRole; command: string }[] = [];
  let expiresAt = '';
  let loopbackOnly = false;
  const slots = supply.flatMap((s) => Array.from({ length: s.missing }, () => s.demand));
  const issuedAll = await Promise.all(slots.map(() => issueRegistrationCommand(client, { dir: context.dir, signal: context.signal, ttl: registrationTtl })));
  await published;
  for (const [i, demand] of slots.entries()) {
    const issued = issuedAll[i]!;
    const command = `${issued.command}${registerFlags(demand)}`;
    lines.push(`# a ${demand.role} host for pool ${demand.pool}:`, `${command} && provisioner-agent run`);
    commands.push({ pool: demand.pool, role: demand.role, command });
    expiresAt = issued.expiresAt;
    loopbackOnly ||= !issued.reachableFromHosts;
  }
  if (loopbackOnly) lines.push('# the server is the loopback API server: only an agent on this machine reaches it (bootstrap.listenAddress names one hosts reach)');
  context.events.emit({
    type: 'result',
    kind: 'registration-commands',
    text: [`Run on each host (one command per host; each token registers one host and expires at ${expiresAt}):`, ...lines].join('\n'),
    data: { commands, expiresAt },
    secret: true,
  });
}

export interface HostMachineObject extends KubeObject {
  status?: { hostRef?: { name?: string }; conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/** The first HostMachine whose plan failed for good, as an error naming the host and the check; undefined when none did. */
export function planFailure(machines: readonly HostMachineObject[]): MachinesError | undefined {
  for (const machine of machines) {
    const failed = machine.status?.conditions?.find((c) => c.status === 'False' && c.reason === planFailedReason);
    if (!failed) continue;
    const host = machine.status?.hostRef?.name ?? 'unknown host';
    return new MachinesError(`Host ${host} failed the bootstrap plan of HostMachine ${machine.metadata.namespace}/${machine.metadata.name}: ${failed.message ?? failed.type}`, {
      hint: `Fix what the check names on host ${host} (\`provisioner plan status --host ${host}\` shows the plan), then run \`provisioner create cluster\` again.`,
    });
  }
  return undefined;
}

/** machineFailures: rejects once a HostMachine of the cluster reports its host's plan failed. */
export async function watchHostPlans(context: PlatformHookContext): Promise<never> {
  const client = KubeClient.fromFile(context.kubeconfig);
  try {
    for (;;) {
      const machines = await client.list<HostMachineObject>(infrastructureApiVersion, 'HostMachine', { namespace: context.config.metadata.namespace }).catch((error: unknown) => {
        // A transient API error is not a machine failure: the next poll reads again.
        context.log(`While reading HostMachines: ${messageOf(error)}`);
        return [];
      });
      const failure = planFailure(machines);
      if (failure) throw failure;
      await sleep(machineListIntervalMs, context.signal);
      context.signal.throwIfAborted();
    }
  } finally {
    client.close();
  }
}

/** Labels the plans `images load` writes with `<namespace>.<cluster>`, so destroying the cluster finds and removes them. */
export const loadedImagesOfLabel = 'infrastructure.provisioner.dev/images-of';

/** Deletes the plans `images load` wrote for the cluster on `hosts` (their images go with each host's reset). */
export async function deleteLoadImagesPlans(client: KubeClient, cluster: { name: string; namespace: string }, hosts: readonly string[]): Promise<void> {
  for (const host of hosts) {
    const plans = await client.list<KubeObject>(agentApiVersion, 'NodePlan', { namespace: `host-${host}`, labelSelector: `${loadedImagesOfLabel}=${cluster.namespace}.${cluster.name}` });
    for (const plan of plans) await client.delete(plan);
  }
}

/**
 * clusterDeletion: records which hosts the cluster claims and, while the deletion runs,
 * how each HostMachine's release ends (condition HostReleased); once the cluster's
 * objects are gone (each HostMachine's finalizer ran its reset plan), says which hosts
 * were reset and released, which were released after their reset timed out (they may
 * still run what the cluster put there), and which are still claimed.
 */
export async function destroyHostsCluster(context: PlatformHookContext & { clusterName: string; namespace: string }): Promise<() => Promise<void>> {
  const cluster = { name: context.clusterName, namespace: context.namespace };
  const claimed = await withHosts(context.kubeconfig, (hosts) => hosts.filter((h) => claimedBy(h, cluster)).map((h) => h.name));
  if (claimed.length > 0) context.log(`Deleting the cluster resets and releases its hosts: ${claimed.join(', ')}`);
  // The plans of `images load` belong to the cluster, not to a machine: they go with it.
  const client = KubeClient.fromFile(context.kubeconfig);
  try {
    await deleteLoadImagesPlans(client, cluster, claimed);
  } finally {
    client.close();
  }
  const stop = new AbortController();
  const releases = new Map<string, string>();
  const watching = watchReleases(context, releases, AbortSignal.any([context.signal, stop.signal]));
  return async () => {
    stop.abort();
    await watching;
    const hosts = await withHosts(context.kubeconfig, (all) => all);
    const still = claimed.filter((name) => hosts.some((h) => h.name === name && claimedBy(h, cluster)));
    const timedOut = claimed.filter((name) => !still.includes(name) && releases.get(name) === 'ResetTimedOut');
    const released = claimed.filter((name) => !still.includes(name) && !timedOut.includes(name));
    if (released.length > 0) context.log(`Hosts reset and released (free for another cluster): ${released.join(', ')}`);
    if (timedOut.length > 0) context.log(`Hosts released after their reset plan timed out, which may still run a kubelet or containers of the cluster: ${timedOut.join(', ')} (\`provisioner plan status\` on them shows the reset plan)`);
    if (still.length > 0) context.log(`Hosts still claimed by ${context.clusterName}: ${still.join(', ')} (\`provisioner hosts list\`)`);
  };
}

/** Until `signal`: the reason of each HostMachine's HostReleased condition, by host. */
async function watchReleases(context: PlatformHookContext & { namespace: string }, releases: Map<string, string>, signal: AbortSignal): Promise<void> {
  const client = KubeClient.fromFile(context.kubeconfig);
  try {
    while (!signal.aborted) {
      const machines = await client.list<HostMachineObject>(infrastructureApiVersion, 'HostMachine', { namespace: context.namespace }).catch(() => []);
      for (const machine of machines) {
        const host = machine.status?.hostRef?.name;
        const released = machine.status?.conditions?.find((c) => c.type === 'HostReleased');
        if (host && released?.reason) releases.set(host, released.reason);
      }
      await sleep(machineListIntervalMs, signal);
    }
  } finally {
    client.close();
  }
}

async function withHosts<T>(kubeconfig: string, use: (hosts: HostView[]) => T): Promise<T> {
  const client = KubeClient.fromFile(kubeconfig);
  try {
    return use(await listHostViews(client));
  } finally {
    client.close();
  }
}
