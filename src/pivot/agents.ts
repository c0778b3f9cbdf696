/**
 * The node agent's inventory in a move (provider/, agent.provisioner.dev): which Hosts and
 * plans go with the moved clusters, and the hand-over that makes each moved host's agent
 * follow to the target's manager with a fresh credential from it while the source revokes
 * the old one.
 *
 * Hosts are cluster-scoped and linked to a cluster only by labels (the cluster-name label
 * an infrastructure provider puts on a Host it claims), so owner references cannot pull
 * them in: a Host labelled with a moved cluster's name moves (copied, then deleted from the
 * source), with every NodePlan of its plan namespace `host-<name>` and the Secrets and
 * ConfigMaps those plans name. A Host no moved cluster claims is not copied: it stays
 * inventory of the source, where its agent is.
 */
import { agentApiVersion, caChecksum, registrationNamespace, serverCaConfigMap } from '../agent/registration.js';
import { ExternalError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { groupOf } from '../object-key.js';
import { polling, until, type Observation } from '../progress/until.js';
import { clusterNameLabel, referencedNames } from './graph.js';
import type { JournalObject, PivotJournal } from './journal.js';

export const agentGroup = 'agent.provisioner.dev';
/** The Secret in a host's plan namespace that tells its agent to follow (provider: agentv1.HandoverSecret). */
export const handoverSecret = 'agent-handover';
/** ConfigMap in the registration namespace naming the URL where hosts reach this API server (`management start --listen-address`). */
const agentServerConfigMap = 'agent-server';
/** How long the hand-over waits while no further moved agent follows: 5 minutes (an agent looks at every heartbeat, 30 s by default). */
const defaultHandoverTimeoutMs = 5 * 60_000;
const pollMs = 500;
/** How long the target's manager may take to issue a follow token while its phase does not change: 60 s. */
const followTokenIssueTimeoutMs = 60_000;

export function planNamespace(host: string): string {
  return `host-${host}`;
}

export function isAgentHost(o: { apiVersion: string; kind: string }): boolean {
  return o.kind === 'Host' && groupOf(o.apiVersion) === agentGroup;
}

/**
 * The labels whose value says which namespace's object holds a Host: `<namespace>.<name>`
 * of the infrastructure machine that claimed it or the infrastructure cluster that reserved it as its endpoint
 * (provider/api/infrastructure/v1alpha1 ClaimKey, cut to 46 characters and a hash when longer).
 */
const holderLabels = ['infrastructure.provisioner.dev/claimed-by', 'infrastructure.provisioner.dev/endpoint-of'];
/** How much of a holder label's value is kept as written before ClaimKey's hash. */
const holderPrefixKept = 46;

/**
 * The Hosts that move with `clusters`: those labelled with one of their names and held by
 * an object of that cluster's namespace (a Cluster's name is unique only in its namespace,
 * so a same-named cluster elsewhere keeps its hosts).
 */
export function movingHosts(hosts: readonly KubeObject[], clusters: readonly KubeObject[]): KubeObject[] {
  const namespacesOf = new Map<string, string[]>();
  for (const c of clusters) namespacesOf.set(c.metadata.name, [...(namespacesOf.get(c.metadata.name) ?? []), c.metadata.namespace ?? '']);
  const heldFrom = (holder: string, namespace: string): boolean => {
    const prefix = `${namespace}.`;
    // A namespace too long to survive ClaimKey's cut cannot be told apart: the cluster name decides.
    return prefix.length > holderPrefixKept ? holder.startsWith(prefix.slice(0, holderPrefixKept)) : holder.startsWith(prefix);
  };
  return hosts.filter((h) => {
    const labels = h.metadata.labels ?? {};
    const namespaces = namespacesOf.get(labels[clusterNameLabel] ?? '\0');
    if (!namespaces) return false;
    const holders = holderLabels.map((l) => labels[l]).filter((v): v is string => Boolean(v));
    // Labelled with the cluster but held by nothing (a release under way): the cluster name decides.
    return holders.length === 0 || holders.some((holder) => namespaces.some((ns) => heldFrom(holder, ns)));
  });
}

/**
 * What moves from the plan namespaces of the moving hosts: every NodePlan, and the Secrets
 * and ConfigMaps a plan names (its files' content) or owns; never the hand-over Secret.
 */
export function planNamespaceObjects(plans: readonly KubeObject[], configs: readonly KubeObject[]): KubeObject[] {
  const named = new Set(plans.flatMap((p) => referencedNames(p).map((n) => `${p.metadata.namespace}/${n}`)));
  const planUids = new Set(plans.map((p) => p.metadata.uid).filter(Boolean));
  const picked = configs.filter(
    (c) =>
      c.metadata.name !== handoverSecret &&
      (named.has(`${c.metadata.namespace}/${c.metadata.name}`) || (c.metadata.ownerReferences ?? []).some((r) => planUids.has(r.uid))),
  );
  return [...plans, ...picked];
}

interface TokenJson extends KubeObject {
  spec?: { ttl?: string; hostName?: string };
  status?: { phase?: string; secretName?: string; host?: string };
}
interface HostJson extends KubeObject {
  status?: { registration?: string; lastHeartbeatTime?: string };
}
type DataObject = KubeObject & { data?: Record<string, string> };

/** The name of the target's token for a moved host: fixed, so a resumed hand-over finds the one it made. */
export function followTokenName(host: string): string {
  return `follow-${host}`;
}

/** Where the target's hosts reach it, and its CA pin: the URL its `agent-server` ConfigMap publishes, else its kubeconfig's. */
async function agentServerOf(target: KubeClient): Promise<{ server: string; caChecksum: string }> {
  const [published, ca] = await Promise.all([
    target.get<DataObject>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: agentServerConfigMap, namespace: registrationNamespace } }),
    target.get<DataObject>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: serverCaConfigMap, namespace: registrationNamespace } }),
  ]);
  const caPem = ca?.data?.['ca.crt'];
  if (!caPem) {
    throw new ExternalError(`The target publishes no CA for agents (ConfigMap ${registrationNamespace}/${serverCaConfigMap})`, {
      hint: 'The target must run the agent provider (capi-manager with agent-provisioner; `provisioner management start` does).',
    });
  }
  return { server: published?.data?.['server'] ?? target.server, caChecksum: caChecksum(caPem) };
}

/** Publishes where hosts reach this API server (its listen address), for a pivot into it to hand agents over. */
export async function publishAgentServer(client: KubeClient, server: string): Promise<void> {
  await client.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: registrationNamespace } });
  await client.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: agentServerConfigMap, namespace: registrationNamespace }, data: { server } } as KubeObject);
}

export interface HandoverOptions {
  source: KubeClient;
  target: KubeClient;
  journal: PivotJournal;
  sink: EventSink;
  signal?: AbortSignal;
  /** How long to wait while no further agent follows. Default `defaultHandoverTimeoutMs` (5 min). */
  timeoutMs?: number;
}

/**
 * Hands every moved host's agent over to the target, then revokes its source credential:
 * per host, the target's manager issues a one-use token confined to that host; the source
 * publishes it to the agent (Secret `agent-handover` in the host's plan namespace, which
 * the agent may read) with the target's URL and CA pin; the agent registers with the
 * target as the same Host and reports there. Once every agent did, the source deletes the
 * hand-over Secrets and each agent's ServiceAccount (its tokens die with it) and RBAC.
 * Idempotent: a resumed run finds its tokens by name and what already followed.
 * Throws, naming the hosts, when some did not follow in time; nothing is revoked then.
 */
export async function handOverAgents(options: HandoverOptions): Promise<void> {
  const { source, target, journal, sink, signal } = options;
  const hosts = movedHostNames(journal);
  if (hosts.length === 0) return;
  const { server, caChecksum: checksum } = await agentServerOf(target);
  log(sink, 'info', `Handing ${hosts.length} host agent(s) over to ${server}: ${hosts.join(', ')}`);
  const pending: string[] = [];
  for (const host of hosts) if (!(await followed(target, host))) pending.push(host);
  // An agent that has not reported for a while is not running: nothing to wait for (it is told what to do instead).
  const silent = await silentAgents(source, pending);
  for (const host of pending) {
    const token = await issueFollowToken(target, host, signal);
    if (token === undefined || silent.includes(host)) continue; // spent by this host's agent already (it only has to report), or no agent to tell
    await source.apply({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: handoverSecret, namespace: planNamespace(host) },
      type: 'Opaque',
      stringData: { server, caChecksum: checksum, token, registrationNamespace },
    } as KubeObject);
  }
  for (const host of silent) {
    log(sink, 'warn', `Host ${host}'s agent has not reported to the source for ${silentAgentMs / 60_000} min, so the move does not wait for it; its credential in the source is revoked. ` +
      `On that host, remove the agent's data directory and register it with ${server} (--ca-checksum ${checksum}) using the token of RegistrationToken ${registrationNamespace}/${followTokenName(host)} in the target, which re-registers it as the same Host`);
  }
  const timeoutMs = options.timeoutMs ?? defaultHandoverTimeoutMs;
  let waiting = pending.filter((h) => !silent.includes(h));
  // An agent that follows is progress: the deadline counts from the last one.
  const look = async (): Promise<Observation<string[]>> => {
    const states = await Promise.all(waiting.map(async (h) => ((await followed(target, h)) ? undefined : h)));
    waiting = states.filter((h): h is string => h !== undefined);
    return { state: waiting.length === 0 ? 'done' : 'waiting', value: waiting, progress: waiting.join(', ') };
  };
  await until(polling(look, pollMs), {
    what: 'the host agents to follow to the target',
    noProgressTimeoutMs: timeoutMs,
    ...(signal ? { signal } : {}),
    onStall: (last) => {
      const late = last?.value ?? waiting;
      return new ExternalError(`${late.length} of ${hosts.length} host agent(s) did not follow to the target within ${Math.round(timeoutMs / 1000)} s: ${late.join(', ')}`, {
        details: late.map((h) => `host ${h}: its agent has not registered with ${server} (is it running, and does it reach that address?)`),
        hint: 'Start the agents of those hosts (`provisioner-agent run`) and run the same command again: the pivot resumes with the hand-over; the source still holds the clusters (paused) and the agents\' credentials.',
      });
    },
  });
  for (const host of hosts) await revokeInSource(source, host);
  log(sink, 'info', `Every moved host's agent follows ${server}; their credentials in the source are revoked`);
}

/**
 * Before a rollback of a move that has not recorded `agents-followed`: withdraws the
 * hand-over from the source (its Secrets), so no agent starts to follow a move being
 * undone, and returns the hosts whose agent has followed already (its follow token spent,
 * or the target's Host registered through it). A run killed between an agent's switch and
 * the journal's write leaves such a host: undoing the move would delete its Host in the
 * only manager its agent still talks to.
 */
export async function withdrawHandover(source: KubeClient, target: KubeClient, journal: PivotJournal): Promise<string[]> {
  const hosts = movedHostNames(journal);
  for (const host of hosts) await source.delete({ apiVersion: 'v1', kind: 'Secret', metadata: { name: handoverSecret, namespace: planNamespace(host) } });
  const states = await Promise.all(
    hosts.map(async (host) => {
      const [token, copy] = await Promise.all([
        target.get<TokenJson>({ apiVersion: agentApiVersion, kind: 'RegistrationToken', metadata: { name: followTokenName(host), namespace: registrationNamespace } }),
        target.get<HostJson>({ apiVersion: agentApiVersion, kind: 'Host', metadata: { name: host } }),
      ]);
      const spent = token?.status?.phase === 'Used' && token.status.host === host;
      return spent || copy?.status?.registration === followTokenName(host) ? host : undefined;
    }),
  );
  return states.filter((h): h is string => h !== undefined);
}

/** The names of the Hosts a move carries (its journal's agent Hosts). */
function movedHostNames(journal: PivotJournal): string[] {
  return journal.objects.filter((o: JournalObject) => !o.global && isAgentHost(o)).map((o) => o.name);
}

/** An agent whose last heartbeat is older than this is taken as not running: 3 minutes (it reports every 30 s by default). */
const silentAgentMs = 3 * 60_000;

/** The hosts whose agent never reported to the source, or not within `silentAgentMs`. */
async function silentAgents(source: KubeClient, hosts: readonly string[]): Promise<string[]> {
  const now = Date.now();
  const states = await Promise.all(
    hosts.map(async (host) => {
      const h = await source.get<HostJson>({ apiVersion: agentApiVersion, kind: 'Host', metadata: { name: host } });
      const last = h?.status?.lastHeartbeatTime ? Date.parse(h.status.lastHeartbeatTime) : Number.NaN;
      return Number.isNaN(last) || now - last > silentAgentMs ? host : undefined;
    }),
  );
  return states.filter((h): h is string => h !== undefined);
}

/**
 * The target's follow token for `host` is spent by that host, and the target's Host says its agent
 * registered with it and reported since (the grant clears the copied heartbeat). The token is
 * what tells: a Host copied from a cluster its agent followed into before (the move back of
 * `destroy cluster`) carries the same registration name and a heartbeat.
 */
async function followed(target: KubeClient, host: string): Promise<boolean> {
  const [h, token] = await Promise.all([
    target.get<HostJson>({ apiVersion: agentApiVersion, kind: 'Host', metadata: { name: host } }),
    target.get<TokenJson>({ apiVersion: agentApiVersion, kind: 'RegistrationToken', metadata: { name: followTokenName(host), namespace: registrationNamespace } }),
  ]);
  const spent = token?.status?.phase === 'Used' && token.status.host === host;
  return spent && h?.status?.registration === followTokenName(host) && !!h.status.lastHeartbeatTime;
}

/** The target's one-use token for `host`, issued once and read back on a resume; undefined when this host's agent has used it already. */
async function issueFollowToken(target: KubeClient, host: string, signal?: AbortSignal): Promise<string | undefined> {
  const ref = { apiVersion: agentApiVersion, kind: 'RegistrationToken', metadata: { name: followTokenName(host), namespace: registrationNamespace } };
  const existing = await target.get<TokenJson>(ref);
  if (existing?.status?.phase === 'Used' && existing.status.host === host) return undefined;
  if (existing?.status?.phase === 'Expired' || existing?.status?.phase === 'Used') {
    await target.delete(ref as KubeObject); // expired before its agent came: a new one
  }
  if (!existing || existing.status?.phase === 'Expired' || existing.status?.phase === 'Used') await target.apply<TokenJson>({ ...ref, spec: { ttl: '1h', hostName: host } });
  // The token's Secret once issued; undefined while the manager has not issued it.
  const look = async (): Promise<Observation<{ phase: string; token?: string }>> => {
    const status = (await target.get<TokenJson>(ref))?.status;
    const phase = status?.phase ?? 'none';
    if (status?.phase === 'Used' && status.host === host) return { state: 'done', value: { phase }, progress: phase };
    if (status?.phase === 'Ready' && status.secretName) {
      const secret = await target.get<DataObject>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: status.secretName, namespace: registrationNamespace } });
      const value = secret?.data?.['token'];
      if (value) return { state: 'done', value: { phase, token: Buffer.from(value, 'base64').toString('utf8') }, progress: phase };
    }
    return { state: 'waiting', value: { phase }, progress: phase };
  };
  const issued = await until(polling(look, pollMs), {
    what: `RegistrationToken ${registrationNamespace}/${ref.metadata.name} to be issued`,
    noProgressTimeoutMs: followTokenIssueTimeoutMs,
    ...(signal ? { signal } : {}),
    onStall: (last) =>
      new ExternalError(`The target's agent manager did not issue RegistrationToken ${registrationNamespace}/${ref.metadata.name} within ${followTokenIssueTimeoutMs / 1000} s (phase ${last?.value.phase ?? 'none'})`, {
        hint: 'Check that the agent provider (capi-manager) runs in the target, then run the same command again.',
      }),
  });
  return issued.token;
}

/** Deletes the hand-over Secret and the agent's ServiceAccount and RBAC in the source: its old credential is refused from then on. */
async function revokeInSource(source: KubeClient, host: string): Promise<void> {
  const namespace = planNamespace(host);
  const hostRole = `agent.provisioner.dev:host:${host}`;
  const doomed = [
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: handoverSecret, namespace } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'agent', namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'agent', namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'agent', namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: hostRole } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: hostRole } },
  ];
  for (const ref of doomed) {
    try {
      await source.delete(ref as KubeObject);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.isNotFound)) throw new ExternalError(`Revoking host ${host}'s credential in the source: ${messageOf(error)}`);
    }
  }
}
