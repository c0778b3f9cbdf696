/**
 * `provisioner hosts …` and `provisioner plan …`: machines this product did not create,
 * reached through the node agent (provider/, the agent.provisioner.dev API). A host runs
 * `provisioner-agent register` with a one-use token from `hosts registration-command`,
 * then executes the NodePlans of its namespace `host-<name>`.
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { agentApiVersion, cancelAnnotation, hostLabel, issueRegistrationCommand, type RegistrationCommand } from '../agent/registration.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { controlPlaneStatus } from '../controlplane/local-controlplane.js';
import { ConfigError, UsageError } from '../errors.js';
import { recordedExternalManagement } from '../installdir/management.js';
import { KubeClient, type KubeObject } from '../kube/client.js';

export { agentApiVersion, cancelAnnotation, caChecksum, hostLabel, registrationNamespace, serverCaConfigMap, type RegistrationCommand } from '../agent/registration.js';

interface Host extends KubeObject {
  spec?: { address?: string; roles?: string[] };
  status?: { planNamespace?: string; lastHeartbeatTime?: string; agentVersion?: string; hostname?: string; os?: string; arch?: string; conditions?: { type: string; status: string }[] };
}

export interface NodePlan extends KubeObject {
  spec?: unknown;
  status?: { phase?: string; observedGeneration?: number; startTime?: string; conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/**
 * The admin client of the management cluster of `dir`: the one recorded after a pivot (or
 * `--management-kubeconfig`), else its running local control plane; a usage error naming the
 * next step when none runs.
 */
async function managementClient(dir: string): Promise<KubeClient> {
  const external = await recordedExternalManagement(dir);
  if (external) return KubeClient.fromFile(external);
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

/**
 * Creates a one-use RegistrationToken, waits for the manager to issue it, and returns the
 * `provisioner-agent register` command for a host (src/agent/registration.ts).
 */
export async function registrationCommand(request: { dir: string; ttl?: string; signal: AbortSignal }): Promise<RegistrationCommand> {
  return withClient(request.dir, (client) => issueRegistrationCommand(client, request));
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
