/**
 * `register rancher`, `import --to rancher` and destroy's Rancher step against two REAL API
 * servers booted from the bundle (etcd and kube-apiserver, no controllers): "Rancher's"
 * cluster with our Rancher CRDs (manifests/crds/rancher.yaml) installed, and a plain
 * downstream cluster standing for the workload cluster. Rancher's server side is the test
 * double test/support/rancher-double.ts (token manifest URLs served over loopback HTTPS with
 * its own CA, Ready once the manifest's objects exist downstream); nothing of it is in src/.
 * An install directory here is what hand-off leaves: auth/kubeconfig (the downstream's) and
 * .provisioner/cluster-state.yaml with the CAPI Cluster. Both control planes are shared by
 * every test of the file. Fails (never skips) when the bundle is missing.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import { ExternalError } from '../../src/errors.js';
import { RecordingSink } from '../support/recording-sink.js';
import { installCrds, loadCrds } from '../../src/handoff/crds.js';
import { readRancherRecord, rancherRecordPath } from '../../src/handoff/rancher/journal.js';
import type { KubeClient, KubeObject } from '../../src/kube/client.js';
import { destroyCluster } from '../../src/services/destroy.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { importToRancher, registerRancher } from '../../src/services/rancher.js';
import { RancherDouble } from '../support/rancher-double.js';
import { removeInstallDir, tempInstallDir, waitFor } from './support/controlplane.js';

const management = 'management.cattle.io/v3';
const provisioning = 'provisioning.cattle.io/v1';
const ownerSelector = (name: string, namespace: string) => `cluster-api.cattle.io/capi-cluster-owner=${name},cluster-api.cattle.io/capi-cluster-owner-ns=${namespace}`;
/** Short waits: the double answers within a second, so a stall means a bug. */
const fast = { noProgressTimeoutMs: 30_000, pollIntervalMs: 200 };

describe('hand-off to Rancher against real API servers and a Rancher double', () => {
  const abort = new AbortController();
  const dirs: string[] = [];
  let rancherPlane: LocalControlPlane | undefined;
  let downstreamPlane: LocalControlPlane | undefined;
  let double: RancherDouble | undefined;
  const rancher = (): KubeClient => rancherPlane!.kube;
  const downstream = (): KubeClient => downstreamPlane!.kube;

  /** An install directory as hand-off leaves it, for CAPI Cluster `name` in namespace `name`. */
  async function installDir(name: string, labels: Record<string, string> = {}): Promise<string> {
    const dir = await tempInstallDir(`rancher-${name}`);
    dirs.push(dir);
    await mkdir(path.join(dir, 'auth'), { recursive: true });
    await mkdir(path.join(dir, '.provisioner'), { recursive: true });
    await copyFile(downstreamPlane!.kubeconfig, path.join(dir, 'auth', 'kubeconfig'));
    const cluster = { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace: name, uid: `uid-${name}`, labels }, spec: {}, status: { phase: 'Provisioned' } };
    await writeFile(path.join(dir, '.provisioner', 'cluster-state.yaml'), `# Final state\n${stringify(cluster)}`);
    return dir;
  }

  const register = (dir: string, strategy: 'v1' | 'v3', sink = new RecordingSink()) =>
    registerRancher({ dir, rancherKubeconfig: rancherPlane!.kubeconfig, strategy, sink, signal: abort.signal, ...fast });
  const agentSecret = (cluster: string) => downstream().get({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `cattle-credentials-${cluster}`, namespace: 'cattle-system' } });
  const v3Of = (name: string) => rancher().list<KubeObject & { spec: { displayName?: string } }>(management, 'Cluster', { labelSelector: ownerSelector(name, name) });

  beforeAll(async () => {
    const sink = new RecordingSink();
    const [rancherDir, downstreamDir] = [await tempInstallDir('rancher-mgmt'), await tempInstallDir('rancher-downstream')];
    dirs.push(rancherDir, downstreamDir);
    // No provider: etcd and kube-apiserver only, the plainest real API server.
    rancherPlane = await prepareLocalControlPlane({ dir: rancherDir, detached: false, controllers: [], sink, signal: abort.signal });
    downstreamPlane = await prepareLocalControlPlane({ dir: downstreamDir, detached: false, controllers: [], sink, signal: abort.signal });
    await Promise.all([rancherPlane.start(), downstreamPlane.start()]);
    await installCrds(rancher(), await loadCrds('rancher.yaml'), { signal: abort.signal });
    await rancher().apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'fleet-default' } });
    double = await RancherDouble.start(rancher(), downstream());
  });

  afterAll(async () => {
    await double?.stop();
    await Promise.all([rancherPlane?.stop().catch(() => undefined), downstreamPlane?.stop().catch(() => undefined)]);
    abort.abort();
    for (const dir of dirs) await removeInstallDir(dir);
  });

  it('v3: creates c-xxxxx with the owner labels, display name and the CAPI labels, applies the manifest, waits for Ready; a second run after a rename finds it by its labels', async () => {
    const dir = await installDir('alpha', { env: 'test' });
    const sink = new RecordingSink();
    const result = await register(dir, 'v3', sink);
    expect(result).toMatchObject({ mode: 'import', strategy: 'v3', resumed: false, manifest: { created: 5, existing: 0 } });
    expect(result.rancherCluster.name).toMatch(/^c-[a-z0-9]{5}$/);
    const [cluster, ...others] = await v3Of('alpha');
    expect(others).toEqual([]);
    expect(cluster!.metadata.name).toBe(result.rancherCluster.name);
    expect(cluster!.metadata.labels).toMatchObject({ 'cluster-api.cattle.io/capi-cluster-owner': 'alpha', 'cluster-api.cattle.io/capi-cluster-owner-ns': 'alpha', env: 'test' });
    expect(cluster!.spec.displayName).toBe('alpha');
    expect(await agentSecret(cluster!.metadata.name)).toBeDefined();
    // The token Rancher's double answered lives in the namespace named after the cluster.
    expect((await rancher().list(management, 'ClusterRegistrationToken', { namespace: cluster!.metadata.name })).map((t) => t.metadata.name)).toEqual(['default-token']);
    const stages = sink.ofType('stage').filter((s) => s.state === 'succeeded').map((s) => s.stage);
    expect(stages).toEqual(['rancher/preflight', 'rancher/cluster', 'rancher/token', 'rancher/manifest', 'rancher/ready']);
    expect(await readRancherRecord(dir)).toMatchObject({ mode: 'import', step: 'ready', rancherCluster: cluster!.metadata.name, query: { strategy: 'v3' } });
    // No log line carries the manifest URL's token path.
    expect(JSON.stringify(sink.events)).not.toMatch(/\/v3\/import\//);

    await rancher().mergePatch(cluster!, { spec: { displayName: 'alpha renamed in Rancher' } });
    const againSink = new RecordingSink();
    const again = await register(dir, 'v3', againSink);
    // The same declared list: the label is Turtles' step, and a cluster Rancher reports Ready needs no token or manifest.
    expect(againSink.ofType('stage').map((s) => `${s.stage}:${s.state}`).filter((s) => !s.endsWith(':started'))).toEqual([
      'rancher/preflight:succeeded', 'rancher/label:skipped', 'rancher/cluster:succeeded', 'rancher/token:skipped', 'rancher/manifest:skipped', 'rancher/ready:succeeded',
    ]);
    expect(again).toMatchObject({ resumed: true, rancherCluster: { name: cluster!.metadata.name, displayName: 'alpha renamed in Rancher' } });
    expect(again.manifest).toBeUndefined(); // Ready already: no manifest fetched again
    expect((await v3Of('alpha')).map((c) => c.metadata.name)).toEqual([cluster!.metadata.name]);
  });

  it('v1: creates the provisioning cluster in fleet-default with the owner labels, uses the token of the management cluster Rancher made, waits for status.ready', async () => {
    const dir = await installDir('beta');
    const result = await register(dir, 'v1');
    expect(result).toMatchObject({ strategy: 'v1', rancherCluster: { apiVersion: provisioning, name: 'beta-capi', namespace: 'fleet-default' } });
    const [v1] = await rancher().list<KubeObject & { status: { clusterName: string; ready: boolean } }>(provisioning, 'Cluster', { namespace: 'fleet-default', labelSelector: ownerSelector('beta', 'beta') });
    expect(v1!.status.ready).toBe(true);
    expect(v1!.status.clusterName).toMatch(/^c-m-/);
    expect(await agentSecret(v1!.status.clusterName)).toBeDefined();
    expect(await v3Of('beta')).toEqual([]); // the management cluster behind it carries no owner labels: v1 is found by its own
  });

  it('destroy cluster removes Rancher\'s cluster by its labels first (waiting out Rancher\'s finalizer) and forgets the registration', async () => {
    const dir = await installDir('gamma');
    const { rancherCluster } = await register(dir, 'v3');
    const [live] = await v3Of('gamma');
    expect(live!.metadata.finalizers).toContain('controller.cattle.io/cluster-agent-controller-cleanup');
    const sink = new RecordingSink();
    await destroyCluster({ dir, sink, signal: abort.signal, noProgressTimeoutMs: 30_000 });
    expect(await v3Of('gamma')).toEqual([]);
    expect(await rancher().get({ apiVersion: management, kind: 'Cluster', metadata: { name: rancherCluster.name } })).toBeUndefined();
    await expect(readFile(rancherRecordPath(dir))).rejects.toThrow(/ENOENT/);
    expect(sink.ofType('log').map((l) => l.message)).toContain(`Deleted management.cattle.io/v3 Cluster ${rancherCluster.name} ("gamma") from Rancher`);
  });

  it('a manifest URL that serves garbage fails with the class, the URL\'s origin only and the documents at fault, and creates nothing downstream; the next run finishes', async () => {
    const dir = await installDir('delta');
    for (const mode of ['garbage', 'garbage-after-objects'] as const) {
      double!.serve = mode;
      const error = await register(dir, 'v3').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ExternalError);
      const failure = error as ExternalError;
      expect(failure.exitCode).toBe('external');
      expect(failure.message).toMatch(/^The registration manifest Rancher served for management\.cattle\.io\/v3 Cluster c-[a-z0-9]{5} \("delta"\) \(https:\/\/127\.0\.0\.1:\d+\/…\) is not a Kubernetes manifest; nothing was created in the workload cluster$/);
      expect(failure.details[0]).toMatch(mode === 'garbage' ? /^document 1: expected an object .*got text/ : /^document 6: /);
      expect(failure.hint).toMatch(/server-url/);
      const [cluster] = await v3Of('delta');
      expect(await agentSecret(cluster!.metadata.name)).toBeUndefined();
    }
    double!.serve = 'manifest';
    const result = await register(dir, 'v3');
    expect(result).toMatchObject({ resumed: true, manifest: { created: 1, existing: 4 } });
  });

  it('a register killed while waiting for the manifest URL resumes: same Rancher cluster, one token, Ready', async () => {
    const dir = await installDir('epsilon');
    double!.holdManifestUrl = true;
    let child: ResultPromise | undefined;
    try {
      child = execa(process.execPath, ['--import', 'tsx', path.join(packageRoot, 'src', 'main.ts'), 'register', 'rancher', '--dir', dir, '--kubeconfig', rancherPlane!.kubeconfig, '--output', 'json'], {
        cwd: packageRoot,
        reject: false,
        timeout: 120_000,
      });
      const name = await waitFor('the Rancher cluster and its token', async () => {
        const [cluster] = await v3Of('epsilon');
        if (!cluster) return undefined;
        const tokens = await rancher().list(management, 'ClusterRegistrationToken', { namespace: cluster.metadata.name });
        return tokens.length === 1 ? cluster.metadata.name : undefined;
      }, 90_000);
      child.kill('SIGKILL');
      expect((await child).signal).toBe('SIGKILL');
      expect(await readRancherRecord(dir)).toMatchObject({ step: 'cluster', rancherCluster: name });
      double!.holdManifestUrl = false;
      const result = await register(dir, 'v3');
      expect(result).toMatchObject({ resumed: true, rancherCluster: { name }, manifest: { created: 1 } });
      expect((await v3Of('epsilon')).map((c) => c.metadata.name)).toEqual([name]);
      expect(await rancher().list(management, 'ClusterRegistrationToken', { namespace: name })).toHaveLength(1);
    } finally {
      double!.holdManifestUrl = false;
      child?.kill('SIGKILL');
    }
  });

  it('a cacerts setting that did not sign Rancher\'s certificate stops the download with the certificate error', async () => {
    const dir = await installDir('zeta');
    const other = await (await import('../../src/pki/certificates.js')).createCertificateAuthority({ commonName: 'not-rancher' });
    await rancher().apply({ apiVersion: management, kind: 'Setting', metadata: { name: 'cacerts' }, value: other.certPem } as KubeObject);
    try {
      await expect(register(dir, 'v3')).rejects.toThrow(/^Rancher's certificate at https:\/\/127\.0\.0\.1:\d+\/… could not be verified \([A-Z_]+\)/);
      const [cluster] = await v3Of('zeta');
      expect(await agentSecret(cluster!.metadata.name)).toBeUndefined();
    } finally {
      await rancher().apply({ apiVersion: management, kind: 'Setting', metadata: { name: 'cacerts' }, value: double!.caPem } as KubeObject);
    }
  });

  it('a kubeconfig of a cluster that is not Rancher\'s is refused before anything is created, naming the kinds it lacks', async () => {
    const dir = await installDir('theta');
    const error = await registerRancher({ dir, rancherKubeconfig: downstreamPlane!.kubeconfig, strategy: 'v3', sink: new RecordingSink(), signal: abort.signal, ...fast }).then(
      () => undefined,
      (e: unknown) => e as ExternalError,
    );
    expect(error).toBeInstanceOf(ExternalError);
    expect(error!.message).toBe(`The cluster of ${downstreamPlane!.kubeconfig} does not serve 3 Rancher kind(s): it is not Rancher's local cluster`);
    expect(error!.details).toEqual(['Cluster (management.cattle.io/v3)', 'ClusterRegistrationToken (management.cattle.io/v3)', 'Setting (management.cattle.io/v3)']);
    await expect(readFile(rancherRecordPath(dir))).rejects.toThrow(/ENOENT/);
  });

  it('import --to rancher: an imported cluster labelled with the kube-system UID, Ready; a second import finds the same one', async () => {
    const kubeSystem = await downstream().get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } });
    const request = { kubeconfig: downstreamPlane!.kubeconfig, rancherKubeconfig: rancherPlane!.kubeconfig, strategy: 'v3' as const, name: 'Edge One', sink: new RecordingSink(), signal: abort.signal, ...fast };
    const first = await importToRancher(request);
    expect(first).toMatchObject({ mode: 'import', resumed: false, rancherCluster: { displayName: 'edge-one' } });
    const found = await rancher().list(management, 'Cluster', { labelSelector: `import.provisioner.dev/cluster-id=${kubeSystem!.metadata.uid}` });
    expect(found.map((c) => c.metadata.name)).toEqual([first.rancherCluster.name]);
    expect(Object.keys(found[0]!.metadata.labels ?? {}).filter((k) => k.startsWith('cluster-api.cattle.io/'))).toEqual([]);
    const second = await importToRancher(request);
    expect(second).toMatchObject({ resumed: true, rancherCluster: { name: first.rancherCluster.name } });
  });

  it('with Turtles in Rancher\'s cluster holding the CAPI Cluster: labels it for auto-import and waits for the cluster Turtles made', async () => {
    // Test-only CRDs: Turtles' marker and a schemaless CAPI Cluster, so Rancher's cluster "runs Turtles" and holds the install's Cluster.
    const crd = (group: string, kind: string, version: string) => ({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${kind.toLowerCase()}s.${group}` },
      spec: { group, scope: 'Namespaced', names: { kind, plural: `${kind.toLowerCase()}s` }, versions: [{ name: version, served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }] },
    });
    await installCrds(rancher(), [crd('turtles-capi.cattle.io', 'CAPIProvider', 'v1alpha1'), crd('cluster.x-k8s.io', 'Cluster', 'v1beta2')] as KubeObject[], { signal: abort.signal });
    await rancher().apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'eta' } });
    await rancher().apply({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'eta', namespace: 'eta' }, spec: {} });
    const dir = await installDir('eta');
    await writeFile(path.join(dir, '.provisioner', 'management.json'), JSON.stringify({ kubeconfig: rancherPlane!.kubeconfig }));
    double!.turtles = true;
    try {
      const sink = new RecordingSink();
      const result = await register(dir, 'v3', sink);
      expect(result).toMatchObject({ mode: 'turtles', strategy: 'v3' });
      expect(sink.ofType('stage').filter((s) => s.state === 'succeeded').map((s) => s.stage)).toEqual(['rancher/preflight', 'rancher/label', 'rancher/ready']);
      const capi = await rancher().get({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'eta', namespace: 'eta' } });
      expect(capi!.metadata.labels).toMatchObject({ 'cluster-api.cattle.io/rancher-auto-import': 'true' });
      const [made] = await v3Of('eta');
      expect(made!.metadata.name).toBe(result.rancherCluster.name);
      expect(made!.metadata.labels).toHaveProperty(['cluster-api.cattle.io/owned']);
    } finally {
      double!.turtles = false;
    }
  });
});
