import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, utimes, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readArchiveMember, tagOf, writeImageArchive, type ImageSpec } from './oci-image.js';
import { ensureNodeImage, nodeImageRef, nodeImageRefs, prepareNodeArtifacts } from './node-images.js';
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

describe('node images', () => {
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
