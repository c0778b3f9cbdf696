/**
 * TEST DOUBLE — never part of the product. Plays Fleet's controller and Fleet's agent against
 * real API servers: a Fleet manager (a plain control plane with our Fleet CRDs,
 * manifests/crds/fleet.yaml) and a downstream cluster (another plain control plane), the way
 * Fleet's registration works (../shared/reference/001_…; Fleet v0.14's sources):
 *
 * - ClusterRegistrationToken: like fleet-controller, makes an import ServiceAccount allowed to
 *   create ClusterRegistrations in the token's namespace, a real token for it (TokenRequest),
 *   and the Secret named after the token whose `values` YAML holds that token, the token's
 *   namespace, the system registration namespace and Fleet's configured API server URL and CA
 *   (`apiServerURL`/`apiServerCA`, empty unless given); then sets `status.secretName`;
 * - manager-initiated: for a Cluster whose `spec.kubeConfigSecret` names a Secret, connects to
 *   the downstream with the kubeconfig under `value` (through `reach`, which can send it where
 *   nothing listens: a manager that cannot reach the cluster). Reached: the agent it would
 *   deploy checks in (`status.agent.lastSeen`, `status.namespace`). Not reached: condition
 *   Imported=False with the connection error, as Fleet's import handler reports it;
 * - agent-initiated: as Fleet's agent on the downstream, reads `fleet-agent-bootstrap` and the
 *   `fleet-agent` ConfigMap in cattle-fleet-system, connects to the manager with only the
 *   Secret's apiServerURL, apiServerCA and token, creates a ClusterRegistration with its
 *   clientID; as fleet-controller, grants it to the Cluster with that clientID (or creates
 *   `cluster-<hash>`), after which the agent checks in and deletes the bootstrap Secret.
 *
 * It reconciles by polling every 100 ms; `paused` stops it acting (a register that waits);
 * `failures` keeps what went wrong (a test can assert there was nothing).
 */
import { createHash, randomBytes } from 'node:crypto';
import { parse, stringify } from 'yaml';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';

const fleet = 'fleet.cattle.io/v1alpha1';
const agentNamespace = 'cattle-fleet-system';
const systemRegistrationNamespace = 'cattle-fleet-clusters-system';

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown>; data?: Record<string, string> };

const decode = (value: string | undefined) => Buffer.from(value ?? '', 'base64').toString('utf8');
const encode = (value: string) => Buffer.from(value).toString('base64');
const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 12);

export interface FleetDoubleOptions {
  /** Admin client of the Fleet manager. */
  manager: KubeClient;
  /** Admin client of the downstream cluster, where the agent runs. */
  downstream: KubeClient;
  /** What fleet-controller's configuration says agents use to reach it; empty (the default) makes register fall back to its kubeconfig's. */
  apiServerURL?: string;
  apiServerCA?: string;
}

export class FleetDouble {
  /** When true, the double does nothing (Fleet not answering yet). */
  paused = false;
  /** How the manager reaches a server in a kubeconfig Secret. Default: as written. */
  reach: (server: string) => string = (server) => server;
  /** Errors of reconciles, by what failed. */
  readonly failures: string[] = [];
  /** ClusterRegistrations the agent created, as `namespace/name`. */
  readonly registrations: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();

  private constructor(private readonly options: FleetDoubleOptions) {}

  static start(options: FleetDoubleOptions): FleetDouble {
    const double = new FleetDouble(options);
    double.timer = setInterval(() => {
      double.running = double.running.then(() => (double.paused ? undefined : double.reconcile()));
    }, 100);
    return double;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  private async attempt(what: string, run: () => Promise<void>): Promise<void> {
    try {
      await run();
    } catch (error) {
      const message = `${what}: ${error instanceof Error ? error.message : String(error)}`;
      if (this.failures.at(-1) !== message) this.failures.push(message);
    }
  }

  private async reconcile(): Promise<void> {
    const { manager } = this.options;
    for (const token of await manager.list<Obj>(fleet, 'ClusterRegistrationToken')) {
      if (!token.status?.['secretName'] && !token.metadata.deletionTimestamp) await this.attempt(`token ${token.metadata.name}`, () => this.issue(token));
    }
    for (const cluster of await manager.list<Obj>(fleet, 'Cluster')) {
      const agent = cluster.status?.['agent'] as { lastSeen?: string } | undefined;
      if (cluster.spec?.['kubeConfigSecret'] && !agent?.lastSeen) await this.attempt(`import ${cluster.metadata.name}`, () => this.importCluster(cluster));
    }
    await this.attempt('agent', () => this.agentRegisters());
    for (const registration of await manager.list<Obj>(fleet, 'ClusterRegistration')) {
      if (!registration.status?.['granted']) await this.attempt(`grant ${registration.metadata.name}`, () => this.grant(registration));
    }
  }

  /** fleet-controller's answer to a token: import account, its real token, the values Secret, status.secretName. */
  private async issue(token: Obj): Promise<void> {
    const { manager } = this.options;
    const namespace = token.metadata.namespace!;
    const account = `import-${hash(token.metadata.uid ?? token.metadata.name)}`;
    await manager.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: systemRegistrationNamespace } });
    await manager.apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: account, namespace } });
    await manager.apply({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: account, namespace },
      rules: [{ apiGroups: ['fleet.cattle.io'], resources: ['clusterregistrations'], verbs: ['create', 'get', 'patch'] }],
    });
    await manager.apply({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: account, namespace },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: account },
    });
    const values = {
      clusterNamespace: namespace,
      apiServerURL: this.options.apiServerURL ?? '',
      apiServerCA: this.options.apiServerCA ?? '',
      token: await this.requestToken(namespace, account),
      systemRegistrationNamespace,
    };
    await manager.apply({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: token.metadata.name, namespace, labels: { 'fleet.cattle.io/managed': 'true' } },
      type: 'fleet.cattle.io/cluster-registration-values',
      data: { values: encode(stringify(values)) },
    });
    await manager.applyStatus({ ...token, status: { secretName: token.metadata.name, expires: new Date(Date.now() + 3_600_000).toISOString() } });
  }

  /** A TokenRequest for the service account: a credential the real API server accepts. */
  private async requestToken(namespace: string, account: string): Promise<string> {
    const serviceAccount = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: account, namespace } };
    const answer = await this.options.manager.createSubresource<{ status: { token: string } }>(serviceAccount, 'token', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    });
    return answer.status.token;
  }

  /** Fleet's import of a manager-initiated Cluster: reach the downstream with its kubeconfig, then the agent checks in. */
  private async importCluster(cluster: Obj): Promise<void> {
    const { manager } = this.options;
    const namespace = cluster.metadata.namespace!;
    const secret = await manager.get<Obj>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: String(cluster.spec!['kubeConfigSecret']), namespace } });
    if (!secret) return;
    const kubeconfig = parse(decode(secret.data?.['value'])) as { clusters: { cluster: { server: string } }[] };
    for (const entry of kubeconfig.clusters) entry.cluster.server = this.reach(entry.cluster.server);
    const downstream = KubeClient.fromText(stringify(kubeconfig));
    try {
      await downstream.raw('/version', 2_000);
    } catch (error) {
      const message = `Get "${downstream.server}/version": ${error instanceof Error ? error.message : String(error)}`;
      await manager.applyStatus({ ...cluster, status: { conditions: [{ type: 'Imported', status: 'False', reason: 'Error', message }] } });
      return;
    } finally {
      downstream.close();
    }
    await this.checkIn(cluster);
  }

  /** The agent on the downstream: registers with the bootstrap Secret's credentials only. */
  private async agentRegisters(): Promise<void> {
    const { downstream } = this.options;
    const bootstrap = await downstream.get<Obj>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'fleet-agent-bootstrap', namespace: agentNamespace } });
    if (!bootstrap) return;
    const data = Object.fromEntries(Object.entries(bootstrap.data ?? {}).map(([key, value]) => [key, decode(value)]));
    const config = await downstream.get<Obj>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fleet-agent', namespace: agentNamespace } });
    const agentConfig = JSON.parse(config?.data?.['config'] ?? '{}') as { clientID?: string; labels?: Record<string, string> };
    const clientID =
      agentConfig.clientID || (await downstream.get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }))!.metadata.uid!;
    const kubeconfig = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'cluster', cluster: { server: data['apiServerURL'], ...(data['apiServerCA'] ? { 'certificate-authority-data': encode(data['apiServerCA']) } : {}) } }],
      users: [{ name: 'user', user: { token: data['token'] } }],
      contexts: [{ name: 'default', context: { cluster: 'cluster', user: 'user', namespace: data['clusterNamespace'] } }],
      'current-context': 'default',
    };
    const upstream = KubeClient.fromText(stringify(kubeconfig));
    try {
      const name = `request-${randomBytes(4).toString('hex')}`;
      await upstream.apply({
        apiVersion: fleet,
        kind: 'ClusterRegistration',
        metadata: { name, namespace: data['clusterNamespace']! },
        spec: { clientID, clientRandom: randomBytes(16).toString('hex'), clusterLabels: agentConfig.labels ?? {} },
      });
      this.registrations.push(`${data['clusterNamespace']}/${name}`);
    } finally {
      upstream.close();
    }
    // Registered: the agent keeps its own credential and drops the bootstrap one.
    await downstream.delete(bootstrap);
  }

  /** fleet-controller grants a registration to the Cluster with its clientID (creating one when none has it); its agent then checks in. */
  private async grant(registration: Obj): Promise<void> {
    const { manager } = this.options;
    const namespace = registration.metadata.namespace!;
    const clientID = String(registration.spec?.['clientID'] ?? '');
    let cluster = (await manager.list<Obj>(fleet, 'Cluster', { namespace })).find((c) => c.spec?.['clientID'] === clientID);
    if (!cluster) {
      const name = `cluster-${hash(clientID)}`;
      cluster = await manager.apply<Obj>({ apiVersion: fleet, kind: 'Cluster', metadata: { name, namespace, labels: { ...(registration.spec?.['clusterLabels'] as Record<string, string>), 'fleet.cattle.io/cluster': name } }, spec: { clientID } });
    }
    await manager.applyStatus({ ...registration, status: { clusterName: cluster.metadata.name, granted: true } });
    await this.checkIn(cluster);
  }

  private async checkIn(cluster: Obj): Promise<void> {
    const namespace = cluster.metadata.namespace!;
    await this.options.manager.applyStatus({
      ...cluster,
      status: {
        namespace: `cluster-${namespace}-${cluster.metadata.name}-${hash(cluster.metadata.uid ?? '')}`,
        display: { readyBundles: '0/0', state: '' },
        agent: { lastSeen: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), namespace: agentNamespace },
      },
    });
  }
}
