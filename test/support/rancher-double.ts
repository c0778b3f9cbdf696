/**
 * TEST DOUBLE — never part of the product. Plays Rancher's server side against a real API
 * server that has our Rancher CRDs (manifests/crds/rancher.yaml) installed, the way Rancher
 * Turtles' own tests pair envtest with an HTTP test server:
 *
 * - publishes its CA in the `cacerts` Setting and serves registration manifests over HTTPS on
 *   127.0.0.1 with a certificate that CA signed;
 * - gives each provisioning (v1) cluster a management (v3) cluster `c-m-xxxxxxxx` in
 *   `status.clusterName`, and each management cluster its namespace and a cleanup finalizer;
 * - fills each ClusterRegistrationToken's `status.manifestUrl` (unless `holdManifestUrl`);
 * - sets Ready (v3: condition Ready=True; v1: status.ready and Ready=True) once every object of
 *   that cluster's manifest exists in the downstream cluster;
 * - on a deleted management cluster, removes its finalizer (Rancher's cleanup), and deletes the
 *   management cluster behind a deleted provisioning cluster;
 * - optionally plays Turtles (`turtles = true`): a CAPI Cluster labelled for auto-import gets a
 *   v3 cluster with the owner labels, and the manifest created downstream, as Turtles would.
 *
 * It reconciles by polling every 100 ms. `serve` switches what the manifest URL answers.
 */
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { stringify } from 'yaml';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../../src/kube/client.js';

const management = 'management.cattle.io/v3';
const provisioning = 'provisioning.cattle.io/v1';
const cleanupFinalizer = 'controller.cattle.io/cluster-agent-controller-cleanup';

/** What the manifest URL answers: the real manifest, text that is no manifest, valid objects followed by garbage, or HTTP 500. */
export type ManifestMode = 'manifest' | 'garbage' | 'garbage-after-objects' | 'error';

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };

const random = (n: number) => randomBytes(n).toString('hex').slice(0, n);

/** The objects Rancher's agent manifest would create for `cluster` (only kinds a plain control plane serves: no Deployment). */
export function agentObjects(cluster: string): KubeObject[] {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'cattle-system' } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'cattle', namespace: 'cattle-system' } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'cattle-admin-binding' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' }, subjects: [{ kind: 'ServiceAccount', name: 'cattle', namespace: 'cattle-system' }] },
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: `cattle-credentials-${cluster}`, namespace: 'cattle-system' }, stringData: { url: 'https://rancher.invalid', token: 'not-a-real-token' } },
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'cattle-cluster-agent', namespace: 'cattle-system' }, spec: { ports: [{ port: 80, targetPort: 80, name: 'http' }], selector: { app: 'cattle-cluster-agent' } } },
  ];
}

export class RancherDouble {
  serve: ManifestMode = 'manifest';
  /** While true, tokens get no manifest URL (a Rancher that is slow to answer). */
  holdManifestUrl = false;
  /** While true, it also plays Turtles' import controller. */
  turtles = false;
  /** Manifest downloads, by path. */
  readonly downloads: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private lastError: unknown;

  private constructor(
    private readonly rancher: KubeClient,
    private readonly downstreamOf: () => KubeClient | undefined,
    private readonly server: https.Server,
    readonly caPem: string,
  ) {}

  /**
   * Starts the HTTPS server and the reconcile loop; writes the `cacerts` Setting. `downstream`
   * is the cluster the agent objects land in, or a function that returns it once it exists
   * (a cluster `create cluster` is still making).
   */
  static async start(rancher: KubeClient, downstream: KubeClient | (() => KubeClient | undefined)): Promise<RancherDouble> {
    const ca = await createCertificateAuthority({ commonName: 'rancher-double-ca' });
    const serving = await issueCertificate(ca, { commonName: 'rancher', ipAddresses: ['127.0.0.1'], usages: 'server' });
    const holder: { double?: RancherDouble } = {};
    const server = https.createServer({ key: serving.keyPem, cert: serving.certPem }, (request, response) => {
      const double = holder.double!;
      const match = /^\/v3\/import\/[a-z0-9]+_([a-z0-9-]+)\.yaml$/.exec(request.url ?? '');
      if (!match) return void response.writeHead(404).end('not found');
      double.downloads.push(request.url!);
      const cluster = match[1]!;
      const manifest = agentObjects(cluster)
        .map((o) => stringify(o))
        .join('---\n');
      switch (double.serve) {
        case 'manifest':
          return void response.writeHead(200, { 'content-type': 'application/yaml' }).end(manifest);
        case 'garbage':
          return void response.writeHead(200, { 'content-type': 'text/html' }).end('<html><body><h1>Sign in to Rancher</h1></body></html>\n');
        case 'garbage-after-objects':
          return void response.writeHead(200, { 'content-type': 'application/yaml' }).end(`${manifest}---\nkind: [unclosed\n`);
        case 'error':
          return void response.writeHead(500).end('internal error');
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    holder.double = new RancherDouble(rancher, typeof downstream === 'function' ? downstream : () => downstream, server, ca.certPem);
    await rancher.apply({ apiVersion: management, kind: 'Setting', metadata: { name: 'cacerts' }, value: ca.certPem } as KubeObject);
    holder.double.timer = setInterval(() => void holder.double!.tick(), 100);
    return holder.double;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The last reconcile error, if any (tests print it when a wait times out). */
  get error(): unknown {
    return this.lastError;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      await this.reconcile();
      this.lastError = undefined;
    } catch (error) {
      this.lastError = error;
    } finally {
      this.busy = false;
    }
  }

  private async reconcile(): Promise<void> {
    if (this.turtles) await this.playTurtles();
    const v1s = await this.rancher.list<Obj>(provisioning, 'Cluster');
    for (const v1 of v1s) {
      if (v1.metadata.deletionTimestamp) continue;
      if (!v1.status?.['clusterName']) {
        const name = `c-m-${random(8)}`;
        await this.rancher.create({ apiVersion: management, kind: 'Cluster', metadata: { name }, spec: { displayName: v1.metadata.name } });
        await this.rancher.applyStatus({ ...v1, status: { clusterName: name } });
      }
    }
    const v3s = await this.rancher.list<Obj>(management, 'Cluster');
    for (const v3 of v3s) {
      const name = v3.metadata.name;
      if (v3.metadata.deletionTimestamp) {
        await this.rancher.mergePatch(v3, { metadata: { finalizers: null } });
        continue;
      }
      if (!v3.metadata.finalizers?.includes(cleanupFinalizer)) await this.rancher.mergePatch(v3, { metadata: { finalizers: [...(v3.metadata.finalizers ?? []), cleanupFinalizer] } });
      await this.rancher.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
      const ready = v3.status?.['conditions'] && (v3.status['conditions'] as { type: string; status: string }[]).some((c) => c.type === 'Ready' && c.status === 'True');
      if (!ready && (await this.agentInstalled(name))) {
        await this.rancher.applyStatus({ ...v3, status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'AgentDeployed', status: 'True' }] } });
        for (const v1 of v1s.filter((c) => c.status?.['clusterName'] === name)) {
          await this.rancher.applyStatus({ ...v1, status: { ...v1.status, ready: true, agentDeployed: true, conditions: [{ type: 'Ready', status: 'True' }] } });
        }
      } else if (!ready && !v3.status?.['conditions']) {
        await this.rancher.applyStatus({ ...v3, status: { conditions: [{ type: 'Ready', status: 'False', reason: 'Pending', message: 'Waiting for the cluster agent to connect' }] } });
      }
    }
    // A deleted provisioning cluster takes its management cluster with it.
    const current = await this.rancher.list<Obj>(provisioning, 'Cluster');
    const live = new Set(current.filter((c) => !c.metadata.deletionTimestamp).map((c) => c.status?.['clusterName']));
    for (const v3 of v3s) if (v3.metadata.name.startsWith('c-m-') && !live.has(v3.metadata.name) && !v3.metadata.deletionTimestamp) await this.rancher.delete(v3);
    if (this.holdManifestUrl) return;
    for (const token of await this.rancher.list<Obj>(management, 'ClusterRegistrationToken')) {
      if (token.status?.['manifestUrl']) continue;
      const cluster = token.spec?.['clusterName'] as string;
      await this.rancher.applyStatus({ ...token, status: { manifestUrl: `https://127.0.0.1:${this.port}/v3/import/${random(32)}_${cluster}.yaml`, token: random(32) } });
    }
  }

  /** Every object of `cluster`'s manifest exists downstream (what the agent's connection would prove). */
  private async agentInstalled(cluster: string): Promise<boolean> {
    const downstream = this.downstreamOf();
    if (!downstream) return false;
    for (const obj of agentObjects(cluster)) {
      const found = await downstream.get({ apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name: obj.metadata.name, ...(obj.metadata.namespace ? { namespace: obj.metadata.namespace } : {}) } }).catch((error: unknown) => {
        if (error instanceof KubeApiError && error.isNotFound) return undefined;
        throw error;
      });
      if (!found) return false;
    }
    return true;
  }

  /** Turtles' v3 import controller, reduced: a labelled CAPI Cluster gets its Rancher cluster and the manifest downstream. */
  private async playTurtles(): Promise<void> {
    const capiClusters = await this.rancher.list<Obj>('cluster.x-k8s.io/v1beta2', 'Cluster');
    for (const capi of capiClusters) {
      if (capi.metadata.labels?.['cluster-api.cattle.io/rancher-auto-import'] !== 'true') continue;
      const selector = `cluster-api.cattle.io/capi-cluster-owner=${capi.metadata.name},cluster-api.cattle.io/capi-cluster-owner-ns=${capi.metadata.namespace}`;
      const [existing] = await this.rancher.list<Obj>(management, 'Cluster', { labelSelector: selector });
      if (!existing) {
        await this.rancher.create({
          apiVersion: management,
          kind: 'Cluster',
          metadata: { name: '', generateName: 'c-', labels: { 'cluster-api.cattle.io/capi-cluster-owner': capi.metadata.name, 'cluster-api.cattle.io/capi-cluster-owner-ns': capi.metadata.namespace!, 'cluster-api.cattle.io/owned': '' } },
          spec: { displayName: capi.metadata.name, description: 'CAPI cluster imported to Rancher' },
        });
        continue;
      }
      for (const obj of agentObjects(existing.metadata.name)) {
        await this.downstreamOf()?.create(obj).catch((error: unknown) => {
          if (!(error instanceof KubeApiError && error.reason === 'AlreadyExists')) throw error;
        });
      }
    }
  }
}
