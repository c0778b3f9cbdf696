/**
 * `npm run release:pack`: builds the shipped binaries for every release target and packs
 * the npm packages a release publishes (it publishes nothing itself):
 *
 *   provisioner-<version>.tgz                      JavaScript, manifests, component YAMLs and
 *                                                  release/manifest.json (every binary's sha256
 *                                                  per platform); no binary, no install script
 *   provisioner-<binary>-<os>-<cpu>-<version>.tgz  @provisioner/<binary>-<os>-<cpu>: one binary,
 *                                                  with `os`/`cpu` so npm installs only the host's
 *
 * The main package lists every platform package in `optionalDependencies` at exactly its
 * own version. Every binary is shipped brotli-compressed (`bin/<name>.br`, extracted into the
 * cache on first use): at quality 11 it is a quarter to a third smaller than the gzip npm
 * would give an executable (docs/benchmarks.md), and every package stays well under the
 * 80 MiB some registry mirrors accept. Quality 11 compresses at about 3 s of one core per
 * MiB, so each compressed binary is kept in the build cache under its sha256 and quality.
 *
 * Every binary is checked to be a well-formed executable for its target (ELF or Mach-O
 * header, static on linux, signed on darwin/arm64), and every packed tarball to hold its
 * binary with an executable mode. Sizes go to stdout and `<out>/report.json`.
 *
 * Usage: tsx scripts/release/pack.ts [--targets all|host|os/arch,...] [--out dir] [--brotli-quality N]
 *   --targets         which targets to build and pack (default: all, see recipe.ts releaseTargets)
 *   --out             output directory (default: <repo>/.cache/release); emptied first
 *   --brotli-quality  0-11 (default: 11, `releaseBrotliQuality`); lower packs faster and larger
 * Environment: PROVISIONER_BUILD_CACHE, as for `npm run bundle`.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, copyFile, cp, mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { constants as zlibConstants, createBrotliCompress, createGunzip } from 'node:zlib';
import { execa } from 'execa';
import { list as listTar } from 'tar';
import {
  platformPackageName,
  releaseDirName,
  releaseSchemaVersion,
  type BundleManifest,
  type BundledComponents,
  type Platform,
  type PlatformBinary,
  type ReleasedBinary,
  type ReleaseManifest,
} from '../../src/embedded/manifest.js';
import { mapLimit } from '../../src/concurrency.js';
import { buildBundle, defaultBuildCache } from '../bundle/build.js';
import { hostTarget, parseTarget, releaseTargets, targetPlatform, type Target } from '../bundle/recipe.js';
import { headerBytes, readExecutableFormat } from './executable-format.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Brotli quality of a release's binaries: the smallest (docs/benchmarks.md). */
export const releaseBrotliQuality = 11;
/** Brotli window: 16 MiB, the largest a standard decoder takes without the large-window flag. */
const brotliWindowBits = 24;
/** A package whose unpacked size is over this fails the pack. */
export const maxPackageBytes = 72 << 20;
/** What the main package ships besides its package.json (README.md rides along by npm's rules). */
const mainPackageFiles = ['bin', 'dist', 'manifests', releaseDirName];

interface RepoPackage {
  name: string;
  version: string;
  description: string;
  type: string;
  license: string;
  bin: Record<string, string>;
  engines: Record<string, string>;
  dependencies: Record<string, string>;
}

/** One packed tarball, as `npm pack --json` describes it. */
export interface PackedPackage {
  name: string;
  /** The platform a platform package is for (npm installs it only there); absent for the main package, which every platform installs. */
  platform?: Platform;
  version: string;
  tarball: string;
  packedBytes: number;
  unpackedBytes: number;
  files: number;
}

export interface PackReport {
  version: string;
  targets: string[];
  seconds: number;
  packages: PackedPackage[];
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

export function parseTargets(text: string): Target[] {
  if (text === 'all') return [...releaseTargets];
  if (text === 'host') return [hostTarget()];
  return text.split(',').map(parseTarget);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      targets: { type: 'string', default: 'all' },
      out: { type: 'string', default: path.join(repoRoot, '.cache', 'release') },
      'brotli-quality': { type: 'string', default: String(releaseBrotliQuality) },
    },
  });
  const brotliQuality = Number(values['brotli-quality']);
  if (!Number.isInteger(brotliQuality) || brotliQuality < 0 || brotliQuality > 11) throw new Error(`--brotli-quality: "${values['brotli-quality']}" is not an integer from 0 to 11`);
  const report = await releasePack({ targets: parseTargets(values.targets), outDir: path.resolve(values.out), brotliQuality });
  process.stdout.write(formatReport(report));
}

export interface ReleasePackOptions {
  targets: readonly Target[];
  outDir: string;
  /**
   * Compile the CLI (`npm run build`) first. Default true. The npx e2e passes false after
   * `ensureBuilt()`: tsc rewrites dist/ in place, and the tests in the other lane load dist/
   * (one read a half-written `store.js` in a CI run).
   */
  compileCli?: boolean;
  /** Brotli quality, 0-11. Default `releaseBrotliQuality` (11). The npx e2e packs at a low one: it tests the format, not the size. */
  brotliQuality?: number;
}

/** Builds, stages, checks and packs; returns the sizes of every tarball. */
export async function releasePack(options: ReleasePackOptions): Promise<PackReport> {
  const started = Date.now();
  const repoPackage = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as RepoPackage;
  const { version } = repoPackage;
  const outDir = options.outDir;
  await rm(outDir, { recursive: true, force: true });
  const stageDir = path.join(outDir, 'stage');
  const tarballDir = path.join(outDir, 'packages');
  await mkdir(tarballDir, { recursive: true });

  if (options.compileCli ?? true) {
    log('release:pack: compiling the CLI (npm run build)');
    await execa('npm', ['run', 'build'], { cwd: repoRoot, stdout: 'inherit', stderr: 'inherit' });
  }

  const released = new Map<string, ReleasedBinary>();
  let components: BundledComponents[] | undefined;
  let componentsDir: string | undefined;
  let goVersion = '';
  const platformPackages: string[] = [];
  const platformOf = new Map<string, Platform>();
  for (const target of options.targets) {
    const platform = targetPlatform(target);
    const bundleDir = path.join(outDir, 'bundles', platform);
    const manifest = await buildBundle({ outDir: bundleDir, target, shippedOnly: true });
    goVersion = manifest.goVersion;
    if (!components) {
      components = manifest.components;
      componentsDir = bundleDir;
    } else if (JSON.stringify(components) !== JSON.stringify(manifest.components)) {
      throw new Error(`the component YAMLs built for ${platform} differ from those of ${targetPlatform(options.targets[0] as Target)}: they must not depend on the target`);
    }
    // Two at a time: compression runs on the libuv pool, one core each.
    const compressed = await mapLimit(manifest.binaries, 2, (binary) => brotliArchive(bundleDir, binary, options.brotliQuality ?? releaseBrotliQuality));
    for (const [index, binary] of manifest.binaries.entries()) {
      const build = await stagePlatformPackage(bundleDir, manifest, binary.name, compressed[index]!, target, version, repoPackage.license, stageDir);
      platformPackages.push(build.package);
      platformOf.set(build.package, platform);
      const entry = released.get(binary.name) ?? {
        name: binary.name,
        version: binary.version,
        module: binary.module,
        moduleVersion: binary.moduleVersion,
        package: binary.package,
        ...(binary.links ? { links: binary.links } : {}),
        platforms: {},
      };
      entry.platforms[platform] = build;
      released.set(binary.name, entry);
    }
  }
  if (!components || !componentsDir) throw new Error('no target to pack');

  const releaseManifest: ReleaseManifest = {
    schemaVersion: releaseSchemaVersion,
    version,
    goVersion,
    createdAt: new Date().toISOString(),
    binaries: [...released.values()],
    components,
  };
  const mainDir = path.join(stageDir, 'provisioner');
  await stageMainPackage(mainDir, repoPackage, releaseManifest, componentsDir, platformPackages);

  const packages: PackedPackage[] = [];
  for (const dir of [mainDir, ...platformPackages.map((p) => path.join(stageDir, stageName(p)))]) {
    const packed = await npmPack(dir, tarballDir);
    const platform = platformOf.get(packed.name);
    packages.push(platform ? { ...packed, platform } : packed);
  }
  for (const pkg of packages) {
    if (pkg.unpackedBytes > maxPackageBytes) throw new Error(`${pkg.name} unpacks to ${mib(pkg.unpackedBytes)}, over the ${mib(maxPackageBytes)} limit`);
  }
  const report: PackReport = {
    version,
    targets: options.targets.map((t) => `${t.goos}/${t.goarch}`),
    seconds: (Date.now() - started) / 1000,
    packages,
  };
  await writeFile(path.join(outDir, 'report.json'), JSON.stringify(report, null, 2) + '\n');
  return report;
}

/** Directory name of a package's staging copy. */
function stageName(pkg: string): string {
  return pkg.replace(/^@/, '').replace('/', '-');
}

/** A binary's brotli stream, from the build cache or compressed into it from the bundle's gzip archive; returns its path. */
async function brotliArchive(bundleDir: string, binary: BundleManifest['binaries'][number], quality: number): Promise<string> {
  const cached = path.join(defaultBuildCache(), 'brotli', `${binary.sha256}-q${quality}-w${brotliWindowBits}.br`);
  if (await stat(cached).then((s) => s.isFile(), () => false)) {
    log(`  brotli ${binary.name}: in the build cache (${mib((await stat(cached)).size)})`);
    return cached;
  }
  const started = performance.now();
  await mkdir(path.dirname(cached), { recursive: true });
  const temp = `${cached}.${process.pid}.partial`;
  const compress = createBrotliCompress({
    params: {
      [zlibConstants.BROTLI_PARAM_QUALITY]: quality,
      [zlibConstants.BROTLI_PARAM_LGWIN]: brotliWindowBits,
      [zlibConstants.BROTLI_PARAM_SIZE_HINT]: binary.size,
    },
  });
  try {
    await pipeline(createReadStream(path.join(bundleDir, binary.archive)), createGunzip(), compress, createWriteStream(temp));
    await rename(temp, cached);
  } finally {
    await rm(temp, { force: true });
  }
  log(`  brotli ${binary.name}: ${mib(binary.size)} → ${mib((await stat(cached)).size)} at quality ${quality} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return cached;
}

/**
 * Writes `@provisioner/<binary>-<platform>`: package.json and `bin/<binary>.br`, after
 * checking the binary is an executable for the target.
 */
async function stagePlatformPackage(
  bundleDir: string,
  manifest: BundleManifest,
  name: string,
  brotli: string,
  target: Target,
  version: string,
  license: string,
  stageDir: string,
): Promise<PlatformBinary> {
  const platform: Platform = targetPlatform(target);
  const binary = manifest.binaries.find((b) => b.name === name);
  if (!binary) throw new Error(`the ${platform} bundle has no ${name}`);
  const pkg = platformPackageName(name, platform);
  const dir = path.join(stageDir, stageName(pkg));
  await mkdir(path.join(dir, 'bin'), { recursive: true });
  const archive = path.join(bundleDir, binary.archive);
  const executable = path.join(dir, 'bin', name);
  await pipeline(createReadStream(archive), createGunzip(), createWriteStream(executable, { mode: 0o755 }));
  await chmod(executable, 0o755);
  await checkExecutable(executable, target, `${name} for ${platform}`);

  await rm(executable);
  const file = `bin/${name}.br`;
  await copyFile(brotli, path.join(dir, file));
  const build: PlatformBinary = { package: pkg, file, format: 'brotli', sha256: binary.sha256, size: binary.size, fileSize: (await stat(brotli)).size };
  const [os, cpu] = platform.split('-') as [string, string];
  const packageJson = {
    name: pkg,
    version,
    description: `${name} ${binary.version} for ${platform}, built from ${binary.module}@${binary.moduleVersion} for provisioner`,
    license,
    os: [os],
    cpu: [cpu],
    files: ['bin'],
    // Yarn PnP and similar: keep the binary on disk so it can be executed.
    preferUnplugged: true,
  };
  await writeFile(path.join(dir, 'package.json'), JSON.stringify(packageJson, null, 2) + '\n');
  return build;
}

/** Throws unless `file` is a well-formed executable for `target` (static on linux, signed on darwin/arm64). */
export async function checkExecutable(file: string, target: Target, what: string): Promise<void> {
  const handle = await open(file, 'r');
  const head = Buffer.alloc(headerBytes);
  const { bytesRead } = await handle.read(head, 0, headerBytes, 0);
  await handle.close();
  let format;
  try {
    format = readExecutableFormat(head.subarray(0, bytesRead));
  } catch (error) {
    throw new Error(`${what} (${file}) is not a well-formed executable: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const problems: string[] = [];
  if (format.goos !== target.goos || format.goarch !== target.goarch) problems.push(`it is a ${format.container} for ${format.goos}/${format.goarch}`);
  if (target.goos === 'linux' && !format.static) problems.push('it needs a program interpreter (not static)');
  if (target.goos === 'darwin' && target.goarch === 'arm64' && !format.signed) problems.push('it has no code signature (arm64 macOS would refuse it)');
  if (problems.length) throw new Error(`${what} (${file}) is wrong: ${problems.join('; ')}`);
  log(`  checked ${what}: ${format.container} ${format.goos}/${format.goarch}${format.static ? ', static' : ''}${format.signed ? ', signed' : ''}`);
}

/** Writes the main `provisioner` package: JavaScript, manifests, component YAMLs and the release manifest. */
async function stageMainPackage(dir: string, repoPackage: RepoPackage, manifest: ReleaseManifest, componentsDir: string, platformPackages: readonly string[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const entry of ['bin', 'dist', 'manifests']) await cp(path.join(repoRoot, entry), path.join(dir, entry), { recursive: true });
  await cp(path.join(repoRoot, 'README.md'), path.join(dir, 'README.md'));
  const releaseDir = path.join(dir, releaseDirName);
  await cp(path.join(componentsDir, 'components'), path.join(releaseDir, 'components'), { recursive: true });
  await writeFile(path.join(releaseDir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  const packageJson = {
    name: repoPackage.name,
    version: repoPackage.version,
    description: repoPackage.description,
    type: repoPackage.type,
    license: repoPackage.license,
    bin: repoPackage.bin,
    engines: repoPackage.engines,
    files: mainPackageFiles,
    dependencies: repoPackage.dependencies,
    // Exact versions: the release manifest's sha256s are those of exactly these builds.
    optionalDependencies: Object.fromEntries(platformPackages.map((p) => [p, repoPackage.version])),
  };
  await writeFile(path.join(dir, 'package.json'), JSON.stringify(packageJson, null, 2) + '\n');
}

interface NpmPackJson {
  name: string;
  version: string;
  filename: string;
  size: number;
  unpackedSize: number;
  entryCount: number;
}

/** `npm pack` of one staged directory; checks every bin/ file in the tarball is executable. */
async function npmPack(dir: string, destination: string): Promise<PackedPackage> {
  const run = await execa('npm', ['pack', dir, '--json', '--pack-destination', destination], { cwd: destination });
  const [packed] = JSON.parse(run.stdout) as [NpmPackJson];
  const tarball = path.join(destination, packed.filename);
  const modes = new Map<string, number>();
  await listTar({ file: tarball, onReadEntry: (entry) => void modes.set(entry.path, entry.mode ?? 0) });
  const binaries = [...modes].filter(([file]) => /^package\/bin\/[^/]+$/.test(file) && !/\.(gz|br|js)$/.test(file));
  for (const [file, mode] of binaries) {
    if ((mode & 0o111) === 0) throw new Error(`${packed.name}: ${file} is not executable in ${tarball} (mode ${mode.toString(8)})`);
  }
  const packedBytes = (await stat(tarball)).size;
  log(`  packed ${packed.name}@${packed.version}: ${mib(packedBytes)} packed, ${mib(packed.unpackedSize)} unpacked, ${packed.entryCount} files`);
  return { name: packed.name, version: packed.version, tarball, packedBytes, unpackedBytes: packed.unpackedSize, files: packed.entryCount };
}

/** What `npm install provisioner` downloads on one platform: the main package and that platform's packages. */
export interface PlatformDownload {
  platform: Platform;
  packages: number;
  packedBytes: number;
}

/** The download of every platform the report has packages for, in the order they were packed. */
export function downloadsByPlatform(report: Pick<PackReport, 'packages'>): PlatformDownload[] {
  const main = report.packages.filter((p) => p.platform === undefined);
  const platforms = [...new Set(report.packages.flatMap((p) => (p.platform ? [p.platform] : [])))];
  return platforms.map((platform) => {
    const installed = [...main, ...report.packages.filter((p) => p.platform === platform)];
    return { platform, packages: installed.length, packedBytes: installed.reduce((a, p) => a + p.packedBytes, 0) };
  });
}

export function formatReport(report: PackReport): string {
  const rows = report.packages.map((p) => [p.name, mib(p.packedBytes), mib(p.unpackedBytes), String(p.files)]);
  const header = ['PACKAGE', 'PACKED', 'UNPACKED', 'FILES'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  const total = report.packages.reduce((a, p) => a + p.packedBytes, 0);
  return [
    `release:pack ${report.version} for ${report.targets.join(', ')} in ${report.seconds.toFixed(0)} s: ${report.packages.length} packages, ${mib(total)} packed`,
    line(header),
    ...rows.map(line),
    ...downloadsByPlatform(report).map((d) => `download on ${d.platform}: ${mib(d.packedBytes)} in ${d.packages} packages (provisioner and its ${d.platform} packages)`),
    '',
  ].join('\n');
}

function mib(bytes: number): string {
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    log(`release:pack failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
