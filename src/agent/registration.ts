/**
 * Registering hosts with the node agent's manager (provider/, agent.provisioner.dev):
 * a one-use RegistrationToken the manager issues, the CA pin, and the `provisioner-agent
 * register` command a host runs. Used by `provisioner hosts registration-command` and by
 * platforms that wait for hosts.
 */
import { randomBytes, X509Certificate, createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { controlPlaneStatus, forwarderName, readListenRecord } from '../controlplane/local-controlplane.js';
import { hostPort } from '../controlplane/listen-address.js';
import { InfrastructureError } from '../errors.js';
import { until, type Observation } from '../progress/until.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { snapshotObjects, watching, type Snapshot } from '../wait/waiter.js';

export const agentApiVersion = 'agent.provisioner.dev/v1alpha1';
/** Where RegistrationTokens live and the server's CA is published (the manager's --registration-namespace default). */
export const registrationNamespace = 'provisioner-registration';
export const serverCaConfigMap = 'server-ca';
/** A plan's host, which must match its namespace (the webhook checks). */
export const hostLabel = 'agent.provisioner.dev/host';
/** Setting this to "true" stops a plan; the agent marks it Cancelled. */
export const cancelAnnotation = 'agent.provisioner.dev/cancel';

/** How long a registration token is valid when the caller names no TTL. */
const defaultRegistrationTtl = '1h';
/** How long to wait for the manager to issue a token while its phase does not change. */
const tokenIssueTimeoutMs = 60_000;

interface RegistrationToken extends KubeObject {
  spec?: { ttl?: string };
  status?: { phase?: 'Pending' | 'Ready' | 'Used' | 'Expired'; secretName?: string; expiresAt?: string; host?: string };
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
   * (`--listen-address`, `bootstrap.listenAddress`), served by its forwarder, or the
   * kubeconfig's server when it is not loopback (a real management cluster's endpoint, a
   * self-managed cluster's). False: the loopback address of the kubeconfig, which only an
   * agent on this machine reaches.
   */
  reachableFromHosts: boolean;
  /** RegistrationToken object name in `registrationNamespace`. */
  tokenName: string;
  expiresAt: string;
}

/**
 * Creates a one-use RegistrationToken through `client` (the management cluster of `dir`),
 * waits for the manager to issue it, and returns the `provisioner-agent register` command
 * for a host. The server is the control plane's listen address when its forwarder runs,
 * else the loopback address of the management kubeconfig.
 */
export async function issueRegistrationCommand(client: KubeClient, request: { dir: string; ttl?: string; signal: AbortSignal }): Promise<RegistrationCommand> {
  const tokenName = `hosts-${randomBytes(4).toString('hex')}`;
  await client.apply<RegistrationToken>({
    apiVersion: agentApiVersion,
    kind: 'RegistrationToken',
    metadata: { name: tokenName, namespace: registrationNamespace },
    spec: { ttl: request.ttl ?? defaultRegistrationTtl },
  });
  const tokens = { apiVersion: agentApiVersion, kind: 'RegistrationToken', namespace: registrationNamespace };
  // Empty strings until the manager has issued the token (its phase Ready with a Secret and an expiry).
  // Watched, not polled: the command prints the moment the manager's status lands.
  const judge = (snapshot: Snapshot): Observation<{ phase: string; secretName: string; expiresAt: string }> => {
    const status = snapshotObjects<RegistrationToken>(snapshot, tokens).find((t) => t.metadata.name === tokenName)?.status;
    const seen = { phase: status?.phase ?? 'none', secretName: status?.secretName ?? '', expiresAt: status?.expiresAt ?? '' };
    const issued = seen.phase === 'Ready' && seen.secretName !== '' && seen.expiresAt !== '';
    return { state: issued ? 'done' : 'waiting', value: seen, progress: `phase ${seen.phase}` };
  };
  const status = await until(watching(client, [tokens], judge), {
    what: `RegistrationToken ${registrationNamespace}/${tokenName} to be issued`,
    noProgressTimeoutMs: tokenIssueTimeoutMs,
    signal: request.signal,
    onStall: (last) =>
      new InfrastructureError(`RegistrationToken ${registrationNamespace}/${tokenName} was not issued within ${tokenIssueTimeoutMs / 1000} s (phase ${last?.value.phase ?? 'none'})`, {
        hint: `Check that capi-manager, which serves the agent provider, runs (\`provisioner management status --dir ${request.dir}\`) and read its log.`,
      }),
  });
  const secret = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: status.secretName, namespace: registrationNamespace } });
  const token = secret?.data?.token ? Buffer.from(secret.data.token, 'base64').toString('utf8') : '';
  const ca = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: serverCaConfigMap, namespace: registrationNamespace } });
  const caPem = ca?.data?.['ca.crt'];
  if (!token || !caPem) {
    throw new InfrastructureError(`The manager issued RegistrationToken ${registrationNamespace}/${tokenName} but ${!token ? `Secret ${status.secretName} holds no token` : `ConfigMap ${serverCaConfigMap} holds no ca.crt`}`, {
      hint: 'Read capi-manager\'s log (the agent provider\'s process) in the install directory\'s logs/.',
    });
  }
  const listen = await reachableServer(request.dir);
  const server = listen ?? client.server;
  const checksum = caChecksum(caPem);
  return {
    command: `PROVISIONER_AGENT_TOKEN=${token} provisioner-agent register --server ${server} --ca-checksum ${checksum}`,
    server,
    reachableFromHosts: listen !== undefined || !isLoopbackUrl(server),
    caChecksum: checksum,
    token,
    tokenName,
    expiresAt: status.expiresAt,
  };
}

/** Whether the URL's host is a loopback address (127.0.0.0/8, ::1) or `localhost`. */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/** `https://<listen address>:<port>` when the control plane of `dir` serves one and its forwarder runs. */
async function reachableServer(dir: string): Promise<string | undefined> {
  const listen = await readListenRecord(dir);
  if (!listen) return undefined;
  const forwarder = (await controlPlaneStatus(dir)).processes.find((p) => p.name === forwarderName);
  return forwarder?.running && forwarder.healthy ? `https://${hostPort(listen.address, listen.port)}` : undefined;
}
