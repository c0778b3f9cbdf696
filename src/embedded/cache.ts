/**
 * The extraction cache: turns `bundle/bin/<name>.gz` into executable files, once.
 *
 * Layout, content-addressed by the sha256 of the uncompressed binary:
 *
 *   <cache>/bin/<sha256>/<name>               the executable (mode 0755)
 *   <cache>/bin/<sha256>/<name>.record.json   verification record written at extraction
 *   <cache>/bin/<sha256>/<link>               a name a multi-call binary runs as (kube-apiserver
 *                                             of `kube`): a hard link to it, see ensureLink
 *   <cache>/bin/<sha256>/.<name>.lock         held while one process extracts
 *   <cache>/bin/<sha256>/.<name>.<pid>.<rand>.partial   a temp file being written
 *
 * Where the cache lives (first that is set wins): the `cacheDir` option >
 * `$PROVISIONER_CACHE_DIR` > `$XDG_CACHE_HOME/provisioner` > `~/.cache/provisioner`.
 *
 * Where a binary comes from (first that applies wins):
 *   1. the user's own binaries directory — the `binariesDir` option, else
 *      `$PROVISIONER_BINARIES_DIR` (like envtest's KUBEBUILDER_ASSETS): an executable
 *      regular file `<dir>/<name>` is used as is, unverified, and a `log` event says so;
 *   2. the catalog (catalog.ts `loadBinaryCatalog`): a development bundle's archive,
 *      extracted through this cache; or an installed platform package's file. A binary
 *      missing from the user's directory falls back to the catalog.
 *
 * An installed platform package holds its binary compressed (brotli, as `release:pack`
 * ships every one), so it goes through the extraction cache like a bundle's gzip archive.
 *
 * Guarantees:
 *   - Streaming: gunzip or brotli -> sha256 -> temp file in the entry directory; never the whole
 *     binary in memory.
 *   - Atomic: the temp file is fsynced, its sha256 and size checked against the
 *     manifest, chmod 0755, and only then renamed onto `<name>`. Temp names start with
 *     a dot and end in `.partial`, so a killed extraction never leaves anything at
 *     `<name>`; an entry without a matching record is never trusted.
 *   - Concurrent processes: a lock file makes the second process wait for the first
 *     and then reuse its result. Correctness does not depend on the lock: if it is
 *     stolen (stale after 60 s without a heartbeat), both processes write their own
 *     temp file and the atomic renames leave one correct file.
 *   - Cheap warm start: a hit costs one small JSON read and one stat() per binary.
 *     The record holds sha256, size, mtimeMs and inode from extraction time; any
 *     difference (truncated, replaced, touched entry) means re-extract. Corruption that
 *     keeps size, mtime and inode is caught only by `verify: true` (a full re-hash).
 */
import { createHash, randomBytes } from 'node:crypto';
import { constants as fsConstants, createReadStream } from 'node:fs';
import { access, link, mkdir, open, type FileHandle, readdir, readFile, rename, rm, stat, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createBrotliDecompress, createGunzip } from 'node:zlib';
import { mapLimit, sleep } from '../concurrency.js';
import { sha256OfFile, writeFileAtomic } from '../files.js';
import { EnvironmentError, ProvisionerError } from '../errors.js';
import { log, nullSink, type EventSink } from '../events.js';
import { tryLockFile, type LockAttempt } from '../process/lock.js';
import { buildBundleHint, loadBinaryCatalog, type BinaryCatalog, type BundleCatalog, type CatalogOptions } from './catalog.js';
import type { BinaryFormat, BundledBinary, BundledLayer } from './manifest.js';
import type { ReleaseCatalog } from './release.js';

/** Environment variable naming the cache directory. */
export const cacheDirEnv = 'PROVISIONER_CACHE_DIR';
/** Environment variable naming a directory of the user's own binaries. */
export const binariesDirEnv = 'PROVISIONER_BINARIES_DIR';

/** Progress is reported at most every this many bytes... */
const progressEveryBytes = 4 << 20;
/** ...or every this many milliseconds, whichever comes first. */
const progressEveryMs = 100;
/** A lock or temp file untouched for this long belongs to a dead extraction (a held lock is touched every 5 s). */
const staleAfterMs = 60_000;
/** How often a waiting process looks at the lock again. */
const lockPollMs = 100;

export interface CacheOptions extends CatalogOptions {
  /** Cache directory. Default: `$PROVISIONER_CACHE_DIR`, else `$XDG_CACHE_HOME/provisioner`, else `~/.cache/provisioner`. */
  cacheDir?: string;
  /** The user's own binaries, used before the bundle. Default: `$PROVISIONER_BINARIES_DIR`, else none. */
  binariesDir?: string;
  /** An already loaded catalog. Default: `loadBinaryCatalog` (see catalog.ts), when a binary is needed from it. */
  catalog?: BinaryCatalog;
  /** Re-hash every cached binary instead of trusting its verification record. Default: false. */
  verify?: boolean;
  /** Where progress and log events go. Default: nowhere. */
  sink?: EventSink;
  /** Stops waiting and extracting; temp files are removed. Default: none. */
  signal?: AbortSignal;
  /** How many binaries to extract at once. Default: 2 (gunzip runs on the libuv pool, hashing on the main thread). */
  concurrency?: number;
}

/** Resolves the cache directory: option > `$PROVISIONER_CACHE_DIR` > `$XDG_CACHE_HOME/provisioner` > `~/.cache/provisioner`. */
export function resolveCacheDir(options: Pick<CacheOptions, 'cacheDir' | 'env'> = {}): string {
  const env = options.env ?? process.env;
  const explicit = options.cacheDir ?? nonEmpty(env[cacheDirEnv]);
  if (explicit) return path.resolve(explicit);
  const xdg = nonEmpty(env.XDG_CACHE_HOME);
  return path.resolve(xdg ?? path.join(os.homedir(), '.cache'), 'provisioner');
}

/** Resolves the user's binaries directory: option > `$PROVISIONER_BINARIES_DIR` > none. */
export function resolveBinariesDir(options: Pick<CacheOptions, 'binariesDir' | 'env'> = {}): string | undefined {
  const chosen = options.binariesDir ?? nonEmpty((options.env ?? process.env)[binariesDirEnv]);
  return chosen === undefined ? undefined : path.resolve(chosen);
}

/** What is written next to an extracted binary, and compared with stat() on every start. */
export interface VerificationRecord {
  name: string;
  sha256: string;
  size: number;
  mtimeMs: number;
  ino: number;
  extractedAt: string;
}

/** The files of one cache entry. */
export interface EntryPaths {
  dir: string;
  file: string;
  record: string;
  lock: string;
}

/**
 * One binary to make available: what its content must be, and the file it comes from
 * (a bundle's archive, or a file in an installed platform package).
 */
export interface BinarySource {
  name: string;
  /** sha256 (hex) of the binary. */
  sha256: string;
  /** Size of the binary in bytes. */
  size: number;
  /** Absolute path of the file holding it. */
  file: string;
  /** A compressed stream of the binary, extracted into the cache. */
  format: BinaryFormat;
  /** Size `file` must have. */
  fileSize: number;
  /** The next step when `file` is missing or does not match. */
  hint: string;
}

/** A bundle binary as a source: its archive. */
function bundleSource(catalog: BundleCatalog, binary: BundledBinary): BinarySource {
  return {
    name: binary.name,
    sha256: binary.sha256,
    size: binary.size,
    file: catalog.archivePath(binary),
    format: 'gzip',
    fileSize: binary.compressedSize,
    hint: buildBundleHint(catalog.dir),
  };
}

/** An installed release's binary as a source: this platform's file in its platform package (checks the package is installed). */
async function releaseSource(catalog: ReleaseCatalog, name: string): Promise<BinarySource> {
  const { binary, build, file } = await catalog.locate(name);
  return {
    name: binary.name,
    sha256: build.sha256,
    size: build.size,
    file,
    format: build.format,
    fileSize: build.fileSize,
    hint: `The installed ${build.package} is damaged: reinstall provisioner (or run npm install ${build.package}@${catalog.manifest.version}).`,
  };
}

/** A node-image layer ready to use: its uncompressed tar in the cache, checked against the bundle's sha256. */
export interface CachedLayer {
  /** The tar file. */
  path: string;
  layer: BundledLayer;
}

/**
 * Extracts a bundle's layer (e.g. `userland`) into the cache the way binaries are
 * (`<cache>/bin/<sha256>/<name>.tar`: streamed gunzip, sha256 check, lock). A bundle
 * without it, or an installed release, is MissingLayerError.
 */
export async function ensureLayer(catalog: BinaryCatalog, name: string, options: CacheOptions = {}): Promise<CachedLayer> {
  if (catalog.kind === 'release') return catalog.layer(name);
  const layer = catalog.layer(name);
  const file = await ensureSource(
    { name: `${layer.name}.tar`, sha256: layer.sha256, size: layer.size, file: catalog.layerArchivePath(layer), format: 'gzip', fileSize: layer.compressedSize, hint: buildBundleHint(catalog.dir) },
    options,
  );
  return { path: file, layer };
}

/**
 * The sha256 of each named binary as `catalog` records it (what `ensureBinaries` checks the cached file against),
 * keyed by the name asked for: a link of a multi-call binary (kubelet) gets the binary's (kube's).
 */
export async function binaryDigests(catalog: BinaryCatalog, names: readonly string[]): Promise<Record<string, string>> {
  const sources = await catalogSources(catalog, names);
  return Object.fromEntries(names.map((name, i) => [name, sources[i]!.sha256]));
}

/** The source of every named binary in `catalog`. */
async function catalogSources(catalog: BinaryCatalog, names: readonly string[]): Promise<BinarySource[]> {
  if (catalog.kind === 'bundle') return names.map((name) => bundleSource(catalog, catalog.binary(name)));
  return Promise.all(names.map((name) => releaseSource(catalog, name)));
}

export function entryPaths(cacheDir: string, binary: Pick<BinarySource, 'name' | 'sha256'>): EntryPaths {
  const dir = path.join(cacheDir, 'bin', binary.sha256);
  return {
    dir,
    file: path.join(dir, binary.name),
    record: path.join(dir, `${binary.name}.record.json`),
    lock: path.join(dir, `.${binary.name}.lock`),
  };
}

/**
 * Makes the named binaries available as executable files and returns their absolute
 * paths by name. Only these binaries are extracted; the bundle is not even read when
 * the user's binaries directory provides all of them.
 */
export async function ensureBinaries(names: readonly string[], options: CacheOptions = {}): Promise<Record<string, string>> {
  const sink = options.sink ?? nullSink;
  const wanted = [...new Set(names)];
  const paths: Record<string, string> = {};
  const fromBundle: string[] = [];

  const userDir = resolveBinariesDir(options);
  if (userDir !== undefined && !(await isDirectory(userDir))) {
    log(sink, 'warn', `The binaries directory ${userDir} does not exist; using the bundle`, { binariesDir: userDir });
  }
  const own = await findUserBinaries(wanted, options);
  for (const name of wanted) {
    const ownPath = own[name];
    if (ownPath) {
      paths[name] = ownPath;
      log(sink, 'info', `Using ${name} from ${binariesDirEnv} instead of the bundle: ${ownPath}`, { binary: name, path: ownPath });
    } else {
      fromBundle.push(name);
    }
  }
  if (fromBundle.length === 0) return paths;

  const catalog = options.catalog ?? (await loadBinaryCatalog(options));
  // A link (kubelet) resolves to its multi-call binary (kube): each binary is made ready once.
  const sources = [...new Map((await catalogSources(catalog, fromBundle)).map((source) => [source.name, source])).values()];
  const cacheDir = resolveCacheDir(options);
  const ready = await mapLimit(sources, options.concurrency ?? 2, (source) => ensureSource(source, { ...options, cacheDir }));
  const byBinary = new Map(sources.map((source, i) => [source.name, { source, file: ready[i] as string }]));
  for (const name of fromBundle) {
    const { source, file } = byBinary.get(catalog.binary(name).name)!;
    paths[name] = name === source.name ? file : await ensureLink(file, name, source, cacheDir);
  }
  return paths;
}

/**
 * The path a multi-call binary runs as `name` by: `<cache>/bin/<sha256>/<name>`, a hard link
 * to the binary (a symbolic link where the file system refuses one), so that the process's
 * argv[0] names the component and every caller keeps spawning a binary by its name. The link
 * is trusted while it is the same file as the binary, and replaced (atomically) otherwise.
 */
async function ensureLink(file: string, name: string, source: BinarySource, cacheDir: string): Promise<string> {
  const linkPath = entryPaths(cacheDir, { name, sha256: source.sha256 }).file;
  const target = await stat(file);
  const existing = await stat(linkPath).catch(() => undefined);
  if (existing && existing.ino === target.ino && existing.dev === target.dev) return linkPath;
  const temp = path.join(path.dirname(linkPath), `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.partial`);
  try {
    await mkdir(path.dirname(linkPath), { recursive: true, mode: 0o755 });
    try {
      await link(file, temp);
    } catch {
      await symlink(file, temp);
    }
    await rename(temp, linkPath);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    throw cacheError(error, { binary: name, cacheDir, path: linkPath });
  }
  return linkPath;
}

/**
 * Which of `names` the user's binaries directory provides (an executable regular file
 * named exactly so), by name. Empty when no directory is set or it does not exist.
 */
export async function findUserBinaries(names: readonly string[], options: Pick<CacheOptions, 'binariesDir' | 'env'> = {}): Promise<Record<string, string>> {
  const dir = resolveBinariesDir(options);
  const found: Record<string, string> = {};
  if (dir === undefined || !(await isDirectory(dir))) return found;
  for (const name of names) {
    const candidate = await userBinary(dir, name);
    if (candidate) found[name] = candidate;
  }
  return found;
}

/** One binary from its source, extracted into the cache once; returns the absolute path to run. */
async function ensureSource(binary: BinarySource, options: CacheOptions = {}): Promise<string> {
  const sink = options.sink ?? nullSink;
  const cacheDir = resolveCacheDir(options);
  const verify = options.verify ?? false;
  const entry = entryPaths(cacheDir, binary);
  const first = await checkEntry(entry, binary, verify);
  if (first.hit) return entry.file;
  if (first.reason !== 'not extracted') {
    log(sink, 'warn', `Cached ${binary.name} ${first.reason}; extracting it again`, { binary: binary.name, path: entry.file });
    // Invalidate first, so that no later look (ours after the lock, or another process's) trusts it.
    await rm(entry.record, { force: true }).catch(() => {});
  }

  await checkSourceFile(binary);
  try {
    await mkdir(entry.dir, { recursive: true, mode: 0o755 });
  } catch (error) {
    throw cacheError(error, { binary: binary.name, cacheDir, path: entry.dir });
  }

  const release = await acquireLock(entry, binary, cacheDir, sink, options.signal);
  if (release === 'done-by-other') return entry.file;
  try {
    // Another process may have finished between our first look and taking the lock.
    const again = await checkEntry(entry, binary, false);
    if (again.hit) return entry.file;
    await removeStaleTemps(entry.dir, binary.name);
    await extract(entry, binary, cacheDir, sink, options.signal);
    return entry.file;
  } finally {
    await release();
  }
}

/** Why a cache entry cannot be used, or that it can. */
type EntryCheck = { hit: true } | { hit: false; reason: string };

async function checkEntry(entry: EntryPaths, binary: Pick<BinarySource, 'sha256' | 'size'>, verify: boolean): Promise<EntryCheck> {
  let record: Partial<VerificationRecord>;
  try {
    record = JSON.parse(await readFile(entry.record, 'utf8')) as Partial<VerificationRecord>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { hit: false, reason: 'not extracted' };
    return { hit: false, reason: 'has an unreadable verification record' };
  }
  let st;
  try {
    st = await stat(entry.file);
  } catch {
    return { hit: false, reason: 'is missing although its record exists' };
  }
  if (!st.isFile() || (st.mode & 0o111) === 0) return { hit: false, reason: 'is not an executable file' };
  if (record.sha256 !== binary.sha256 || record.size !== binary.size) return { hit: false, reason: 'has a record for other content' };
  if (st.size !== record.size) return { hit: false, reason: `has the wrong size (${st.size} bytes, expected ${record.size})` };
  if (st.ino !== record.ino || st.mtimeMs !== record.mtimeMs) return { hit: false, reason: 'was replaced or modified after extraction' };
  if (verify) {
    const actual = await sha256OfFile(entry.file);
    if (actual !== binary.sha256) return { hit: false, reason: `has the wrong content (sha256 ${actual.slice(0, 12)}…, expected ${binary.sha256.slice(0, 12)}…)` };
  }
  return { hit: true };
}

/** Checks the source file exists with the size its manifest gives. */
async function checkSourceFile(binary: BinarySource): Promise<void> {
  let st;
  try {
    st = await stat(binary.file);
  } catch (error) {
    throw new EnvironmentError(`The archive of ${binary.name} is missing: ${binary.file}`, { hint: binary.hint, cause: error });
  }
  if (st.size !== binary.fileSize) {
    throw new EnvironmentError(`The archive of ${binary.name} has ${st.size} bytes, the manifest says ${binary.fileSize}: ${binary.file}`, { hint: binary.hint });
  }
}

/** The stream that turns a source file of `format` into the binary. */
function decompressor(format: BinaryFormat): Transform {
  const chunkSize = 256 << 10;
  return format === 'brotli' ? createBrotliDecompress({ chunkSize }) : createGunzip({ chunkSize });
}

/** Streams source file -> decompress -> sha256 -> temp file, checks it, then renames it into place and writes the record. */
async function extract(entry: EntryPaths, binary: BinarySource, cacheDir: string, sink: EventSink, signal?: AbortSignal): Promise<void> {
  const archive = binary.file;
  const temp = path.join(entry.dir, `.${binary.name}.${process.pid}.${randomBytes(4).toString('hex')}.partial`);
  const task = `extract:${binary.name}`;
  const label = `Extracting ${binary.name}`;
  let handle: FileHandle | undefined;
  try {
    handle = await open(temp, 'wx', 0o600);
  } catch (error) {
    throw cacheError(error, { binary: binary.name, cacheDir, path: temp });
  }
  try {
    let reportedBytes = 0;
    let reportedAt = performance.now();
    sink.emit({ type: 'progress', task, label, current: 0, total: binary.size, unit: 'bytes' });
    const meter = digestStream((bytes) => {
      const now = performance.now();
      if (bytes - reportedBytes >= progressEveryBytes || now - reportedAt >= progressEveryMs) {
        reportedBytes = bytes;
        reportedAt = now;
        sink.emit({ type: 'progress', task, label, current: bytes, total: binary.size, unit: 'bytes' });
      }
    });
    const input = createReadStream(archive, { highWaterMark: 1 << 20 });
    await pipeline([input, decompressor(binary.format), meter.stream, fileWriter(handle)], signal ? { signal } : {});
    const { sha256: digest, bytes } = meter.result();
    if (digest !== binary.sha256 || bytes !== binary.size) {
      throw new EnvironmentError(`Extracted ${binary.name} does not match its manifest`, {
        details: [
          `expected sha256 ${binary.sha256}, ${binary.size} bytes`,
          `got      sha256 ${digest}, ${bytes} bytes`,
          `source: ${archive}`,
          `cache: ${cacheDir} (nothing was kept)`,
        ],
        hint: binary.hint,
      });
    }
    await handle.chmod(0o755);
    await handle.close();
    handle = undefined;
    await rename(temp, entry.file);
  } catch (error) {
    await handle?.close().catch(() => {});
    await rm(temp, { force: true }).catch(() => {});
    if (signal?.aborted) throw error;
    if (isZlibError(error)) {
      throw new EnvironmentError(`The archive of ${binary.name} is not a valid ${binary.format} stream: ${archive}`, {
        details: [error instanceof Error ? error.message : String(error), `cache: ${cacheDir} (nothing was kept)`],
        hint: binary.hint,
        cause: error,
      });
    }
    throw cacheError(error, { binary: binary.name, cacheDir, path: temp, needBytes: binary.size });
  }
  await syncDirectory(entry.dir);
  await writeRecord(entry, binary, cacheDir);
  sink.emit({ type: 'progress', task, label, current: binary.size, total: binary.size, unit: 'bytes', done: true });
}

async function writeRecord(entry: EntryPaths, binary: BinarySource, cacheDir: string): Promise<void> {
  try {
    const st = await stat(entry.file);
    const record: VerificationRecord = {
      name: binary.name,
      sha256: binary.sha256,
      size: st.size,
      mtimeMs: st.mtimeMs,
      ino: st.ino,
      extractedAt: new Date().toISOString(),
    };
    await writeFileAtomic(entry.record, JSON.stringify(record, null, 2) + '\n');
  } catch (error) {
    throw cacheError(error, { binary: binary.name, cacheDir, path: entry.record });
  }
}

/**
 * Takes the entry's lock (a lock file like the install dir's, process/lock.ts), waiting while a
 * live process holds it. Returns the release function, or `done-by-other` when the holder
 * finished the entry while we waited.
 */
async function acquireLock(
  entry: EntryPaths,
  binary: BinarySource,
  cacheDir: string,
  sink: EventSink,
  signal?: AbortSignal,
): Promise<(() => Promise<void>) | 'done-by-other'> {
  let told = false;
  for (;;) {
    signal?.throwIfAborted();
    let attempt: LockAttempt;
    try {
      attempt = await tryLockFile(entry.lock, { command: `extract ${binary.name}`, events: sink, staleAfterMs });
    } catch (error) {
      throw cacheError(error, { binary: binary.name, cacheDir, path: entry.lock });
    }
    if ('lock' in attempt) return () => attempt.lock.release();
    if (!told) {
      told = true;
      log(sink, 'info', `Waiting for another provisioner process to extract ${binary.name}`, { binary: binary.name, lock: entry.lock });
    }
    await sleep(lockPollMs, signal);
    signal?.throwIfAborted();
    if ((await checkEntry(entry, binary, false)).hit) return 'done-by-other';
  }
}

/** Removes temp files of this binary left by killed extractions (untouched for a minute). */
async function removeStaleTemps(dir: string, name: string): Promise<void> {
  const prefix = `.${name}.`;
  for (const file of await readdir(dir)) {
    if (!file.startsWith(prefix) || !file.endsWith('.partial')) continue;
    const full = path.join(dir, file);
    const st = await stat(full).catch(() => undefined);
    if (st && Date.now() - st.mtimeMs > staleAfterMs) await rm(full, { force: true }).catch(() => {});
  }
}

/** The state of one bundled binary in the cache, as `provisioner version` shows it. */
export interface CacheEntryStatus {
  name: string;
  path: string;
  /**
   * `ready`: usable; `absent`: not extracted yet; `stale`: changed since extraction (re-extracted on next use);
   * `corrupt`: the extracted content differs (with verify); `damaged`: not extracted, and its archive does not
   * hold the manifest's binary (with verify; extracting it would fail).
   */
  state: 'ready' | 'absent' | 'stale' | 'corrupt' | 'damaged';
  /** True when the content was re-hashed (verify). */
  verified: boolean;
  reason?: string;
}

/**
 * Reports, without extracting anything, what the cache holds for each binary of the
 * catalog (for an installed release: this platform's package of each). With `verify`,
 * every present entry is re-hashed, and a corrupt one has its record removed so the next
 * command extracts it again; an entry not extracted yet has its archive checked instead.
 */
export async function inspectCache(catalog: BinaryCatalog, options: Pick<CacheOptions, 'cacheDir' | 'env' | 'verify'> = {}): Promise<CacheEntryStatus[]> {
  const cacheDir = resolveCacheDir(options);
  const verify = options.verify ?? false;
  const statuses: CacheEntryStatus[] = [];
  // One at a time with verify: re-hashing several 100 MB files at once only thrashes the disk.
  for (const { name } of catalog.binaries) {
    let source: BinarySource;
    try {
      [source] = (await catalogSources(catalog, [name])) as [BinarySource];
    } catch (error) {
      if (!(error instanceof EnvironmentError)) throw error;
      statuses.push({ name, path: '', state: 'absent', verified: false, reason: error.message });
      continue;
    }
    statuses.push(await inspectSource(source, cacheDir, verify));
  }
  return statuses;
}

async function inspectSource(binary: BinarySource, cacheDir: string, verify: boolean): Promise<CacheEntryStatus> {
  const { name } = binary;
  const entry = entryPaths(cacheDir, binary);
  const quick = await checkEntry(entry, binary, false);
  if (!quick.hit) {
    const absent = quick.reason === 'not extracted';
    if (!(verify && absent)) return { name, path: entry.file, state: absent ? 'absent' : 'stale', verified: false, reason: quick.reason };
    const problem = await archiveProblem(binary);
    if (problem) return { name, path: binary.file, state: 'damaged', verified: true, reason: `${problem}. ${binary.hint}` };
    return { name, path: entry.file, state: 'absent', verified: true, reason: 'not extracted; its archive holds the binary' };
  }
  if (!verify) return { name, path: entry.file, state: 'ready', verified: false };
  const full = await checkEntry(entry, binary, true);
  if (full.hit) return { name, path: entry.file, state: 'ready', verified: true };
  await rm(entry.record, { force: true });
  return { name, path: entry.file, state: 'corrupt', verified: true, reason: full.reason };
}

/** Why `binary`'s archive would not extract to the manifest's binary, or undefined when it would: streamed and hashed, nothing written. */
async function archiveProblem(binary: BinarySource): Promise<string | undefined> {
  const digest = digestStream();
  try {
    await checkSourceFile(binary);
    await pipeline(createReadStream(binary.file, { highWaterMark: 1 << 20 }), decompressor(binary.format), digest.stream.resume());
  } catch (error) {
    if (error instanceof EnvironmentError) return error.message;
    if (isZlibError(error)) return `The archive of ${binary.name} is not a valid ${binary.format} stream: ${binary.file}`;
    throw error;
  }
  const { sha256, bytes } = digest.result();
  if (sha256 === binary.sha256 && bytes === binary.size) return undefined;
  return `The archive of ${binary.name} holds other content (sha256 ${sha256.slice(0, 12)}…, ${bytes} bytes; the manifest says ${binary.sha256.slice(0, 12)}…, ${binary.size}): ${binary.file}`;
}

/**
 * A pass-through stream that hashes (sha256) and counts what flows through it; `onChunk`
 * sees the running byte count (extraction's progress). Resume it to use it as a sink. Read
 * `result()` once the stream has ended; the digest is kept, so reading it again gives the same.
 */
function digestStream(onChunk?: (bytes: number) => void): { stream: Transform; result(): { sha256: string; bytes: number } } {
  const hash = createHash('sha256');
  let bytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      bytes += chunk.length;
      onChunk?.(bytes);
      callback(null, chunk);
    },
  });
  let sha256: string | undefined;
  return { stream, result: () => ({ sha256: (sha256 ??= hash.digest('hex')), bytes }) };
}

export interface CacheErrorContext {
  binary: string;
  cacheDir: string;
  /** The file or directory the failing call touched. */
  path: string;
  /** Bytes the extraction needs, for the disk-full hint. */
  needBytes?: number;
}

/** Turns a file-system failure in the cache into an EnvironmentError with the cache path and the next step. */
export function cacheError(error: unknown, context: CacheErrorContext): unknown {
  if (error instanceof ProvisionerError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const moveHint = `or set ${cacheDirEnv} to a directory on another disk`;
  switch (code) {
    case 'ENOSPC':
    case 'EDQUOT': {
      const need = context.needBytes !== undefined ? ` at least ${Math.ceil(context.needBytes / (1 << 20))} MiB` : ' space';
      return new EnvironmentError(`No space left to extract ${context.binary} into the binary cache ${context.cacheDir}`, {
        details: [`${code} writing ${context.path}`],
        hint: `Free${need} on the disk holding ${context.cacheDir}, ${moveHint}.`,
        cause: error,
      });
    }
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new EnvironmentError(`The binary cache ${context.cacheDir} is not writable (needed for ${context.binary})`, {
        details: [`${code} on ${context.path}`],
        hint: `Make ${context.cacheDir} writable by this user, ${moveHint}.`,
        cause: error,
      });
    case 'ENOTDIR':
    case 'EEXIST':
      return new EnvironmentError(`The binary cache ${context.cacheDir} is not a usable directory (needed for ${context.binary})`, {
        details: [`${code} on ${context.path}`],
        hint: `Remove the file in the way at ${context.path}, ${moveHint}.`,
        cause: error,
      });
    default:
      return error;
  }
}

/** A gzip (`Z_…`) or brotli (`ERR__ERROR_…`, e.g. ERR__ERROR_FORMAT_PADDING_2) decoding error of node:zlib. */
function isZlibError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && (code.startsWith('Z_') || code.startsWith('ERR__ERROR_'));
}

/**
 * A Writable onto an open FileHandle that fsyncs on end and leaves closing to the
 * caller. (`FileHandle.createWriteStream({ autoClose: false })` keeps a reference on
 * the handle, after which `handle.close()` never resolves.)
 */
function fileWriter(handle: FileHandle): Writable {
  return new Writable({
    highWaterMark: 1 << 20,
    write(chunk: Buffer, _encoding, callback) {
      writeAll(handle, chunk).then(() => callback(), callback);
    },
    final(callback) {
      handle.sync().then(() => callback(), callback);
    },
  });
}

async function writeAll(handle: FileHandle, chunk: Buffer): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}

/** Best effort: makes the rename durable. Not every platform can fsync a directory. */
async function syncDirectory(dir: string): Promise<void> {
  try {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Durability of the rename only; the entry is still correct without it.
  }
}

async function userBinary(dir: string, name: string): Promise<string | undefined> {
  const candidate = path.join(dir, name);
  try {
    const st = await stat(candidate);
    if (!st.isFile()) return undefined;
    await access(candidate, fsConstants.X_OK);
    return candidate;
  } catch {
    return undefined;
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  return (await stat(dir).catch(() => undefined))?.isDirectory() ?? false;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
