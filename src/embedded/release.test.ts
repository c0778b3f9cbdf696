import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { ensureBinaries, inspectCache } from './cache.js';
import { BundleCatalog, loadBinaryCatalog } from './catalog.js';
import { platformPackageName, type BundleManifest, type PlatformBinary, type ReleaseManifest } from './manifest.js';
import { MissingPlatformPackageError, ReleaseCatalog, releaseManifestProblems } from './release.js';

const platform = 'linux-x64';
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

interface FakeInstall {
  root: string;
  cacheDir: string;
  content: Record<string, Buffer>;
}

/**
 * An installed `provisioner` as npm lays it out: `<root>/node_modules/provisioner` with
 * release/manifest.json, and its platform packages hoisted beside it. `etcd` ships as
 * `release:pack` ships every binary, brotli-compressed; `kube-apiserver` gzipped.
 */
async function fakeInstall(base: string, options: { installed?: string[]; version?: string; installedVersion?: string } = {}): Promise<FakeInstall> {
  const version = options.version ?? '1.2.3';
  const root = path.join(base, 'node_modules', 'provisioner');
  await mkdir(path.join(root, 'release', 'components'), { recursive: true });
  await writeFile(path.join(root, 'package.json'), JSON.stringify({ name: 'provisioner', version }));
  const content: Record<string, Buffer> = { etcd: randomBytes(48 << 10), 'kube-apiserver': randomBytes(96 << 10) };
  const shipped: Record<string, Pick<PlatformBinary, 'format'> & { suffix: string; pack: (data: Buffer) => Buffer }> = {
    etcd: { format: 'brotli', suffix: '.br', pack: (data) => brotliCompressSync(data) },
    'kube-apiserver': { format: 'gzip', suffix: '.gz', pack: gzipSync },
  };
  const manifest: ReleaseManifest = { schemaVersion: 1, version, goVersion: 'go version go1.26.8 linux/amd64', createdAt: new Date().toISOString(), binaries: [], components: [] };
  for (const [name, data] of Object.entries(content)) {
    const pkg = platformPackageName(name, platform);
    const { format, suffix, pack } = shipped[name]!;
    const file = `bin/${name}${suffix}`;
    const bytes = pack(data);
    const build: PlatformBinary = { package: pkg, file, format, sha256: sha256(data), size: data.length, fileSize: bytes.length };
    manifest.binaries.push({ name, version: 'v1.0.0', module: 'example.com/m', moduleVersion: 'v1.0.0', package: `example.com/m/${name}`, platforms: { [platform]: build } });
    if (!(options.installed ?? Object.keys(content)).includes(name)) continue;
    const dir = path.join(base, 'node_modules', pkg);
    await mkdir(path.join(dir, 'bin'), { recursive: true });
    await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: pkg, version: options.installedVersion ?? version, os: ['linux'], cpu: ['x64'] }));
    await writeFile(path.join(dir, file), bytes, { mode: 0o755 });
  }
  await writeFile(path.join(root, 'release', 'manifest.json'), JSON.stringify(manifest));
  return { root, cacheDir: path.join(base, 'cache'), content };
}

describe('installed platform packages', () => {
  let base: string;
  const env = {};
  beforeEach(async () => {
    base = await mkdtemp(path.join(os.tmpdir(), 'release-'));
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('extracts a brotli or gzipped binary into the cache as an executable, checked against its sha256, once', async () => {
    const install = await fakeInstall(base);
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform });
    expect(catalog).toBeInstanceOf(ReleaseCatalog);
    const paths = await ensureBinaries(['etcd', 'kube-apiserver'], { catalog, cacheDir: install.cacheDir, env });
    for (const name of ['etcd', 'kube-apiserver']) {
      expect(paths[name]).toBe(path.join(install.cacheDir, 'bin', sha256(install.content[name]!), name));
      expect(await readFile(paths[name]!)).toEqual(install.content[name]);
      expect((await stat(paths[name]!)).mode & 0o111).not.toBe(0);
    }
    // Recorded at extraction, so the next start uses the same file without extracting again.
    const inode = (await stat(paths.etcd!)).ino;
    expect((await ensureBinaries(['etcd'], { catalog, cacheDir: install.cacheDir, env })).etcd).toBe(paths.etcd);
    expect((await stat(paths.etcd!)).ino).toBe(inode);
    const statuses = await inspectCache(catalog, { cacheDir: install.cacheDir, env, verify: true });
    expect(statuses.map((s) => [s.name, s.state, s.verified])).toEqual([
      ['etcd', 'ready', true],
      ['kube-apiserver', 'ready', true],
    ]);
  });

  it('resolves a link of a multi-call binary to its package, and runs it through a link of that name in the cache', async () => {
    const install = await fakeInstall(base);
    const manifestFile = path.join(install.root, 'release', 'manifest.json');
    const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as ReleaseManifest;
    manifest.binaries.find((b) => b.name === 'kube-apiserver')!.links = ['kubelet'];
    await writeFile(manifestFile, JSON.stringify(manifest));
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform });
    const paths = await ensureBinaries(['kubelet'], { catalog, cacheDir: install.cacheDir, env });
    expect(path.basename(paths.kubelet!)).toBe('kubelet');
    expect(await readFile(paths.kubelet!)).toEqual(install.content['kube-apiserver']);
    expect(releaseManifestProblems({ ...manifest, binaries: [{ ...manifest.binaries[0]!, links: ['a/b'] }] })).toEqual(['binaries[0].links: must be an array of plain file names when present']);
  });

  it('refuses an installed binary whose content differs from the release manifest, and keeps nothing', async () => {
    const install = await fakeInstall(base);
    const file = path.join(base, 'node_modules', '@provisioner', 'etcd-linux-x64', 'bin', 'etcd.br');
    // A well-formed stream of other content, its size in the manifest, so that only the sha256 check can catch it.
    const other = brotliCompressSync(Buffer.from(install.content.etcd!).reverse());
    const manifestFile = path.join(install.root, 'release', 'manifest.json');
    const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as ReleaseManifest;
    manifest.binaries.find((b) => b.name === 'etcd')!.platforms[platform]!.fileSize = other.length;
    await writeFile(manifestFile, JSON.stringify(manifest));
    await writeFile(file, other);
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform });
    const error = await ensureBinaries(['etcd'], { catalog, cacheDir: install.cacheDir, env }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toBe('Extracted etcd does not match its manifest');
    expect((error as EnvironmentError).hint).toContain('@provisioner/etcd-linux-x64');
    const statuses = await inspectCache(catalog, { cacheDir: install.cacheDir, env });
    expect(statuses.find((s) => s.name === 'etcd')?.state).toBe('absent');
  });

  it('refuses a damaged brotli archive, naming the archive and the package to reinstall, and keeps nothing', async () => {
    const install = await fakeInstall(base);
    const file = path.join(base, 'node_modules', '@provisioner', 'etcd-linux-x64', 'bin', 'etcd.br');
    const archive = await readFile(file);
    await writeFile(file, Buffer.concat([archive.subarray(0, 16), Buffer.alloc(archive.length - 16, 0xff)]));
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform });
    const error = await ensureBinaries(['etcd'], { catalog, cacheDir: install.cacheDir, env }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toBe(`The archive of etcd is not a valid brotli stream: ${file}`);
    expect((error as EnvironmentError).hint).toContain('@provisioner/etcd-linux-x64');
    const statuses = await inspectCache(catalog, { cacheDir: install.cacheDir, env });
    expect(statuses.find((s) => s.name === 'etcd')?.state).toBe('absent');
  });

  it('names the missing platform package, the platform and the fix (exit 4)', async () => {
    const install = await fakeInstall(base, { installed: ['etcd'] });
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform });
    const error = await ensureBinaries(['etcd', 'kube-apiserver'], { catalog, cacheDir: install.cacheDir, env }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MissingPlatformPackageError);
    const missing = error as MissingPlatformPackageError;
    expect(missing.exitCode).toBe('environment');
    expect(missing.packageName).toBe('@provisioner/kube-apiserver-linux-x64');
    expect(missing.message).toContain('@provisioner/kube-apiserver-linux-x64');
    expect(missing.message).toContain('linux-x64');
    const details = missing.details.join('\n');
    expect(details).toContain('--omit=optional');
    expect(details).toContain('npm/cli#4828');
    expect(details).toContain('npm install @provisioner/kube-apiserver-linux-x64@1.2.3');
    const statuses = await inspectCache(catalog, { cacheDir: install.cacheDir, env });
    expect(statuses.find((s) => s.name === 'kube-apiserver')).toMatchObject({ state: 'absent' });
  });

  it('refuses a platform package of another version', async () => {
    const install = await fakeInstall(base, { installedVersion: '1.2.2' });
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform });
    await expect(ensureBinaries(['etcd'], { catalog, cacheDir: install.cacheDir, env })).rejects.toThrow(/is version 1\.2\.2; provisioner 1\.2\.3 needs exactly 1\.2\.3/);
  });

  it('says which platforms exist when this one has no build', async () => {
    const install = await fakeInstall(base);
    const catalog = await loadBinaryCatalog({ packageRoot: install.root, env, platform: 'darwin-arm64' });
    await expect(ensureBinaries(['etcd'], { catalog, cacheDir: install.cacheDir, env })).rejects.toThrow(/has no etcd for darwin-arm64/);
  });

  it('prefers PROVISIONER_BINARIES_DIR, then a development bundle, then the installed packages', async () => {
    const install = await fakeInstall(base);
    const own = path.join(base, 'own');
    await mkdir(own);
    await writeFile(path.join(own, 'etcd'), '#!/bin/sh\n', { mode: 0o755 });
    const paths = await ensureBinaries(['etcd'], { packageRoot: install.root, platform, cacheDir: install.cacheDir, env: { PROVISIONER_BINARIES_DIR: own } });
    expect(paths.etcd).toBe(path.join(own, 'etcd'));

    const bundle: BundleManifest = { schemaVersion: 1, recipeHash: 'x', goVersion: 'go', createdAt: 'now', binaries: [], components: [] };
    await mkdir(path.join(install.root, 'bundle'));
    await writeFile(path.join(install.root, 'bundle', 'manifest.json'), JSON.stringify(bundle));
    expect(await loadBinaryCatalog({ packageRoot: install.root, env, platform })).toBeInstanceOf(BundleCatalog);
  });

  it('refuses a development bundle built for another platform (a cross-build left in bundle/)', async () => {
    const install = await fakeInstall(base);
    const bundle: BundleManifest = { schemaVersion: 1, recipeHash: 'x', goVersion: 'go', platform: 'darwin-arm64', createdAt: 'now', binaries: [], components: [] };
    await mkdir(path.join(install.root, 'bundle'));
    await writeFile(path.join(install.root, 'bundle', 'manifest.json'), JSON.stringify(bundle));
    await expect(loadBinaryCatalog({ packageRoot: install.root, env, platform })).rejects.toThrow(/built for darwin-arm64, not for this linux-x64/);
  });

  it('lists every problem of a malformed release manifest by field path', () => {
    const problems = releaseManifestProblems({
      schemaVersion: 1,
      version: '1.0.0',
      goVersion: 'go',
      createdAt: 'now',
      binaries: [{ name: '../etcd', version: 'v1', module: 'm', moduleVersion: 'v1', package: 'p', platforms: { 'linux-x64': { package: '', file: '../x', format: 'zip', sha256: 'no', size: -1, fileSize: 1 } } }],
      components: [{ provider: 'p', namespace: 'n', version: 'v', type: 'CoreProvider', file: '/etc/passwd' }],
    });
    expect(problems).toEqual([
      'binaries[0].name: "../etcd" is not a plain file name',
      'binaries[0].platforms.linux-x64.package: must be a non-empty string',
      'binaries[0].platforms.linux-x64.format: must be one of brotli, gzip',
      'binaries[0].platforms.linux-x64.file: must be bin/<file name>',
      'binaries[0].platforms.linux-x64.sha256: must be 64 lower-case hex digits',
      'binaries[0].platforms.linux-x64.size: must be a non-negative integer',
      'components[0].file: must be components/<name>.yaml',
    ]);
  });
});
