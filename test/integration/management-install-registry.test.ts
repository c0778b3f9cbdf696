/**
 * `management install --image-registry` against a REAL registry: the bundled CNCF distribution
 * registry (test-only `registry`, v3.0.0) on 127.0.0.1, and a real API server booted from the
 * bundle (etcd and kube-apiserver of a local control plane serving every API group, no
 * controllers, standing in for the cluster). The install pushes the provider images, applies the
 * objects and then waits for the Deployments to become Available, which they cannot here (the
 * stand-in has no nodes and no controller manager): with a no-progress timeout of a few seconds
 * it fails there, naming them, after everything this file checks is done. Read back through the
 * registry's own API: the tags, the manifest's digest (the one the Deployments pin and the
 * archive holds), every blob; the Deployments name the registry. A second install uploads no
 * blob (the registry's access log shows no upload). A registry that requires credentials
 * answers 401, and the install fails naming it and --image-registry-auth-file; with the file,
 * the same push goes through. `--dry-run` prints the pushes (with a hosts install directory, its
 * in-cluster artifacts' image too) and sends the registry nothing.
 * Fails (never skips) when the bundle has not been built: run `npm run setup` first.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withFlagNames } from '../../src/cli/request-fields.js';
import { validateInstallConfigText } from '../../src/config/index.js';
import { installConfigSchema } from '../../src/platforms/registry.js';
import { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { ensureBinaries, resolveCacheDir } from '../../src/embedded/cache.js';
import { loadBinaryCatalog } from '../../src/embedded/catalog.js';
import { ExternalError, InfrastructureError } from '../../src/errors.js';
import { RegistryClient } from '../../src/imageregistry/client.js';
import { pushArchiveImage } from '../../src/imageregistry/push.js';
import { parseImageRegistry } from '../../src/imageregistry/reference.js';
import type { KubeObject } from '../../src/kube/client.js';
import { ensureProviderImage, type ProviderImage } from '../../src/management/images.js';
import { describePlan, installManagement } from '../../src/management/install.js';
import { RecordingSink } from '../support/recording-sink.js';
import { removeInstallDir, tempInstallDir } from './support/controlplane.js';
import { startOciRegistry, type OciRegistry } from './support/oci-registry.js';

const hostsConfig = validateInstallConfigText(
  `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: pushed
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
platform:
  hosts: {}
bootstrap:
  listenAddress: 198.19.0.1
`,
  { schema: installConfigSchema },
).config;

const deployments = [
  'capi-system/capi-controller-manager',
  'capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager',
  'capi-kubeadm-control-plane-system/capi-kubeadm-control-plane-controller-manager',
  'provisioner-agent-system/provisioner-agent-controller-manager',
];
/** Long enough for the apply, short enough that the wait for Deployments that cannot become Available ends soon. */
const noProgressTimeoutMs = 8_000;

/** capi-manager's image archive as the install builds it (from the cache the install filled). */
async function capiArchive(): Promise<{ capi: { version: string }; archive: ProviderImage }> {
  const catalog = await loadBinaryCatalog({});
  const capi = catalog.binary('capi-manager');
  const { 'capi-manager': capiPath } = await ensureBinaries(['capi-manager'], { catalog });
  const archive = await ensureProviderImage({ name: 'capi-manager', path: capiPath!, version: capi.version, ...('sha256' in capi ? { sha256: capi.sha256 } : {}) }, { cacheDir: resolveCacheDir({}), architecture: process.arch === 'arm64' ? 'arm64' : 'amd64' });
  return { capi, archive };
}

interface DeploymentView extends KubeObject {
  spec: { template: { spec: { containers: { image: string }[] } } };
}

describe('management install --image-registry against the distribution registry', () => {
  let cluster: LocalControlPlane;
  let clusterDir: string;
  let scratch: string;
  let registry: OciRegistry;
  let locked: OciRegistry;
  const abort = new AbortController();

  beforeAll(async () => {
    clusterDir = await tempInstallDir('registry-cluster');
    scratch = await tempInstallDir('registry');
    registry = await startOciRegistry(path.join(scratch, 'open'));
    locked = await startOciRegistry(path.join(scratch, 'locked'), { htpasswd: true });
    // etcd and kube-apiserver only, serving every API group (a local control plane serves only a management cluster's, without apps/v1).
    const binaries = await ensureBinaries(['etcd', 'kube-apiserver']);
    cluster = new LocalControlPlane({
      dir: clusterDir, etcdBinary: binaries.etcd!, apiServerBinary: binaries['kube-apiserver']!, providers: [], detached: false,
      argOverrides: { 'kube-apiserver': { 'runtime-config': 'api/all=true' } }, events: new RecordingSink(), signal: abort.signal,
    });
    await cluster.start();
  }, 600_000);

  afterAll(async () => {
    await cluster?.stop();
    abort.abort();
    await registry?.stop();
    await locked?.stop();
    for (const d of [clusterDir, scratch]) if (d) await removeInstallDir(d);
  });

  /** One install into the stand-in: it pushes and applies, then fails waiting for the Deployments (no nodes), naming them. */
  async function install(sink: RecordingSink, imageRegistry: string, extra: { imageRegistryAuthFile?: string } = {}): Promise<unknown> {
    return installManagement({ kubeconfig: cluster.kubeconfig, imageRegistry, ...extra, sink, signal: abort.signal, noProgressTimeoutMs }).then(
      () => new Error('the install finished, though no Deployment can become Available without nodes'),
      (error: unknown) => error,
    );
  }

  async function registryGet(pathname: string, accept?: string): Promise<Response> {
    return fetch(`http://${registry.host}${pathname}`, accept ? { headers: { accept } } : {});
  }

  it('--dry-run prints the pushes it would make and sends the registry nothing', async () => {
    const before = registry.log().length;
    const result = await installManagement({ kubeconfig: cluster.kubeconfig, imageRegistry: `${registry.host}/provisioner`, dryRun: true, sink: new RecordingSink(), signal: abort.signal });
    const version = (await loadBinaryCatalog({})).binary('capi-manager').version;
    expect(describePlan(result).split('\n')).toContain(`push provisioner.local/capi-manager:${version} to ${registry.host}/provisioner/capi-manager:${version}`);
    expect(result.providers.map((p) => p.image)).toEqual(deployments.map(() => `${registry.host}/provisioner/capi-manager:${version}`));
    expect(registry.log().slice(before)).not.toMatch(/"(GET|HEAD|POST|PUT) \/v2\//);

    // With a hosts install directory, the image of its in-cluster artifacts (provisioner-forwarder) is pushed too, not loaded.
    const dir = await tempInstallDir('registry-dry-run');
    try {
      const withDir = await installManagement({ kubeconfig: cluster.kubeconfig, dir, config: hostsConfig, imageRegistry: `${registry.host}/provisioner`, dryRun: true, sink: new RecordingSink(), signal: abort.signal });
      const forwarder = (await loadBinaryCatalog({})).binary('provisioner-forwarder').version;
      expect(describePlan(withDir).split('\n')).toContain(`push provisioner.local/provisioner-forwarder:${forwarder} to ${registry.host}/provisioner/provisioner-forwarder:${forwarder}`);
      expect(withDir.images.every((i) => i.pushedAs?.startsWith(`${registry.host}/provisioner/`) && !i.loaded)).toBe(true);
    } finally {
      await removeInstallDir(dir);
    }
    expect(registry.log().slice(before)).not.toMatch(/"(GET|HEAD|POST|PUT) \/v2\//);
  }, 300_000);

  it('pushes every image, names it by digest in the Deployments, and the registry serves what was pushed; a second run uploads nothing', async () => {
    const started = performance.now();
    const sink = new RecordingSink();
    const error = await install(sink, `${registry.host}/provisioner`);
    expect(error, String(error)).toBeInstanceOf(InfrastructureError);
    expect((error as Error).message).toContain('capi-system/capi-controller-manager');
    const firstRunMs = performance.now() - started;

    const { capi, archive } = await capiArchive();

    // The Deployments name the registry, pinned by the archive's manifest digest.
    const expected = `${registry.host}/provisioner/capi-manager:${capi.version}@${archive.manifestDigest}`;
    for (const ref of deployments) {
      const [namespace, name] = ref.split('/') as [string, string];
      const found = await cluster.kube.get<DeploymentView>({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { namespace, name } });
      expect(found?.spec.template.spec.containers[0]?.image, ref).toBe(expected);
    }

    // Read back through the registry's API.
    const tags = (await (await registryGet('/v2/provisioner/capi-manager/tags/list')).json()) as { name: string; tags: string[] };
    expect(tags).toEqual({ name: 'provisioner/capi-manager', tags: [capi.version] });
    const manifestAnswer = await registryGet(`/v2/provisioner/capi-manager/manifests/${capi.version}`, 'application/vnd.oci.image.manifest.v1+json');
    expect(manifestAnswer.status).toBe(200);
    expect(manifestAnswer.headers.get('docker-content-digest')).toBe(archive.manifestDigest);
    const manifestBytes = Buffer.from(await manifestAnswer.arrayBuffer());
    expect(`sha256:${createHash('sha256').update(manifestBytes).digest('hex')}`).toBe(archive.manifestDigest);
    const manifest = JSON.parse(manifestBytes.toString('utf8')) as { config: { digest: string; size: number }; layers: { digest: string; size: number }[] };
    expect(manifest.layers.length).toBeGreaterThan(0);
    for (const blob of [manifest.config, ...manifest.layers]) {
      const head = await fetch(`http://${registry.host}/v2/provisioner/capi-manager/blobs/${blob.digest}`, { method: 'HEAD' });
      expect(head.status, blob.digest).toBe(200);
      expect(Number(head.headers.get('content-length')), blob.digest).toBe(blob.size);
    }
    const layer = manifest.layers.at(-1)!;
    const layerBytes = Buffer.from(await (await registryGet(`/v2/provisioner/capi-manager/blobs/${layer.digest}`)).arrayBuffer());
    expect(`sha256:${createHash('sha256').update(layerBytes).digest('hex')}`).toBe(layer.digest);
    const uploadsAfterFirst = (registry.log().match(/"POST \/v2\/[^ ]+\/blobs\/uploads\/ HTTP/g) ?? []).length;
    expect(uploadsAfterFirst).toBeGreaterThanOrEqual(2);
    const pushedFirst = sink.ofType('log').map((e) => e.message).filter((m) => m.startsWith('Pushed '));
    expect(pushedFirst.join('\n')).toMatch(/blob\(s\) uploaded/);

    // A second run: every HEAD finds its blob, nothing is uploaded, the Deployments stay as they are.
    const again = new RecordingSink();
    const secondStarted = performance.now();
    const second = await install(again, `${registry.host}/provisioner`);
    expect(second).toBeInstanceOf(InfrastructureError);
    const pushedSecond = again.ofType('log').map((e) => e.message).filter((m) => m.startsWith('Pushed '));
    expect(pushedSecond.length).toBeGreaterThan(0);
    for (const line of pushedSecond) expect(line).toMatch(/: 0 blob\(s\) uploaded \(0 bytes\), \d+ already there$/);
    expect((registry.log().match(/"POST \/v2\/[^ ]+\/blobs\/uploads\/ HTTP/g) ?? []).length).toBe(uploadsAfterFirst);
    const secondRunMs = performance.now() - secondStarted;

    // The push alone, into a repository that has nothing yet: every blob uploaded.
    const client = await RegistryClient.open({ target: parseImageRegistry(registry.host) });
    try {
      const pushStarted = performance.now();
      const alone = await pushArchiveImage(client, archive.file, { sourceRef: archive.ref, repository: 'timing/capi-manager', tag: capi.version });
      const pushMs = performance.now() - pushStarted;
      expect(alone.digest).toBe(archive.manifestDigest);
      expect(alone.blobs.every((b) => b.uploaded)).toBe(true);
      const bytes = alone.blobs.reduce((n, b) => n + b.size, 0);
      process.stderr.write(`management-install-registry: first install ${Math.round(firstRunMs / 1000)} s, second ${Math.round(secondRunMs / 1000)} s (each with its ${noProgressTimeoutMs / 1000} s wait for Deployments that cannot become Available); capi-manager pushed alone to an empty repository: ${(bytes / 1048576).toFixed(1)} MiB in ${(pushMs / 1000).toFixed(1)} s\n`);
    } finally {
      client.close();
    }
  }, 600_000);

  it('fails on a registry that asks for credentials, naming it and --image-registry-auth-file; with the file the push goes through', async () => {
    const error = withFlagNames(await install(new RecordingSink(), `${locked.host}/provisioner`));
    expect(error).toBeInstanceOf(ExternalError);
    expect((error as ExternalError).message).toBe(`Registry ${locked.host} asks for credentials (401) for the API check (GET /v2/), and none were given`);
    expect((error as ExternalError).hint).toContain('--image-registry-auth-file');
    expect((error as ExternalError).hint).toContain(`auths entry for ${locked.host}`);

    const authFile = path.join(scratch, 'config.json');
    const { username, password } = locked.credentials!;
    await writeFile(authFile, JSON.stringify({ auths: { [locked.host]: { auth: Buffer.from(`${username}:${password}`).toString('base64') } } }), { mode: 0o600 });
    const sink = new RecordingSink();
    const withFile = await install(sink, `${locked.host}/provisioner`, { imageRegistryAuthFile: authFile });
    expect(withFile, String(withFile)).toBeInstanceOf(InfrastructureError); // pushed and applied, then the wait for nodes that do not exist
    expect(sink.ofType('log').map((e) => e.message).join('\n')).toContain(`Pushed ${locked.host}/provisioner/capi-manager:`);
    expect(JSON.stringify(sink.events)).not.toContain(password);

    // The push module alone with the wrong password: refused, the password named nowhere.
    const client = await RegistryClient.open({ target: parseImageRegistry(`${locked.host}/provisioner`), credentials: { username, password: 'not-the-password' } });
    try {
      const { capi, archive } = await capiArchive();
      const refused = await pushArchiveImage(client, archive.file, { sourceRef: archive.ref, repository: 'provisioner/capi-manager', tag: capi.version }).catch((e: unknown) => e);
      expect((refused as Error).message).toMatch(new RegExp(`^Registry ${locked.host.replaceAll('.', '\\.')} \\(repository provisioner/capi-manager\\) refused the credentials \\(401\\)`));
      expect(JSON.stringify(refused)).not.toContain('not-the-password');
    } finally {
      client.close();
    }
  }, 600_000);
});
