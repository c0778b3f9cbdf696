import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { sha256OfFile } from '../files.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { processStartTime } from '../process/proc.js';
import {
  binariesDirEnv,
  cacheDirEnv,
  binaryDigests,
  cacheError,
  ensureBinaries,
  ensureLayer,
  entryPaths,
  inspectCache,
  resolveBinariesDir,
  resolveCacheDir,
  type VerificationRecord,
} from './cache.js';
import { loadCatalog, MissingLayerError, packageRoot } from './catalog.js';
import type { BundledBinary, BundleManifest } from './manifest.js';

const run = promisify(execFile);

interface FakeBinary {
  name: string;
  content: Buffer;
}

/** Writes a bundle of gzipped random "binaries" and its manifest; returns the binaries by name. */
async function writeFakeBundle(dir: string, binaries: FakeBinary[], tamper?: (b: BundledBinary) => void): Promise<Record<string, BundledBinary>> {
  await mkdir(path.join(dir, 'bin'), { recursive: true });
  const entries: BundledBinary[] = [];
  for (const { name, content } of binaries) {
    const gz = gzipSync(content, { level: 1 });
    await writeFile(path.join(dir, 'bin', `${name}.gz`), gz);
    const entry: BundledBinary = {
      name,
      version: 'v0.0.1',
      module: 'example.com/fake',
      moduleVersion: 'v0.0.1',
      package: `example.com/fake/cmd/${name}`,
      archive: `bin/${name}.gz`,
      sha256: createHash('sha256').update(content).digest('hex'),
      archiveSha256: createHash('sha256').update(gz).digest('hex'),
      size: content.length,
      compressedSize: gz.length,
      shipped: true,
    };
    tamper?.(entry);
    entries.push(entry);
  }
  const manifest: BundleManifest = {
    schemaVersion: 1,
    recipeHash: 'test',
    goVersion: 'go version go1.26.8 linux/amd64',
    createdAt: new Date().toISOString(),
    binaries: entries,
    components: [],
  };
  await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
  return Object.fromEntries(entries.map((e) => [e.name, e]));
}

const fake = (name: string, bytes = 64 << 10): FakeBinary => ({ name, content: randomBytes(bytes) });

/** A whole second, so that utimes() can restore it exactly (it cannot restore nanoseconds). */
const pinnedSeconds = 1_700_000_000;

/**
 * Sets a cached binary's mtime to `pinnedSeconds` and its record to match, as if it had
 * been extracted at that instant; lets a test change the content and restore the mtime.
 */
async function pinMtime(file: string): Promise<void> {
  await utimes(file, pinnedSeconds, pinnedSeconds);
  const recordFile = `${file}.record.json`;
  const record = JSON.parse(await readFile(recordFile, 'utf8')) as VerificationRecord;
  record.mtimeMs = (await stat(file)).mtimeMs;
  expect(record.mtimeMs).toBe(pinnedSeconds * 1000);
  await writeFile(recordFile, JSON.stringify(record));
}

async function listFiles(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String).sort();
}

describe('cache directory precedence', () => {
  it('is option > PROVISIONER_CACHE_DIR > $XDG_CACHE_HOME/provisioner > ~/.cache/provisioner', () => {
    expect(resolveCacheDir({ cacheDir: '/o', env: { [cacheDirEnv]: '/e', XDG_CACHE_HOME: '/x' } })).toBe('/o');
    expect(resolveCacheDir({ env: { [cacheDirEnv]: '/e', XDG_CACHE_HOME: '/x' } })).toBe('/e');
    expect(resolveCacheDir({ env: { XDG_CACHE_HOME: '/x' } })).toBe('/x/provisioner');
    expect(resolveCacheDir({ env: {} })).toBe(path.join(os.homedir(), '.cache', 'provisioner'));
  });

  it('takes the user binaries directory from the option, else PROVISIONER_BINARIES_DIR', () => {
    expect(resolveBinariesDir({ binariesDir: '/o', env: { [binariesDirEnv]: '/e' } })).toBe('/o');
    expect(resolveBinariesDir({ env: { [binariesDirEnv]: '/e' } })).toBe('/e');
    expect(resolveBinariesDir({ env: {} })).toBeUndefined();
  });
});

describe('ensureBinaries', () => {
  let root: string;
  let bundleDir: string;
  let cacheDir: string;

  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'provisioner-cache-'));
    bundleDir = path.join(root, 'bundle');
    cacheDir = path.join(root, 'cache');
  });
  afterEach(async () => {
    await chmod(root, 0o755).catch(() => {});
    await rm(root, { recursive: true, force: true });
  });

  it('extracts into <cache>/bin/<sha256>/<name>, executable, with a verification record and progress', async () => {
    const big = fake('kube-apiserver', 10 << 20);
    const manifest = await writeFakeBundle(bundleDir, [big]);
    const sink = new RecordingSink();
    const paths = await ensureBinaries(['kube-apiserver'], { bundleDir, cacheDir, sink });

    const expected = path.join(cacheDir, 'bin', manifest['kube-apiserver']!.sha256, 'kube-apiserver');
    expect(paths).toEqual({ 'kube-apiserver': expected });
    expect((await readFile(expected)).equals(big.content)).toBe(true);
    const st = await stat(expected);
    expect(st.mode & 0o777).toBe(0o755);

    const record = JSON.parse(await readFile(`${expected}.record.json`, 'utf8')) as VerificationRecord;
    expect(record).toMatchObject({ name: 'kube-apiserver', sha256: manifest['kube-apiserver']!.sha256, size: st.size, ino: st.ino, mtimeMs: st.mtimeMs });

    const progress = sink.ofType('progress');
    expect(progress.every((p) => p.task === 'extract:kube-apiserver' && p.unit === 'bytes' && p.total === big.content.length)).toBe(true);
    // Throttled: a 10 MiB binary in 256 KiB chunks gives 40 chunks, but at most one event per 4 MiB (or 100 ms).
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress.length).toBeLessThan(40);
    expect(progress.at(-1)).toMatchObject({ done: true, current: big.content.length });
    expect(progress.filter((p) => p.done)).toHaveLength(1);
    // No temp or lock file is left behind.
    expect(await listFiles(path.dirname(expected))).toEqual(['kube-apiserver', 'kube-apiserver.record.json']);
  });

  it('gives each link of a multi-call binary its own path, a hard link that runs it under the link\'s name', async () => {
    // A script stands in for the multi-call binary: it prints the name it was called by, as kube dispatches on it.
    const kube = { name: 'kube', content: Buffer.from('#!/bin/sh\nbasename "$0"\n') };
    const manifest = await writeFakeBundle(bundleDir, [kube, fake('etcd')], (b) => {
      if (b.name === 'kube') b.links = ['kube-apiserver', 'kubelet'];
    });
    const sha = manifest.kube!.sha256;
    const paths = await ensureBinaries(['kube-apiserver', 'kubelet', 'etcd'], { bundleDir, cacheDir });
    expect(paths).toEqual({
      'kube-apiserver': path.join(cacheDir, 'bin', sha, 'kube-apiserver'),
      kubelet: path.join(cacheDir, 'bin', sha, 'kubelet'),
      etcd: path.join(cacheDir, 'bin', manifest.etcd!.sha256, 'etcd'),
    });
    // Extracted once; each link is the same file.
    const binary = await stat(path.join(cacheDir, 'bin', sha, 'kube'));
    for (const name of ['kube-apiserver', 'kubelet']) expect((await stat(paths[name]!)).ino).toBe(binary.ino);
    expect(await listFiles(path.join(cacheDir, 'bin', sha))).toEqual(['kube', 'kube-apiserver', 'kube.record.json', 'kubelet']);
    expect((await run(paths['kube-apiserver']!)).stdout.trim()).toBe('kube-apiserver');
    expect((await run(paths.kubelet!)).stdout.trim()).toBe('kubelet');

    // A warm start keeps the links; a link that is no longer the binary (re-extracted, or replaced) is made again.
    expect((await ensureBinaries(['kubelet'], { bundleDir, cacheDir })).kubelet).toBe(paths.kubelet);
    await rm(paths.kubelet!);
    await writeFile(paths.kubelet!, 'not the binary');
    await ensureBinaries(['kubelet'], { bundleDir, cacheDir });
    expect((await stat(paths.kubelet!)).ino).toBe(binary.ino);
    expect((await run(paths.kubelet!)).stdout.trim()).toBe('kubelet');
  });

  it('gives each name asked for its digest, a link of a multi-call binary the binary\'s (what saves hashing it at every create)', async () => {
    const manifest = await writeFakeBundle(bundleDir, [fake('kube'), fake('etcd')], (b) => {
      if (b.name === 'kube') b.links = ['kubelet', 'kubeadm'];
    });
    const digests = await binaryDigests(await loadCatalog({ bundleDir }), ['kubelet', 'kubeadm', 'kube', 'etcd']);
    expect(digests).toEqual({ kubelet: manifest.kube!.sha256, kubeadm: manifest.kube!.sha256, kube: manifest.kube!.sha256, etcd: manifest.etcd!.sha256 });
  });

  it('extracts only the binaries asked for', async () => {
    const manifest = await writeFakeBundle(bundleDir, [fake('etcd'), fake('kube-apiserver'), fake('kubectl')]);
    const paths = await ensureBinaries(['etcd', 'etcd'], { bundleDir, cacheDir });
    expect(Object.keys(paths)).toEqual(['etcd']);
    expect(await readdir(path.join(cacheDir, 'bin'))).toEqual([manifest.etcd!.sha256]);
  });

  it('serves a warm start from the record without reading the archive or emitting progress', async () => {
    await writeFakeBundle(bundleDir, [fake('etcd'), fake('kube-apiserver')]);
    const first = await ensureBinaries(['etcd', 'kube-apiserver'], { bundleDir, cacheDir });
    const inode = (await stat(first.etcd!)).ino;
    // Without the archives, only a cache hit can succeed.
    await rm(path.join(bundleDir, 'bin'), { recursive: true });
    const sink = new RecordingSink();
    const second = await ensureBinaries(['etcd', 'kube-apiserver'], { bundleDir, cacheDir, sink });
    expect(second).toEqual(first);
    expect((await stat(second.etcd!)).ino).toBe(inode);
    expect(sink.events).toEqual([]);
  });

  it.each([
    ['truncated', async (file: string) => truncate(file, 1000)],
    ['replaced by another file', async (file: string) => {
      const content = await readFile(file);
      await rm(file);
      await writeFile(file, content, { mode: 0o755 });
    }],
    ['touched', async (file: string) => utimes(file, new Date(), new Date(Date.now() + 5000))],
    ['left without its record', async (file: string) => rm(`${file}.record.json`)],
    ['no longer executable', async (file: string) => chmod(file, 0o644)],
  ])('re-extracts an entry that was %s', async (_what, damage) => {
    const etcd = fake('etcd');
    await writeFakeBundle(bundleDir, [etcd]);
    const { etcd: file } = await ensureBinaries(['etcd'], { bundleDir, cacheDir });
    await damage(file!);
    const sink = new RecordingSink();
    const again = await ensureBinaries(['etcd'], { bundleDir, cacheDir, sink });
    expect(again.etcd).toBe(file);
    expect((await readFile(file!)).equals(etcd.content)).toBe(true);
    expect((await stat(file!)).mode & 0o777).toBe(0o755);
    expect(sink.ofType('progress').some((p) => p.done)).toBe(true);
  });

  it('trusts size, mtime and inode on a warm start, and re-hashes only with verify', async () => {
    const etcd = fake('etcd');
    await writeFakeBundle(bundleDir, [etcd]);
    const { etcd: file } = await ensureBinaries(['etcd'], { bundleDir, cacheDir });
    await pinMtime(file!);
    // Same size, same inode, same mtime: bit rot that stat() cannot see.
    const rotten = Buffer.from(etcd.content);
    rotten[100] = rotten[100]! ^ 0xff;
    await writeFile(file!, rotten);
    await utimes(file!, pinnedSeconds, pinnedSeconds);

    const cheap = new RecordingSink();
    await ensureBinaries(['etcd'], { bundleDir, cacheDir, sink: cheap });
    expect(cheap.events).toEqual([]);
    expect(await sha256OfFile(file!)).not.toBe(createHash('sha256').update(etcd.content).digest('hex'));

    const thorough = new RecordingSink();
    await ensureBinaries(['etcd'], { bundleDir, cacheDir, sink: thorough, verify: true });
    expect(thorough.ofType('log').some((l) => l.level === 'warn' && /wrong content/.test(l.message))).toBe(true);
    expect((await readFile(file!)).equals(etcd.content)).toBe(true);
  });

  it('rejects content whose sha256 differs from the manifest and keeps nothing', async () => {
    await writeFakeBundle(bundleDir, [fake('etcd')], (b) => (b.sha256 = 'f'.repeat(64)));
    const error = (await ensureBinaries(['etcd'], { bundleDir, cacheDir }).catch((e: unknown) => e)) as EnvironmentError;
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(error.message).toContain('etcd');
    expect(error.details.join('\n')).toContain(cacheDir);
    expect(error.hint).toContain('npm run bundle');
    expect(await listFiles(path.join(cacheDir, 'bin', 'f'.repeat(64)))).toEqual([]);
  });

  it('rejects an archive that is not gzip', async () => {
    const manifest = await writeFakeBundle(bundleDir, [fake('etcd')]);
    const archive = path.join(bundleDir, 'bin', 'etcd.gz');
    await writeFile(archive, randomBytes(manifest.etcd!.compressedSize));
    await expect(ensureBinaries(['etcd'], { bundleDir, cacheDir })).rejects.toThrow(/not a valid gzip stream/);
    expect(await listFiles(path.join(cacheDir, 'bin', manifest.etcd!.sha256))).toEqual([]);
  });

  it('never mistakes a leftover temp file for the binary, and cleans old ones', async () => {
    const etcd = fake('etcd');
    const manifest = await writeFakeBundle(bundleDir, [etcd]);
    const entry = entryPaths(cacheDir, manifest.etcd!);
    await mkdir(entry.dir, { recursive: true });
    // A killed extraction: half a binary in a temp file, an hour old; and one from a run still going.
    const old = path.join(entry.dir, '.etcd.4242.deadbeef.partial');
    const recent = path.join(entry.dir, '.etcd.4343.cafebabe.partial');
    await writeFile(old, etcd.content.subarray(0, 1000), { mode: 0o755 });
    await writeFile(recent, etcd.content.subarray(0, 1000), { mode: 0o755 });
    const hourAgo = new Date(Date.now() - 3600_000);
    await utimes(old, hourAgo, hourAgo);

    const { etcd: file } = await ensureBinaries(['etcd'], { bundleDir, cacheDir });
    expect(file).toBe(entry.file);
    expect((await readFile(file!)).equals(etcd.content)).toBe(true);
    expect(await listFiles(entry.dir)).toEqual(['.etcd.4343.cafebabe.partial', 'etcd', 'etcd.record.json']);
  });

  it('re-extracts a truncated binary at the final name that has no record (killed before the record)', async () => {
    const etcd = fake('etcd');
    const manifest = await writeFakeBundle(bundleDir, [etcd]);
    const entry = entryPaths(cacheDir, manifest.etcd!);
    await mkdir(entry.dir, { recursive: true });
    await writeFile(entry.file, etcd.content.subarray(0, 500), { mode: 0o755 });
    const { etcd: file } = await ensureBinaries(['etcd'], { bundleDir, cacheDir });
    expect((await readFile(file!)).equals(etcd.content)).toBe(true);
  });

  it('takes over a lock left by a dead process', async () => {
    const etcd = fake('etcd');
    const manifest = await writeFakeBundle(bundleDir, [etcd]);
    const entry = entryPaths(cacheDir, manifest.etcd!);
    await mkdir(entry.dir, { recursive: true });
    // pid 2^22 + 1 is above Linux's pid_max limit, so it is never alive.
    await writeFile(entry.lock, JSON.stringify({ pid: 4194305, host: os.hostname(), startedAt: new Date().toISOString() }));
    const { etcd: file } = await ensureBinaries(['etcd'], { bundleDir, cacheDir });
    expect((await readFile(file!)).equals(etcd.content)).toBe(true);
    expect(await listFiles(entry.dir)).toEqual(['etcd', 'etcd.record.json']);
  });

  it('takes over a lock whose pid now belongs to another process (start time differs)', async () => {
    const etcd = fake('etcd');
    const manifest = await writeFakeBundle(bundleDir, [etcd]);
    const entry = entryPaths(cacheDir, manifest.etcd!);
    await mkdir(entry.dir, { recursive: true });
    // A live process whose pid the lock names, but which started later than the lock's holder did.
    const other = spawn('/bin/sleep', ['300'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => other.once('spawn', resolve));
      const startTime = String(Number(processStartTime(other.pid!)) + 7);
      const holder = { pid: other.pid, startTime, hostname: os.hostname(), command: 'extract etcd', startedAt: new Date().toISOString(), token: 'theirs' };
      await writeFile(entry.lock, JSON.stringify(holder));
      const { etcd: file } = await ensureBinaries(['etcd'], { bundleDir, cacheDir });
      expect((await readFile(file!)).equals(etcd.content)).toBe(true);
      expect(await listFiles(entry.dir)).toEqual(['etcd', 'etcd.record.json']);
    } finally {
      other.kill('SIGKILL');
    }
  }, 10_000);

  it('ends with one correct file when two processes extract at once', async () => {
    const etcd = fake('etcd', 24 << 20);
    const manifest = await writeFakeBundle(bundleDir, [etcd]);
    const child = path.join(root, 'child.mts');
    await writeFile(
      child,
      [
        `import { ensureBinaries } from ${JSON.stringify(pathToFileURL(path.join(packageRoot, 'src/embedded/cache.ts')).href)};`,
        `const events = [];`,
        `const paths = await ensureBinaries(['etcd'], { bundleDir: ${JSON.stringify(bundleDir)}, cacheDir: ${JSON.stringify(cacheDir)}, sink: { emit: (e) => events.push(e) } });`,
        `process.stdout.write(JSON.stringify({ paths, extracted: events.some((e) => e.type === 'progress' && e.done), waited: events.some((e) => e.type === 'log' && e.message.startsWith('Waiting')) }));`,
      ].join('\n'),
    );
    const spawnChild = () => run(process.execPath, ['--import', 'tsx', child], { cwd: packageRoot });
    const results = await Promise.all([spawnChild(), spawnChild()]);
    const outputs = results.map((r) => JSON.parse(r.stdout) as { paths: Record<string, string>; extracted: boolean });
    const entry = entryPaths(cacheDir, manifest.etcd!);
    expect(outputs.map((o) => o.paths.etcd)).toEqual([entry.file, entry.file]);
    // The lock made the second process wait and reuse the first one's work.
    expect(outputs.filter((o) => o.extracted)).toHaveLength(1);
    expect(await sha256OfFile(entry.file)).toBe(manifest.etcd!.sha256);
    expect(await listFiles(entry.dir)).toEqual(['etcd', 'etcd.record.json']);
    // The record describes the file that is there, so the next start is a hit.
    const sink = new RecordingSink();
    await ensureBinaries(['etcd'], { bundleDir, cacheDir, sink });
    expect(sink.events).toEqual([]);
  }, 60_000);

  describe('user binaries directory', () => {
    it('uses an executable found there, says so, and falls back to the bundle for the rest', async () => {
      await writeFakeBundle(bundleDir, [fake('etcd'), fake('kube-apiserver'), fake('kubectl')]);
      const own = path.join(root, 'own');
      await mkdir(own);
      await writeFile(path.join(own, 'etcd'), '#!/bin/sh\necho mine\n', { mode: 0o755 });
      // Not executable: ignored.
      await writeFile(path.join(own, 'kubectl'), 'data', { mode: 0o644 });
      const sink = new RecordingSink();
      const paths = await ensureBinaries(['etcd', 'kube-apiserver', 'kubectl'], { bundleDir, cacheDir, binariesDir: own, sink });
      expect(paths.etcd).toBe(path.join(own, 'etcd'));
      expect(paths['kube-apiserver']!.startsWith(cacheDir)).toBe(true);
      expect(paths.kubectl!.startsWith(cacheDir)).toBe(true);
      const logs = sink.ofType('log').map((l) => l.message);
      expect(logs).toContainEqual(expect.stringMatching(/^Using etcd from PROVISIONER_BINARIES_DIR instead of the bundle/));
      expect(logs.filter((m) => m.startsWith('Using '))).toHaveLength(1);
    });

    it('reads PROVISIONER_BINARIES_DIR and needs no bundle when it has everything', async () => {
      const own = path.join(root, 'own');
      await mkdir(own);
      await writeFile(path.join(own, 'etcd'), '#!/bin/sh\n', { mode: 0o755 });
      const paths = await ensureBinaries(['etcd'], { bundleDir: path.join(root, 'no-bundle'), cacheDir, env: { [binariesDirEnv]: own } });
      expect(paths).toEqual({ etcd: path.join(own, 'etcd') });
    });
  });

  describe('errors', () => {
    it('names the missing archive and how to rebuild', async () => {
      await writeFakeBundle(bundleDir, [fake('etcd')]);
      await rm(path.join(bundleDir, 'bin', 'etcd.gz'));
      const error = (await ensureBinaries(['etcd'], { bundleDir, cacheDir }).catch((e: unknown) => e)) as EnvironmentError;
      expect(error).toBeInstanceOf(EnvironmentError);
      expect(error.message).toContain(path.join(bundleDir, 'bin', 'etcd.gz'));
      expect(error.hint).toContain('npm run bundle');
    });

    it('names a binary the bundle does not have', async () => {
      await writeFakeBundle(bundleDir, [fake('etcd')]);
      await expect(ensureBinaries(['kube-scheduler'], { bundleDir, cacheDir })).rejects.toThrow(/no binary named "kube-scheduler"/);
    });

    it('reports a cache directory that cannot be created, with its path and the env variable to move it', async () => {
      await writeFakeBundle(bundleDir, [fake('etcd')]);
      const blocked = path.join(root, 'blocked');
      await writeFile(blocked, 'a file where the cache directory should be');
      const error = (await ensureBinaries(['etcd'], { bundleDir, cacheDir: blocked }).catch((e: unknown) => e)) as EnvironmentError;
      expect(error).toBeInstanceOf(EnvironmentError);
      expect(error.message).toContain(blocked);
      expect(error.hint).toContain(cacheDirEnv);
    });

    it('maps ENOSPC and EACCES to environment errors with the cache path and next step', () => {
      const enospc = Object.assign(new Error('no space'), { code: 'ENOSPC' });
      const full = cacheError(enospc, { binary: 'etcd', cacheDir: '/c', path: '/c/bin/x/.etcd.1.partial', needBytes: 100 << 20 }) as EnvironmentError;
      expect(full).toBeInstanceOf(EnvironmentError);
      expect(full.message).toBe('No space left to extract etcd into the binary cache /c');
      expect(full.hint).toBe(`Free at least 100 MiB on the disk holding /c, or set ${cacheDirEnv} to a directory on another disk.`);

      const eacces = Object.assign(new Error('denied'), { code: 'EACCES' });
      const denied = cacheError(eacces, { binary: 'etcd', cacheDir: '/c', path: '/c/bin' }) as EnvironmentError;
      expect(denied.message).toBe('The binary cache /c is not writable (needed for etcd)');
      expect(denied.details).toEqual(['EACCES on /c/bin']);

      const other = new Error('other');
      expect(cacheError(other, { binary: 'etcd', cacheDir: '/c', path: '/c' })).toBe(other);
    });
  });

  describe('inspectCache', () => {
    it('reports absent, ready, stale and (with verify) corrupt entries, and invalidates a corrupt one', async () => {
      const blobs = [fake('a'), fake('b'), fake('c'), fake('d')];
      await writeFakeBundle(bundleDir, blobs);
      const paths = await ensureBinaries(['b', 'c', 'd'], { bundleDir, cacheDir });
      await truncate(paths.c!, 10);
      await pinMtime(paths.d!);
      await writeFile(paths.d!, Buffer.alloc(blobs[3]!.content.length));
      await utimes(paths.d!, pinnedSeconds, pinnedSeconds);

      const catalog = await loadCatalog({ bundleDir });
      const quick = await inspectCache(catalog, { cacheDir });
      expect(quick.map((s) => [s.name, s.state])).toEqual([['a', 'absent'], ['b', 'ready'], ['c', 'stale'], ['d', 'ready']]);

      const verified = await inspectCache(catalog, { cacheDir, verify: true });
      expect(verified.map((s) => [s.name, s.state, s.verified])).toEqual([
        ['a', 'absent', true],
        ['b', 'ready', true],
        ['c', 'stale', false],
        ['d', 'corrupt', true],
      ]);
      // The corrupt entry lost its record, so the next use re-extracts it even without verify.
      await ensureBinaries(['d'], { bundleDir, cacheDir });
      expect((await readFile(paths.d!)).equals(blobs[3]!.content)).toBe(true);
    });

    it('with verify, checks the archive of an entry not extracted yet: damaged when it holds other content, naming it and the fix', async () => {
      const blobs = [fake('a'), fake('b')];
      await writeFakeBundle(bundleDir, blobs);
      // b's archive: a well-formed gzip of other bytes, of the size the manifest gives.
      const archive = path.join(bundleDir, 'bin', 'b.gz');
      const other = gzipSync(Buffer.from(blobs[1]!.content).reverse(), { level: 1 });
      const manifestFile = path.join(bundleDir, 'manifest.json');
      const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as BundleManifest;
      manifest.binaries.find((x) => x.name === 'b')!.compressedSize = other.length;
      await writeFile(manifestFile, JSON.stringify(manifest));
      await writeFile(archive, other);

      const statuses = await inspectCache(await loadCatalog({ bundleDir }), { cacheDir, verify: true });
      expect(statuses.map((s) => [s.name, s.state, s.verified])).toEqual([
        ['a', 'absent', true],
        ['b', 'damaged', true],
      ]);
      expect(statuses[0]!.reason).toBe('not extracted; its archive holds the binary');
      expect(statuses[1]!.path).toBe(archive);
      expect(statuses[1]!.reason).toMatch(new RegExp(`^The archive of b holds other content \\(sha256 [0-9a-f]{12}…, ${blobs[1]!.content.length} bytes; the manifest says ${createHash('sha256').update(blobs[1]!.content).digest('hex').slice(0, 12)}…, ${blobs[1]!.content.length}\\): ${archive}\\. `));
      // Nothing was written: inspecting extracts nothing.
      expect((await inspectCache(await loadCatalog({ bundleDir }), { cacheDir })).map((s) => s.state)).toEqual(['absent', 'absent']);
    });
  });
});

describe('ensureLayer', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'provisioner-layer-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('extracts a bundle layer into the cache, checked by sha256, and names a bundle without one', async () => {
    const bundleDir = path.join(root, 'bundle');
    await writeFakeBundle(bundleDir, [fake('kube-proxy')]);
    const tar = randomBytes(20_000);
    const gz = gzipSync(tar);
    await mkdir(path.join(bundleDir, 'layers'));
    await writeFile(path.join(bundleDir, 'layers', 'userland.tar.gz'), gz);
    const manifest = JSON.parse(await readFile(path.join(bundleDir, 'manifest.json'), 'utf8')) as BundleManifest;
    const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');
    const layer = { name: 'userland', archive: 'layers/userland.tar.gz', sha256: sha(tar), archiveSha256: sha(gz), size: tar.length, compressedSize: gz.length, architecture: 'amd64', packages: [{ name: 'iptables', version: '1.8.9-2' }] };
    await writeFile(path.join(bundleDir, 'manifest.json'), JSON.stringify({ ...manifest, layers: [layer] }));
    const catalog = await loadCatalog({ bundleDir });
    const cacheDir = path.join(root, 'cache');
    const cached = await ensureLayer(catalog, 'userland', { catalog, cacheDir });
    expect(cached.path).toBe(entryPaths(cacheDir, { name: 'userland.tar', sha256: layer.sha256 }).file);
    expect(Buffer.compare(await readFile(cached.path), tar)).toBe(0);
    expect(cached.layer.packages).toEqual(layer.packages);

    // A damaged archive is refused, not used.
    await writeFile(path.join(bundleDir, 'manifest.json'), JSON.stringify({ ...manifest, layers: [{ ...layer, sha256: sha(randomBytes(8)) }] }));
    const damaged = await loadCatalog({ bundleDir });
    await expect(ensureLayer(damaged, 'userland', { catalog: damaged, cacheDir })).rejects.toThrow(EnvironmentError);

    await writeFile(path.join(bundleDir, 'manifest.json'), JSON.stringify(manifest));
    const without = await loadCatalog({ bundleDir });
    await expect(ensureLayer(without, 'userland', { catalog: without, cacheDir })).rejects.toThrow(MissingLayerError);
  });
});
