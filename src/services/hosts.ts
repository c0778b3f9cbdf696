/**
 * `provisioner hosts …` and `provisioner plan …`: machines this product did not create,
 * reached through the node agent (provider/, the agent.provisioner.dev API). A host runs
 * `provisioner-agent register` with a one-use token from `hosts registration-command`,
 * then executes the NodePlans of its namespace `host-<name>`.
 */
import { randomBytes, X509Certificate, createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseAllDocuments } from 'yaml';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { controlPlaneStatus, forwarderName, readListenRecord } from '../controlplane/local-controlplane.js';
import { hostPort } from '../controlplane/listen-address.js';
import { ConfigError, InfrastructureError, UsageError } from '../errors.js';
import { KubeClient, type KubeObject } from '../kube/client.js';

export const agentApiVersion = 'agent.provisioner.dev/v1alpha1';
/** Where RegistrationTokens live and the server's CA is published (the manager's --registration-namespace default). */
export const registrationNamespace = 'provisioner-registration';
export const serverCaConfigMap = 'server-ca';
/** A plan's host, which must match its namespace (the webhook checks). */
export const hostLabel = 'agent.provisioner.dev/host';
/** Setting this to "true" stops a plan; the agent marks it Cancelled. */
export const cancelAnnotation = 'agent.provisioner.dev/cancel';

/** How long a registration token is valid when the caller names no TTL. */
export const defaultRegistrationTtl = '1h';
/** How long to wait for the manager to issue a token. */
const tokenIssueTimeoutMs = 60_000;
const pollIntervalMs = 250;

interface RegistrationToken extends KubeObject {
  spec?: { ttl?: string };
  status?: { phase?: 'Pending' | 'Ready' | 'Used' | 'Expired'; secretName?: string; expiresAt?: string; host?: string };
}

interface Host extends KubeObject {
  spec?: { address?: string; roles?: string[] };
  status?: { planNamespace?: string; lastHeartbeatTime?: string; agentVersion?: string; hostname?: string; os?: string; arch?: string; conditions?: { type: string; status: string }[] };
}

export interface NodePlan extends KubeObject {
  spec?: unknown;
  status?: { phase?: string; observedGeneration?: number; startTime?: string; conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/** The admin client of the running management cluster of `dir`; a usage error naming the next step when none runs. */
async function managementClient(dir: string): Promise<KubeClient> {
  const status = await controlPlaneStatus(dir);
  if (!status.usable) {
    throw new UsageError(`No running management cluster in ${status.layout.dir}`, { hint: `Start it with \`provisioner management start --dir ${dir}\`, then run this again.` });
  }
  return KubeClient.fromFile(controlPlaneLayout(dir).kubeconfig);
}

async function withClient<T>(dir: string, use: (client: KubeClient) => Promise<T>): Promise<T> {
  const client = await managementClient(dir);
  try {
    return await use(client);
  } finally {
    client.close();
  }
}

/** The CA pin an agent checks: sha256 of the certificate's DER, in hex (`openssl x509 -outform DER | sha256sum`). */
export function caChecksum(pem: string): string {
  return createHash('sha256').update(new X509Certificate(pem).raw).digest('hex');
}

export interface RegistrationCommand {
  /**
   * The command to run on the host. The token goes in the environment
   * (PROVISIONER_AGENT_TOKEN), which the agent reads like --token, so it never shows in
   * the host's process list.
   */
  command: string;
  server: string;
  caChecksum: string;
  token: string;
  /**
   * Whether `server` is an address hosts can reach: the control plane's listen address
   * (`--listen-address`, `bootstrap.listenAddress`), served by its forwarder. False: the
   * loopback address of the kubeconfig, which only an agent on this machine reaches.
   */
  reachableFromHosts: boolean;
  /** RegistrationToken object name in `registrationNamespace`. */
  tokenName: string;
  expiresAt: string;
}

/**
 * Creates a one-use RegistrationToken, waits for the manager to issue it, and returns the
 * `provisioner-agent register` command for a host. The server is the control plane's
 * listen address when its forwarder runs, else the loopback address of the management kubeconfig.
 */
export async function registrationCommand(request: { dir: string; ttl?: string; signal: AbortSignal }): Promise<RegistrationCommand> {
  return withClient(request.dir, async (client) => {
    const tokenName = `hosts-${randomBytes(4).toString('hex')}`;
    await client.apply<RegistrationToken>({
      apiVersion: agentApiVersion,
      kind: 'RegistrationToken',
      metadata: { name: tokenName, namespace: registrationNamespace },
      spec: { ttl: request.ttl ?? defaultRegistrationTtl },
    });
    const ref = { apiVersion: agentApiVersion, kind: 'RegistrationToken', metadata: { name: tokenName, namespace: registrationNamespace } };
    const deadline = Date.now() + tokenIssueTimeoutMs;
    let issued: RegistrationToken | undefined;
    while (Date.now() < deadline) {
      issued = await client.get<RegistrationToken>(ref);
      if (issued?.status?.phase === 'Ready' && issued.status.secretName && issued.status.expiresAt) break;
      await sleep(pollIntervalMs, undefined, { signal: request.signal });
    }
    const status = issued?.status;
    if (status?.phase !== 'Ready' || !status.secretName || !status.expiresAt) {
      throw new InfrastructureError(`RegistrationToken ${registrationNamespace}/${tokenName} was not issued within ${tokenIssueTimeoutMs / 1000} s (phase ${status?.phase ?? 'none'})`, {
        hint: `Check that provisioner-agent-manager runs (\`provisioner management status --dir ${request.dir}\`) and read its log.`,
      });
    }
    const secret = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: status.secretName, namespace: registrationNamespace } });
    const token = secret?.data?.token ? Buffer.from(secret.data.token, 'base64').toString('utf8') : '';
    const ca = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: serverCaConfigMap, namespace: registrationNamespace } });
    const caPem = ca?.data?.['ca.crt'];
    if (!token || !caPem) {
      throw new InfrastructureError(`The manager issued RegistrationToken ${registrationNamespace}/${tokenName} but ${!token ? `Secret ${status.secretName} holds no token` : `ConfigMap ${serverCaConfigMap} holds no ca.crt`}`, {
        hint: 'Read provisioner-agent-manager\'s log in the install directory\'s logs/.',
      });
    }
    const listen = await reachableServer(request.dir);
    const server = listen ?? client.server;
    const checksum = caChecksum(caPem);
    return {
      command: `PROVISIONER_AGENT_TOKEN=${token} provisioner-agent register --server ${server} --ca-checksum ${checksum}`,
      server,
      reachableFromHosts: listen !== undefined,
      caChecksum: checksum,
      token,
      tokenName,
      expiresAt: status.expiresAt,
    };
  });
}

/** `https://<listen address>:<port>` when the control plane of `dir` serves one and its forwarder runs. */
async function reachableServer(dir: string): Promise<string | undefined> {
  const listen = await readListenRecord(dir);
  if (!listen) return undefined;
  const forwarder = (await controlPlaneStatus(dir)).processes.find((p) => p.name === forwarderName);
  return forwarder?.running && forwarder.healthy ? `https://${hostPort(listen.address, listen.port)}` : undefined;
}

export interface HostSummary {
  name: string;
  address: string;
  /** The manager granted its registration (condition Registered). */
  registered: boolean;
  lastHeartbeat: string;
  agentVersion: string;
  planNamespace: string;
}

/** Every registered host. */
export async function listHosts(dir: string): Promise<HostSummary[]> {
  return withClient(dir, async (client) => {
    const hosts = await client.list<Host>(agentApiVersion, 'Host');
    return hosts.map((h) => ({
      name: h.metadata.name,
      address: h.spec?.address ?? '',
      registered: h.status?.conditions?.some((c) => c.type === 'Registered' && c.status === 'True') ?? false,
      lastHeartbeat: h.status?.lastHeartbeatTime ?? '',
      agentVersion: h.status?.agentVersion ?? '',
      planNamespace: h.status?.planNamespace ?? `host-${h.metadata.name}`,
    }));
  });
}

/** Reads one NodePlan from a YAML file, with the checks the CLI can make before the webhook does. */
export async function readPlanFile(file: string): Promise<NodePlan> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read plan file ${file}`, { cause: error, hint: 'Pass a NodePlan manifest with -f <file>.' });
  }
  const docs = parseAllDocuments(text).map((d) => d.toJSON() as unknown).filter((d) => d !== null);
  const plan = docs[0] as NodePlan | undefined;
  const problems: { path: string; message: string }[] = [];
  if (docs.length !== 1) problems.push({ path: '', message: `holds ${docs.length} documents; a plan file holds exactly one NodePlan` });
  else if (typeof plan !== 'object' || Array.isArray(plan)) problems.push({ path: '', message: 'is not a YAML mapping; a plan file holds one NodePlan object' });
  else if (plan.apiVersion !== agentApiVersion || plan.kind !== 'NodePlan') problems.push({ path: 'kind', message: `is ${String(plan.apiVersion)} ${String(plan.kind)}; expected ${agentApiVersion} NodePlan` });
  else {
    if (!plan.metadata?.name) problems.push({ path: 'metadata.name', message: 'is required' });
    if (!plan.metadata?.labels?.[hostLabel]) problems.push({ path: `metadata.labels["${hostLabel}"]`, message: 'names the host the plan runs on and is required' });
  }
  if (problems.length > 0 || !plan) {
    throw new ConfigError(`Plan file ${file} is not a NodePlan this command can apply`, problems, { hint: 'See `provisioner plan apply --help` for a minimal plan.' });
  }
  return plan;
}

/** Applies a plan in its host's namespace (`host-<host>`, whatever the file says). */
export async function applyPlan(request: { dir: string; plan: NodePlan }): Promise<NodePlan> {
  const host = request.plan.metadata.labels?.[hostLabel] ?? '';
  return withClient(request.dir, async (client) => {
    const known = await client.get<Host>({ apiVersion: agentApiVersion, kind: 'Host', metadata: { name: host } });
    if (!known) throw new UsageError(`No host ${host} is registered`, { hint: `List hosts with \`provisioner hosts list --dir ${request.dir}\`.` });
    const namespace = known.status?.planNamespace ?? `host-${host}`;
    return client.apply<NodePlan>({ ...request.plan, metadata: { ...request.plan.metadata, namespace } });
  });
}

function planRef(host: string, name: string) {
  return { apiVersion: agentApiVersion, kind: 'NodePlan', metadata: { name, namespace: `host-${host}` } };
}

/** A plan of a host; a usage error when there is none. */
export async function planStatus(request: { dir: string; host: string; name: string }): Promise<NodePlan> {
  return withClient(request.dir, async (client) => {
    const plan = await client.get<NodePlan>(planRef(request.host, request.name));
    if (!plan) throw new UsageError(`Host ${request.host} has no plan ${request.name}`, { hint: `kubectl get nodeplans -n host-${request.host} lists its plans.` });
    return plan;
  });
}

/** Asks the agent to stop a plan (the cancel annotation); the agent then marks it Cancelled. */
export async function cancelPlan(request: { dir: string; host: string; name: string }): Promise<NodePlan> {
  await planStatus(request);
  return withClient(request.dir, (client) => client.mergePatch<NodePlan>(planRef(request.host, request.name), { metadata: { annotations: { [cancelAnnotation]: 'true' } } }));
}
