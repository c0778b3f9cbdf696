import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink, utimes, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readArchiveMember, tagOf, writeImageArchive, type ImageSpec } from './oci-image.js';
import {
  corednsImageRef,
  corednsImageTag,
  ensureAgnhostImage,
  ensureNodeImage,
  ensureNodeImages,
  flannelImageRef,
  flannelImageTag,
  nodeImageBinaries,
  nodeImageNames,
  nodeImageRef,
  nodeImageRefs,
  prepareNodeArtifacts,
  type NodeLayer,
} from './node-images.js';
import { sleep } from '../concurrency.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'oci-image-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A fake binary: 300 KiB of bytes derived from `seed` (not a multiple of 512, to exercise padding). */
async function fakeBinary(name: string, seed: string): Promise<string> {
  const chunks: Buffer[] = [];
  for (let i = 0; chunks.length * 32 < 300 * 1024 + 77; i++) chunks.push(createHash('sha256').update(`${seed}${i}`).digest());
  const file = path.join(dir, name);
  await writeFile(file, Buffer.concat(chunks).subarray(0, 300 * 1024 + 77));
  return file;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

function spec(binaryPath: string): ImageSpec {
  return { binaryPath, name: 'kube-proxy', refs: ['provisioner.local/kube-proxy:v1.36.3'], os: 'linux', architecture: 'amd64' };
}

describe('writeImageArchive', () => {
  it('writes the same bytes for the same binary, whatever its mtime, mode or the time of day', async () => {
    const binary = await fakeBinary('kube-proxy', 'a');
    const first = await writeImageArchive(spec(binary), path.join(dir, 'one.tar'));
    await utimes(binary, new Date('2001-02-03T04:05:06Z'), new Date('2001-02-03T04:05:06Z'));
    await chmod(binary, 0o700);
    await sleep(1100); // a second later: no clock in the output
    const second = await writeImageArchive(spec(binary), path.join(dir, 'two.tar'));
    expect(second.sha256).toBe(first.sha256);
    expect(second.manifestDigest).toBe(first.manifestDigest);
    expect(sha256(await readFile(path.join(dir, 'two.tar')))).toBe(first.sha256);
    expect(Buffer.compare(await readFile(path.join(dir, 'one.tar')), await readFile(path.join(dir, 'two.tar')))).toBe(0);

    const other = await writeImageArchive(spec(await fakeBinary('other', 'b')), path.join(dir, 'three.tar'));
    expect(other.sha256).not.toBe(first.sha256);
  });

  it('is an OCI layout whose digests match its blobs, with the binary at /usr/local/bin owned by root at mtime 0', async () => {
    const binary = await fakeBinary('kube-proxy', 'a');
    const archive = path.join(dir, 'image.tar');
    const written = await writeImageArchive(spec(binary), archive);

    const members: { path: string; mode: number; uid: number; gid: number; mtime: number; size: number }[] = [];
    await tar.t({ file: archive, onReadEntry: (e) => members.push({ path: e.path, mode: e.mode ?? -1, uid: e.uid ?? -1, gid: e.gid ?? -1, mtime: e.mtime?.getTime() ?? -1, size: e.size ?? -1 }) });
    expect(members.map((m) => m.path).slice(0, 5)).toEqual(['blobs/', 'blobs/sha256/', 'oci-layout', 'index.json', 'manifest.json']);
    expect(members.every((m) => m.uid === 0 && m.gid === 0 && m.mtime === 0)).toBe(true);

    const layout = JSON.parse((await readArchiveMember(archive, 'oci-layout'))!.toString()) as { imageLayoutVersion: string };
    expect(layout.imageLayoutVersion).toBe('1.0.0');
    const index = JSON.parse((await readArchiveMember(archive, 'index.json'))!.toString()) as {
      manifests: { digest: string; size: number; platform: unknown; annotations: Record<string, string> }[];
    };
    expect(index.manifests).toHaveLength(1);
    const entry = index.manifests[0]!;
    expect(entry.annotations).toEqual({ 'io.containerd.image.name': 'provisioner.local/kube-proxy:v1.36.3', 'org.opencontainers.image.ref.name': 'v1.36.3' });
    expect(entry.platform).toEqual({ architecture: 'amd64', os: 'linux' });
    expect(entry.digest).toBe(written.manifestDigest);

    const blob = async (digest: string) => {
      const content = (await readArchiveMember(archive, `blobs/sha256/${digest.replace('sha256:', '')}`))!;
      expect(`sha256:${sha256(content)}`).toBe(digest);
      return content;
    };
    const manifestBytes = await blob(entry.digest);
    expect(manifestBytes.length).toBe(entry.size);
    const manifest = JSON.parse(manifestBytes.toString()) as { config: { digest: string; size: number }; layers: { digest: string; size: number; mediaType: string }[] };
    const config = JSON.parse((await blob(manifest.config.digest)).toString()) as {
      architecture: string;
      os: string;
      config: { Entrypoint: string[]; Env: string[] };
      rootfs: { diff_ids: string[] };
    };
    expect(config).toMatchObject({ architecture: 'amd64', os: 'linux', config: { Entrypoint: ['/usr/local/bin/kube-proxy'] } });
    expect(config.config.Env[0]).toMatch(/^PATH=.*\/usr\/local\/bin/);
    expect(manifest.layers).toHaveLength(1);
    expect(manifest.layers[0]!.mediaType).toBe('application/vnd.oci.image.layer.v1.tar+gzip');
    const gz = await blob(manifest.layers[0]!.digest);
    expect(gz.length).toBe(manifest.layers[0]!.size);
    expect(gz[9]).toBe(255); // gzip OS byte: the same on every machine
    const layerTar = gunzipSync(gz);
    expect(`sha256:${sha256(layerTar)}`).toBe(config.rootfs.diff_ids[0]);

    // The layer: directories, then the binary, byte for byte, executable, owned by root, mtime 0.
    const layerFile = path.join(dir, 'layer.tar');
    await writeFile(layerFile, layerTar);
    const layerMembers: { path: string; mode: number; uid: number; mtime: number; content?: Buffer }[] = [];
    await tar.t({
      file: layerFile,
      onReadEntry: (e) => {
        const chunks: Buffer[] = [];
        e.on('data', (c: Buffer) => chunks.push(c));
        e.on('end', () => layerMembers.push({ path: e.path, mode: e.mode ?? -1, uid: e.uid ?? -1, mtime: e.mtime?.getTime() ?? -1, content: Buffer.concat(chunks) }));
      },
    });
    expect(layerMembers.map((m) => [m.path, m.mode.toString(8)])).toEqual([
      ['usr/', '755'],
      ['usr/local/', '755'],
      ['usr/local/bin/', '755'],
      ['usr/local/bin/kube-proxy', '755'],
    ]);
    expect(Buffer.compare(layerMembers[3]!.content!, await readFile(binary))).toBe(0);

    const docker = JSON.parse((await readArchiveMember(archive, 'manifest.json'))!.toString()) as { Config: string; RepoTags: string[]; Layers: string[] }[];
    expect(docker).toEqual([
      { Config: `blobs/sha256/${manifest.config.digest.slice(7)}`, RepoTags: ['provisioner.local/kube-proxy:v1.36.3'], Layers: [`blobs/sha256/${manifest.layers[0]!.digest.slice(7)}`] },
    ]);
  });

  it('refuses an image without a ref', async () => {
    const binary = await fakeBinary('kube-proxy', 'a');
    await expect(writeImageArchive({ ...spec(binary), refs: [] }, path.join(dir, 'x.tar'))).rejects.toThrow(/no reference/);
  });
});

/** A small given layer tar (what the userland layer is: an uncompressed tar with a symlink). */
async function fakeUserlandLayer(): Promise<NodeLayer> {
  const tree = path.join(dir, 'base-tree');
  await mkdir(path.join(tree, 'usr/sbin'), { recursive: true });
  await writeFile(path.join(tree, 'usr/sbin/xtables-nft-multi'), 'nft');
  await symlink('xtables-nft-multi', path.join(tree, 'usr/sbin/iptables'));
  const file = path.join(dir, 'base.tar');
  await tar.c({ file, cwd: tree, portable: true, noMtime: true }, ['usr']);
  return { path: file, sha256: sha256(await readFile(file)), description: 'userland: test' };
}

/** Every member of an uncompressed tar, with content. */
async function tarMembers(file: string): Promise<{ path: string; type: string; mode: number; linkpath: string; content: Buffer }[]> {
  const members: { path: string; type: string; mode: number; linkpath: string; content: Buffer }[] = [];
  await tar.t({
    file,
    onReadEntry: (e) => {
      const chunks: Buffer[] = [];
      e.on('data', (c: Buffer) => chunks.push(c));
      e.on('end', () => members.push({ path: e.path, type: e.type, mode: e.mode ?? -1, linkpath: e.linkpath ?? '', content: Buffer.concat(chunks) }));
    },
  });
  return members;
}

describe('writeImageArchive with layers and several files', () => {
  it('puts the binaries at their paths lowest and the given layer above them, in the manifest, diff_ids and history, the same bytes every time', async () => {
    const userland = await fakeUserlandLayer();
    const flanneld = await fakeBinary('flanneld', 'f');
    const cni = await fakeBinary('flannel', 'c');
    const flannelSpec: ImageSpec = {
      name: 'flannel',
      files: [{ sourcePath: flanneld, path: '/opt/bin/flanneld' }, { sourcePath: cni, path: '/flannel' }],
      upperLayers: [{ tarPath: userland.path, sha256: userland.sha256, description: userland.description }],
      refs: ['provisioner.local/flannel:v0.28.10'],
      os: 'linux',
      architecture: 'amd64',
    };
    const archive = path.join(dir, 'flannel.tar');
    const written = await writeImageArchive(flannelSpec, archive);
    const again = await writeImageArchive(flannelSpec, path.join(dir, 'flannel-again.tar'));
    expect(again.sha256).toBe(written.sha256);
    expect(Buffer.compare(await readFile(archive), await readFile(path.join(dir, 'flannel-again.tar')))).toBe(0);

    const index = JSON.parse((await readArchiveMember(archive, 'index.json'))!.toString()) as { manifests: { digest: string }[] };
    const blob = async (digest: string) => (await readArchiveMember(archive, `blobs/sha256/${digest.replace('sha256:', '')}`))!;
    const manifest = JSON.parse((await blob(index.manifests[0]!.digest)).toString()) as { config: { digest: string }; layers: { digest: string; size: number }[] };
    const config = JSON.parse((await blob(manifest.config.digest)).toString()) as {
      config: { Entrypoint: string[]; Env: string[] };
      rootfs: { diff_ids: string[] };
      history: { created_by: string }[];
    };
    expect(manifest.layers).toHaveLength(2);
    const layerTars = await Promise.all(manifest.layers.map(async (l) => gunzipSync(await blob(l.digest))));
    // diff_ids in layer order: the binary layer, then the given tar as it is (its sha256 is the diff_id).
    expect(config.rootfs.diff_ids).toEqual([`sha256:${sha256(layerTars[0]!)}`, `sha256:${userland.sha256}`]);
    expect(Buffer.compare(layerTars[1]!, await readFile(userland.path))).toBe(0);
    expect(config.config.Entrypoint).toEqual(['/opt/bin/flanneld']);
    expect(config.config.Env[0]).toMatch(/^PATH=.*\/usr\/sbin/);
    expect(config.history.map((h) => h.created_by)).toEqual(['provisioner: /opt/bin/flanneld /flannel', 'provisioner: userland: test']);
    const docker = JSON.parse((await readArchiveMember(archive, 'manifest.json'))!.toString()) as { Layers: string[] }[];
    expect(docker[0]!.Layers).toEqual(manifest.layers.map((l) => `blobs/sha256/${l.digest.slice(7)}`));

    const binaryLayer = path.join(dir, 'binary-layer.tar');
    await writeFile(binaryLayer, layerTars[0]!);
    const members = await tarMembers(binaryLayer);
    expect(members.map((m) => [m.path, m.mode.toString(8)])).toEqual([
      ['flannel', '755'],
      ['opt/', '755'],
      ['opt/bin/', '755'],
      ['opt/bin/flanneld', '755'],
    ]);
    expect(Buffer.compare(members[0]!.content, await readFile(cni))).toBe(0);
    expect(Buffer.compare(members[3]!.content, await readFile(flanneld))).toBe(0);
  });

  it('refuses a given layer whose content is not the sha256 given', async () => {
    const userland = await fakeUserlandLayer();
    const binary = await fakeBinary('kube-proxy', 'a');
    await expect(
      writeImageArchive({ ...spec(binary), upperLayers: [{ tarPath: userland.path, sha256: '0'.repeat(64), description: 'x' }] }, path.join(dir, 'x.tar')),
    ).rejects.toThrow(/expected 0{64}/);
  });
});

describe('node images', () => {
  it('builds kube-proxy and flannel with the userland layer above their binaries, coredns and agnhost at the root with their binary as Entrypoint', async () => {
    const userland = await fakeUserlandLayer();
    const options = { cacheDir: path.join(dir, 'cache'), architecture: 'amd64' as const };
    const binaries = Object.fromEntries(
      await Promise.all(['kube', 'coredns', 'flanneld', 'flannel'].map(async (n) => [n, { path: await fakeBinary(n, n), version: n === 'kube' ? 'v1.36.3' : n === 'coredns' ? 'v1.14.2' : 'v0.28.10' }] as const)),
    );
    const images = await ensureNodeImages(binaries, { ...options, userland });
    expect(images.map((i) => [i.name, i.ref])).toEqual([
      ['kube-apiserver', 'provisioner.local/kube-apiserver:v1.36.3'],
      ['kube-controller-manager', 'provisioner.local/kube-controller-manager:v1.36.3'],
      ['kube-scheduler', 'provisioner.local/kube-scheduler:v1.36.3'],
      ['kube-proxy', 'provisioner.local/kube-proxy:v1.36.3'],
      ['coredns', corednsImageRef],
      ['flannel', flannelImageRef],
    ]);
    const byName = (name: string) => images.find((i) => i.name === name)!;
    expect(await configOf(byName('kube-proxy').file, byName('kube-proxy').manifestDigest)).toMatchObject({ layers: 2, entrypoint: ['/usr/local/bin/kube-proxy'] });
    expect(await configOf(byName('coredns').file)).toMatchObject({ layers: 1, entrypoint: ['/coredns'] });
    expect(await configOf(byName('flannel').file)).toMatchObject({ layers: 2, entrypoint: ['/opt/bin/flanneld'] });
    // Without the layer, the images that need it are left out.
    expect((await ensureNodeImages(binaries, options)).map((i) => i.name)).toEqual(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'coredns']);

    const agnhost = await ensureAgnhostImage({ path: await fakeBinary('agnhost', 'g'), version: 'v1.36.3' }, options);
    expect(agnhost.ref).toBe('provisioner.local/agnhost:v1.36.3');
    expect(await configOf(agnhost.file)).toMatchObject({ layers: 1, entrypoint: ['/agnhost'] });
    expect(nodeImageNames).not.toContain('agnhost');
    expect(nodeImageBinaries('flannel')).toEqual(['flanneld', 'flannel']);
  });

  it('writes the four Kubernetes images into kubernetes.tar over one kube layer, stored once, each run by its own name', async () => {
    const userland = await fakeUserlandLayer();
    const options = { cacheDir: path.join(dir, 'cache'), architecture: 'amd64' as const, userland };
    const kube = { path: await fakeBinary('kube', 'K'), version: 'v1.36.3' };
    const images = await ensureNodeImages({ kube }, options);
    expect(images.map((i) => [i.name, i.archive, i.cached])).toEqual([
      ['kube-apiserver', 'kubernetes', false],
      ['kube-controller-manager', 'kubernetes', false],
      ['kube-scheduler', 'kubernetes', false],
      ['kube-proxy', 'kubernetes', false],
    ]);
    expect(new Set(images.map((i) => i.file)).size).toBe(1);
    expect(path.basename(images[0]!.file)).toBe('kubernetes.tar');
    const archive = images[0]!.file;
    const layersOf = await Promise.all(images.map((i) => configOf(archive, i.manifestDigest)));
    expect(layersOf.map((c) => c.entrypoint)).toEqual(images.map((i) => [`/usr/local/bin/${i.name}`]));
    // The kube layer is the lowest layer of all four (kube-proxy has userland above it), so a
    // host's containerd unpacks it once for all four: one chain, one snapshot.
    const lowest = new Set(layersOf.map((c) => c.layerDigests[0]));
    expect(lowest.size).toBe(1);
    expect(layersOf.map((c) => c.layerDigests.length)).toEqual([1, 1, 1, 2]);
    const kubeLayer = [...lowest][0]!;
    const layerTar = path.join(dir, 'kube-layer.tar');
    await writeFile(layerTar, gunzipSync((await readArchiveMember(archive, `blobs/sha256/${kubeLayer.slice(7)}`))!));
    expect((await tarMembers(layerTar)).map((m) => (m.type === 'SymbolicLink' ? `${m.path} -> ${m.linkpath}` : m.path))).toEqual([
      'usr/', 'usr/local/', 'usr/local/bin/', 'usr/local/bin/kube', 'usr/local/bin/kube-apiserver -> kube', 'usr/local/bin/kube-controller-manager -> kube', 'usr/local/bin/kube-proxy -> kube', 'usr/local/bin/kube-scheduler -> kube',
    ]);
    // The archive holds kube once: its size is one kube layer, the userland layer and small JSON, not four kubes.
    const kubeLayerSize = (await readArchiveMember(archive, `blobs/sha256/${kubeLayer.slice(7)}`))!.length;
    const userlandLayerSize = gzipSync(await readFile(userland.path), { level: 6 }).length;
    expect(images[0]!.size).toBeLessThan(kubeLayerSize + userlandLayerSize + 64 * 1024);
    // Every ref is in the index; again, the whole archive comes from the cache.
    const index = JSON.parse((await readArchiveMember(archive, 'index.json'))!.toString()) as { manifests: { annotations: Record<string, string> }[] };
    expect(index.manifests.map((m) => m.annotations['io.containerd.image.name'])).toEqual(images.flatMap((i) => i.refs));
    const again = await ensureNodeImages({ kube }, options);
    expect(again.map((i) => [i.cached, i.sha256, i.manifestDigest])).toEqual(images.map((i) => [true, i.sha256, i.manifestDigest]));
    // Served as one file with every ref of its images.
    const artifacts = await prepareNodeArtifacts(path.join(dir, 'artifacts-kube'), {}, images);
    expect(artifacts).toEqual([{ path: 'node/images/kubernetes.tar', sha256: images[0]!.sha256, size: images[0]!.size, refs: images.flatMap((i) => i.refs) }]);
  });

  it('names the CoreDNS and flannel versions the wrappers pin', async () => {
    const goMod = (wrapper: string) => readFile(path.join(import.meta.dirname, '../../embedded/modules', wrapper, 'go.mod'), 'utf8');
    const requires = (text: string, module: string) => text.split('\n').some((line) => line.trim() === `require ${module}` || line.trim() === module);
    expect(requires(await goMod('coredns'), `github.com/coredns/coredns ${corednsImageTag}`)).toBe(true);
    expect(requires(await goMod('flannel'), `github.com/flannel-io/flannel ${flannelImageTag}`)).toBe(true);
    expect(nodeImageRef('coredns', 'v1.14.2')).toBe('provisioner.local/coredns:v1.14.2');
  });

  it('tags Kubernetes images with the version, etcd in kubeadm’s form, and reads tags back', () => {
    expect(nodeImageRef('kube-apiserver', 'v1.36.3')).toBe('provisioner.local/kube-apiserver:v1.36.3');
    expect(nodeImageRef('etcd', 'v3.6.8')).toBe('provisioner.local/etcd:3.6.8-0');
    expect(nodeImageRefs('kube-proxy', 'v1.36.3')).toEqual(['provisioner.local/kube-proxy:v1.36.3']);
    expect(nodeImageRefs('pause', 'v0.1.0')).toEqual(['provisioner.local/pause:v0.1.0', 'provisioner.local/pause:3.10.2']);
    expect(nodeImageRef('pause', 'v0.1.0')).toBe('provisioner.local/pause:v0.1.0');
    expect(tagOf('provisioner.local:5000/etcd:3.6.6-0')).toBe('3.6.6-0');
    expect(tagOf('provisioner.local:5000/etcd')).toBe('latest');
  });

  it('caches an archive by the binary’s digest and places artifacts with their digests', async () => {
    const binary = await fakeBinary('pause-bin', 'p');
    const options = { cacheDir: path.join(dir, 'cache'), architecture: 'amd64' as const };
    const first = await ensureNodeImage('pause', { path: binary, version: 'v0.1.0' }, options);
    expect(first.cached).toBe(false);
    const again = await ensureNodeImage('pause', { path: binary, version: 'v0.1.0' }, options);
    expect(again).toMatchObject({ cached: true, sha256: first.sha256, file: first.file, ref: 'provisioner.local/pause:v0.1.0', refs: ['provisioner.local/pause:v0.1.0', 'provisioner.local/pause:3.10.2'] });
    const changed = await ensureNodeImage('pause', { path: await fakeBinary('pause-2', 'q'), version: 'v0.1.0' }, options);
    expect(changed.cached).toBe(false);
    expect(changed.file).not.toBe(first.file);

    const kubelet = await fakeBinary('kubelet', 'k');
    const artifacts = await prepareNodeArtifacts(path.join(dir, 'artifacts'), { kubelet: { path: kubelet, version: 'v1.36.3' } }, [first]);
    expect(artifacts).toEqual([
      { path: 'node/bin/kubelet', sha256: sha256(await readFile(kubelet)), size: 300 * 1024 + 77 },
      { path: 'node/images/pause.tar', sha256: first.sha256, size: first.size, ref: 'provisioner.local/pause:v0.1.0', refs: first.refs },
    ]);
    expect(sha256(await readFile(path.join(dir, 'artifacts/node/images/pause.tar')))).toBe(first.sha256);
  });
});

/** An image's layer count, Entrypoint and layer digests: the first manifest of the index, or the one with `manifestDigest`. */
async function configOf(archive: string, manifestDigest?: string) {
  const index = JSON.parse((await readArchiveMember(archive, 'index.json'))!.toString()) as { manifests: { digest: string }[] };
  const digest = manifestDigest ?? index.manifests[0]!.digest;
  const manifest = JSON.parse((await readArchiveMember(archive, `blobs/sha256/${digest.slice(7)}`))!.toString()) as { config: { digest: string }; layers: { digest: string }[] };
  const config = JSON.parse((await readArchiveMember(archive, `blobs/sha256/${manifest.config.digest.slice(7)}`))!.toString()) as { config: { Entrypoint: string[] } };
  return { layers: manifest.layers.length, entrypoint: config.config.Entrypoint, layerDigests: manifest.layers.map((l) => l.digest) };
}

