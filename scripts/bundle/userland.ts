/**
 * The userland layer of the kube-proxy and flannel images: Debian's nft iptables
 * (xtables-nft-multi, its iptables/ip6tables(-save/-restore) names, every xtables
 * extension), the shared libraries those need down to libc and the dynamic loader, and
 * busybox (static) for the shell and the `cp` flannel's init container runs.
 *
 * Built at bundle time from Debian's packages, never from this machine's /usr: the
 * exact versions apt offers are fetched with `apt-get download` into the build cache,
 * under a key naming those versions (a Debian update rebuilds the layer), and unpacked
 * with `dpkg-deb -x`. The libraries are the closure of the ELF DT_NEEDED entries and
 * PT_INTERP of the staged files, looked up in the staged tree. The result is an
 * uncompressed tar with entries sorted by path, owned by 0:0, mtime 0, modes and symlinks
 * kept: the same packages give the same bytes.
 *
 * Linux only, for the architecture of this machine's dpkg (apt downloads that one).
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readFile, readlink, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { execa } from 'execa';
import type { BundledLayer, BundledLayerPackage } from '../../src/embedded/manifest.js';
import { sha256OfFile } from '../../src/files.js';
import { tarEntryHeader, tarEndOfArchive, tarPadding } from '../../src/nodeartifacts/oci-image.js';

/** Bumped when the layer's selection or layout changes, to rebuild cached layers. */
const layerRevision = '1';

/**
 * The packages: iptables and its Depends (`apt-cache depends iptables`: libip4tc2,
 * libip6tc2, libxtables12, netbase, libc6, libmnl0, libnetfilter-conntrack3,
 * libnfnetlink0, libnftnl11), and busybox-static. netbase gives /etc/protocols and
 * /etc/services, which iptables reads for protocol and port names. libc6's own
 * dependency libgcc-s1 is left out: no staged file names it (glibc loads it only to
 * unwind cancelled threads, and iptables starts none).
 */
export const userlandPackageNames = [
  'iptables', 'libip4tc2', 'libip6tc2', 'libxtables12', 'libmnl0', 'libnetfilter-conntrack3', 'libnfnetlink0', 'libnftnl11', 'libc6', 'netbase', 'busybox-static',
] as const;

/** The names xtables-nft-multi answers to (kube-proxy and flanneld call these), all in /usr/sbin. */
export const iptablesNames = ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore'] as const;
/** busybox applets linked in /bin (flannel's init container runs `sh -c` with two `cp`s). */
export const busyboxApplets = ['sh', 'cp', 'mkdir', 'cat', 'ls'] as const;

/** Debian's multiarch triplet of a dpkg architecture. */
const triplets: Record<string, string> = { amd64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

/** The layer as built: what the bundle's manifest records of it (`BundledLayer`, but for where it lands), and where it is in the build cache. */
export interface BuiltUserlandLayer extends Omit<BundledLayer, 'name' | 'archive'> {
  /** Uncompressed tar (in the build cache). */
  tarPath: string;
  /** Its gzip (level 9), what the bundle ships. */
  archivePath: string;
  /** Paths in the tar (no leading slash; directories end in `/`). */
  entries: string[];
  cached: boolean;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** The dpkg architecture of this machine, or undefined where there is no dpkg (not Debian). */
export async function dpkgArchitecture(): Promise<string | undefined> {
  try {
    return (await execa('dpkg', ['--print-architecture'])).stdout.trim();
  } catch {
    return undefined;
  }
}

/** The candidate version of each package; runs `apt-get update` once when apt knows none (no lists yet). */
async function candidateVersions(names: readonly string[]): Promise<BundledLayerPackage[]> {
  const query = async () => {
    const { stdout } = await execa('apt-cache', ['policy', ...names], { env: { LC_ALL: 'C' } });
    const versions = new Map<string, string>();
    let current: string | undefined;
    for (const line of stdout.split('\n')) {
      const pkg = /^(\S+):$/.exec(line);
      if (pkg) current = pkg[1];
      const candidate = /^\s+Candidate:\s+(\S+)/.exec(line);
      if (candidate && current && candidate[1] !== '(none)') versions.set(current, candidate[1]!);
    }
    return versions;
  };
  let versions = await query();
  if (names.some((n) => !versions.has(n))) {
    log('  userland: apt knows no candidate for some packages; running apt-get update once');
    await execa('apt-get', ['update'], { stdout: 'ignore', stderr: 'inherit' });
    versions = await query();
  }
  const missing = names.filter((n) => !versions.has(n));
  if (missing.length) throw new Error(`apt offers no version of ${missing.join(', ')}: the userland layer needs Debian's apt repositories (run apt-get update as root)`);
  return names.map((name) => ({ name, version: versions.get(name)! }));
}

/** Builds (or takes from `cacheRoot/userland/<key>`) the layer for this machine's architecture. */
export async function buildUserlandLayer(cacheRoot: string, architecture: string): Promise<BuiltUserlandLayer> {
  const triplet = triplets[architecture];
  if (!triplet) throw new Error(`userland layer: no multiarch triplet known for dpkg architecture ${architecture}`);
  const packages = await candidateVersions(userlandPackageNames);
  const key = createHash('sha256').update(JSON.stringify({ layerRevision, architecture, packages })).digest('hex');
  const dir = path.join(cacheRoot, 'userland', key);
  const metaPath = path.join(dir, 'layer.json');
  const tarPath = path.join(dir, 'userland.tar');
  const archivePath = path.join(dir, 'userland.tar.gz');
  try {
    const meta = JSON.parse(await readFile(metaPath, 'utf8')) as Omit<BuiltUserlandLayer, 'cached' | 'tarPath' | 'archivePath'>;
    await stat(archivePath);
    await stat(tarPath);
    return { ...meta, tarPath, archivePath, cached: true };
  } catch {
    // Not cached (or incomplete): build below.
  }

  const debs = path.join(dir, 'debs');
  const staging = path.join(dir, 'staging');
  await rm(staging, { recursive: true, force: true });
  await mkdir(debs, { recursive: true });
  await mkdir(staging, { recursive: true });
  // Exact versions: what the key names is what is downloaded.
  await execa('apt-get', ['download', ...packages.map((p) => `${p.name}=${p.version}`)], { cwd: debs, stdout: 'ignore', stderr: 'pipe' });
  for (const deb of (await readdir(debs)).filter((f) => f.endsWith('.deb')).sort()) await execa('dpkg-deb', ['-x', path.join(debs, deb), staging]);

  const tmpTar = `${tarPath}.tmp-${process.pid}`;
  const written = await writeUserlandTar(staging, triplet, tmpTar);
  await rename(tmpTar, tarPath);
  const tmpArchive = `${archivePath}.tmp-${process.pid}`;
  await pipeline(createReadStream(tarPath), createGzip({ level: 9 }), createWriteStream(tmpArchive));
  await rename(tmpArchive, archivePath);
  const meta = {
    sha256: written.sha256,
    archiveSha256: await sha256OfFile(archivePath),
    size: (await stat(tarPath)).size,
    compressedSize: (await stat(archivePath)).size,
    architecture,
    packages,
    entries: written.entries,
  };
  await rm(staging, { recursive: true, force: true });
  await writeFile(metaPath, JSON.stringify(meta, null, 2));
  return { ...meta, tarPath, archivePath, cached: false };
}

/**
 * Writes the layer's tar from a tree the packages were unpacked into (`staging`):
 * xtables-nft-multi and every extension, with the libraries they need, busybox, netbase's
 * /etc/protocols and /etc/services, and the symlinks the layer adds. Returns the tar's
 * sha256 and its member paths.
 */
export async function writeUserlandTar(
  staging: string,
  triplet: string,
  tarPath: string,
  readLinking: (file: string) => Promise<ElfLinking | undefined> = readElfLinking,
): Promise<{ sha256: string; entries: string[] }> {
  // The names Debian's alternatives would point at xtables-nft-multi on a host, and busybox's applets.
  const links: StagedLink[] = [
    ...iptablesNames.map((name) => ({ path: `usr/sbin/${name}`, target: 'xtables-nft-multi' })),
    ...busyboxApplets.map((name) => ({ path: `bin/${name}`, target: 'busybox' })),
  ];
  const roots = ['usr/sbin/xtables-nft-multi', 'bin/busybox', 'etc/protocols', 'etc/services'];
  const extensionsDir = `usr/lib/${triplet}/xtables`;
  for (const file of (await readdir(path.join(staging, extensionsDir))).filter((f) => f.endsWith('.so')).sort()) roots.push(`${extensionsDir}/${file}`);
  const selected = await selectWithLibraries(staging, roots, [`lib/${triplet}`, `usr/lib/${triplet}`], readLinking);

  const entries = await layerEntries(staging, selected, links);
  const hash = createHash('sha256');
  await pipeline(
    Readable.from(tarStream(staging, entries)),
    async function* (source: AsyncIterable<Buffer>) {
      for await (const chunk of source) {
        hash.update(chunk);
        yield chunk;
      }
    },
    createWriteStream(tarPath),
  );
  return { sha256: hash.digest('hex'), entries: entries.map((e) => e.path) };
}

/** A symlink the layer adds (not in any package). */
interface StagedLink {
  /** Path below the root, no leading slash. */
  path: string;
  target: string;
}

/** The dynamic-linking facts of an ELF file the selection needs. */
export interface ElfLinking {
  /** PT_INTERP: the dynamic loader's absolute path; undefined for a static binary. */
  interpreter?: string;
  /** DT_NEEDED library names. */
  needed: string[];
}

/**
 * `roots` plus everything they need to run: each symlink's target, each ELF file's
 * loader and DT_NEEDED libraries (searched in `libraryDirs`), recursively. Paths are
 * relative to `staging`; a library not found there is an error (never taken from the host).
 */
export async function selectWithLibraries(
  staging: string,
  roots: readonly string[],
  libraryDirs: readonly string[],
  readLinking: (file: string) => Promise<ElfLinking | undefined> = readElfLinking,
): Promise<Set<string>> {
  const selected = new Set<string>();
  const pending = [...roots];
  const take = async (relative: string, neededBy: string): Promise<void> => {
    if (!(await lstat(path.join(staging, relative)).catch(() => undefined))) throw new Error(`userland layer: ${relative} (needed by ${neededBy}) is in none of the packages`);
    pending.push(relative);
  };
  while (pending.length) {
    const relative = pending.pop()!;
    if (selected.has(relative)) continue;
    selected.add(relative);
    const file = path.join(staging, relative);
    const info = await lstat(file);
    if (info.isSymbolicLink()) {
      const target = await readlink(file);
      const resolved = target.startsWith('/') ? target.slice(1) : path.posix.join(path.posix.dirname(relative), target);
      await take(path.posix.normalize(resolved), relative);
      continue;
    }
    const linking = await readLinking(file);
    if (!linking) continue;
    if (linking.interpreter) await take(linking.interpreter.replace(/^\/+/, ''), relative);
    for (const name of linking.needed) {
      let found: string | undefined;
      for (const dir of libraryDirs) {
        if (await lstat(path.join(staging, dir, name)).catch(() => undefined)) {
          found = `${dir}/${name}`;
          break;
        }
      }
      if (!found) throw new Error(`userland layer: ${name} (needed by ${relative}) is in none of the packages; add its package to userlandPackageNames`);
      await take(found, relative);
    }
  }
  return selected;
}

/** One member of the layer tar. */
export interface LayerEntry {
  /** Path, no leading slash; directories end in `/`. */
  path: string;
  type: 'file' | 'directory' | 'symlink';
  /** Permission bits (e.g. 0o755). */
  mode: number;
  size: number;
  /** Symlink target. */
  linkname?: string;
}

/** The tar's members: the selected files with their staged modes, the added links, and every parent directory (0755); sorted by path. */
async function layerEntries(staging: string, selected: ReadonlySet<string>, links: readonly StagedLink[]): Promise<LayerEntry[]> {
  const entries = new Map<string, LayerEntry>();
  const addParents = (relative: string) => {
    for (let dir = path.posix.dirname(relative); dir !== '.'; dir = path.posix.dirname(dir)) entries.set(`${dir}/`, { path: `${dir}/`, type: 'directory', mode: 0o755, size: 0 });
  };
  for (const relative of selected) {
    const info = await lstat(path.join(staging, relative));
    addParents(relative);
    if (info.isSymbolicLink()) entries.set(relative, { path: relative, type: 'symlink', mode: 0o777, size: 0, linkname: await readlink(path.join(staging, relative)) });
    else if (info.isFile()) entries.set(relative, { path: relative, type: 'file', mode: info.mode & 0o7777, size: info.size });
    else throw new Error(`userland layer: ${relative} is neither a file nor a symlink`);
  }
  for (const link of links) {
    addParents(link.path);
    entries.set(link.path, { path: link.path, type: 'symlink', mode: 0o777, size: 0, linkname: link.target });
  }
  return [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

async function* tarStream(staging: string, entries: readonly LayerEntry[]): AsyncGenerator<Buffer> {
  for (const entry of entries) {
    yield tarEntryHeader(entry);
    if (entry.type !== 'file') continue;
    let read = 0;
    for await (const chunk of createReadStream(path.join(staging, entry.path))) {
      read += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
    if (read !== entry.size) throw new Error(`userland layer: ${entry.path} changed while it was read`);
    yield tarPadding(entry.size);
  }
  yield tarEndOfArchive();
}

const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const PT_LOAD = 1;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

/** PT_INTERP and DT_NEEDED of a 64-bit little-endian ELF file (amd64, arm64); undefined for anything else. */
export async function readElfLinking(file: string): Promise<ElfLinking | undefined> {
  const data = await readFile(file);
  if (data.length < 64 || data.readUInt32BE(0) !== 0x7f454c46 || data[4] !== 2 || data[5] !== 1) return undefined;
  const phoff = Number(data.readBigUInt64LE(0x20));
  const phentsize = data.readUInt16LE(0x36);
  const phnum = data.readUInt16LE(0x38);
  const segments = Array.from({ length: phnum }, (_, i) => {
    const at = phoff + i * phentsize;
    return { type: data.readUInt32LE(at), offset: Number(data.readBigUInt64LE(at + 8)), vaddr: Number(data.readBigUInt64LE(at + 0x10)), filesz: Number(data.readBigUInt64LE(at + 0x20)) };
  });
  const cString = (at: number) => data.toString('latin1', at, data.indexOf(0, at));
  const interpSegment = segments.find((s) => s.type === PT_INTERP);
  const dynamic = segments.find((s) => s.type === PT_DYNAMIC);
  const result: ElfLinking = { needed: [], ...(interpSegment ? { interpreter: cString(interpSegment.offset) } : {}) };
  if (!dynamic) return result;
  const neededOffsets: bigint[] = [];
  let strtab: bigint | undefined;
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.filesz; at += 16) {
    const tag = data.readBigInt64LE(at);
    const value = data.readBigUInt64LE(at + 8);
    if (tag === DT_NULL) break;
    if (tag === DT_NEEDED) neededOffsets.push(value);
    if (tag === DT_STRTAB) strtab = value;
  }
  if (strtab === undefined) return result;
  // DT_STRTAB is an address: find the file offset through the loadable segment holding it.
  const address = Number(strtab);
  const load = segments.find((s) => s.type === PT_LOAD && address >= s.vaddr && address < s.vaddr + s.filesz);
  if (!load) throw new Error(`${file}: DT_STRTAB at 0x${address.toString(16)} is in no loadable segment`);
  const strtabOffset = address - load.vaddr + load.offset;
  result.needed = neededOffsets.map((o) => cString(strtabOffset + Number(o)));
  return result;
}

