/**
 * `provisioner version`: the CLI version and every bundled component — binaries with
 * their version, source module, digest, size and cache state, and the providers'
 * component manifests — as one `result` event (an aligned table as text, the report
 * as `data` for `--output json`).
 *
 * When the bundle is missing or broken, the result still carries the CLI version and
 * says the bundle is missing; then the EnvironmentError is thrown, so the command
 * exits with the environment code (4) and prints how to build the bundle. A script
 * can therefore rely on exit 0 meaning "CLI and bundle are both usable".
 */
import { EnvironmentError } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { findUserBinaries, inspectCache, resolveBinariesDir, resolveCacheDir, type CacheEntryStatus } from '../embedded/cache.js';
import { loadBinaryCatalog, resolveBundleDir, type BinaryCatalog } from '../embedded/catalog.js';
import type { BundledBinary, BundledComponents, Platform } from '../embedded/manifest.js';
import { formatTable } from '../text-table.js';
import { cliVersion } from '../version.js';

export interface VersionOptions {
  /** Bundle directory. Default: `$PROVISIONER_BUNDLE_DIR`, else `<package root>/bundle`. */
  bundleDir?: string;
  /** Cache directory. Default: `$PROVISIONER_CACHE_DIR`, else `$XDG_CACHE_HOME/provisioner`, else `~/.cache/provisioner`. */
  cacheDir?: string;
  /** The user's own binaries. Default: `$PROVISIONER_BINARIES_DIR`, else none. */
  binariesDir?: string;
  /** Re-hash every cached binary (reads every file: seconds, not milliseconds). Default: false. */
  verify?: boolean;
  /** Environment for the `PROVISIONER_*` defaults. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
}

export interface BinaryVersion {
  name: string;
  version: string;
  /** `module@moduleVersion` the binary was built from. */
  source: string;
  module: string;
  moduleVersion: string;
  package: string;
  sha256: string;
  size: number;
  compressedSize: number;
  shipped: boolean;
  cache: { state: CacheEntryStatus['state']; verified: boolean; path: string; reason?: string };
  /** Set when the user's binaries directory provides this binary: it is used instead of the bundle's. */
  userBinary?: string;
}

export interface ComponentVersion extends BundledComponents {
  /** Absolute path of the components YAML (the manifest's path is relative to the bundle). */
  file: string;
}

export interface VersionReport {
  cli: string;
  node: string;
  bundle:
    | { state: 'present'; dir: string; goVersion: string; createdAt: string; recipeHash: string }
    /** An installed package: binaries from its platform packages. */
    | { state: 'release'; dir: string; version: string; platform: string; goVersion: string; createdAt: string }
    | { state: 'missing'; dir: string; message: string; hint?: string };
  cacheDir: string;
  binariesDir?: string;
  binaries: BinaryVersion[];
  components: ComponentVersion[];
}

/** Builds the report, emits it as a `version` result, and throws when the bundle is unusable. */
export async function showVersion(options: VersionOptions, sink: EventSink): Promise<VersionReport> {
  const env = options.env ?? process.env;
  const cacheDir = resolveCacheDir({ cacheDir: options.cacheDir, env });
  const binariesDir = resolveBinariesDir({ binariesDir: options.binariesDir, env });
  const base = { cli: cliVersion, node: process.version, cacheDir, ...(binariesDir ? { binariesDir } : {}) };

  let catalog: BinaryCatalog;
  try {
    catalog = await loadBinaryCatalog({ bundleDir: options.bundleDir, env });
  } catch (error) {
    if (!(error instanceof EnvironmentError)) throw error;
    const report: VersionReport = {
      ...base,
      bundle: { state: 'missing', dir: resolveBundleDir({ bundleDir: options.bundleDir, env }), message: error.message, ...(error.hint ? { hint: error.hint } : {}) },
      binaries: [],
      components: [],
    };
    sink.emit({ type: 'result', kind: 'version', text: formatVersionReport(report), data: report });
    throw error;
  }

  const cache = await inspectCache(catalog, { cacheDir, env, verify: options.verify ?? false });
  const own = await findUserBinaries(catalog.binaries.map((b) => b.name), { binariesDir, env });
  const binaries = catalogBinaries(catalog).map((b, i): BinaryVersion => {
    const entry = cache[i] as CacheEntryStatus;
    const ownPath = own[b.name];
    return {
      name: b.name,
      version: b.version,
      source: `${b.module}@${b.moduleVersion}`,
      module: b.module,
      moduleVersion: b.moduleVersion,
      package: b.package,
      sha256: b.sha256,
      size: b.size,
      compressedSize: b.fileSize,
      shipped: b.shipped,
      cache: { state: entry.state, verified: entry.verified, path: entry.path, ...(entry.reason ? { reason: entry.reason } : {}) },
      ...(ownPath ? { userBinary: ownPath } : {}),
    };
  });
  for (const b of binaries) {
    if (b.cache.state === 'corrupt') {
      log(sink, 'warn', `Cached ${b.name} ${b.cache.reason ?? 'is corrupt'}; it will be extracted again on next use`, { binary: b.name, path: b.cache.path });
    }
    if (b.cache.state === 'damaged') log(sink, 'warn', b.cache.reason ?? `The archive of ${b.name} is damaged`, { binary: b.name, path: b.cache.path });
  }
  const report: VersionReport = {
    ...base,
    bundle:
      catalog.kind === 'bundle'
        ? { state: 'present', dir: catalog.dir, goVersion: catalog.manifest.goVersion, createdAt: catalog.manifest.createdAt, recipeHash: catalog.manifest.recipeHash }
        : { state: 'release', dir: catalog.dir, version: catalog.manifest.version, platform: catalog.platform, goVersion: catalog.manifest.goVersion, createdAt: catalog.manifest.createdAt },
    binaries,
    components: catalog.components.map((c) => ({ ...c, file: catalog.componentsPath(c) })),
  };
  sink.emit({ type: 'result', kind: 'version', text: formatVersionReport(report), data: report });
  return report;
}

/** Each binary of the catalog as this machine gets it: a bundle's archive, or this platform's build in its package. */
function catalogBinaries(catalog: BinaryCatalog): (Omit<BundledBinary, 'archive' | 'archiveSha256' | 'compressedSize'> & { fileSize: number })[] {
  if (catalog.kind === 'bundle') return catalog.binaries.map((b) => ({ ...b, fileSize: b.compressedSize }));
  return catalog.binaries.map((b) => {
    const build = b.platforms[catalog.platform as Platform];
    return { ...b, sha256: build?.sha256 ?? '', size: build?.size ?? 0, fileSize: build?.fileSize ?? 0, shipped: true };
  });
}

/** The human form of the report: a header and two aligned tables. */
function formatVersionReport(report: VersionReport): string {
  const lines = [`provisioner ${report.cli} (node ${report.node})`];
  if (report.bundle.state === 'missing') {
    lines.push(`bundle  missing: ${report.bundle.dir}`);
    return lines.join('\n') + '\n';
  }
  const go = report.bundle.goVersion.replace(/^go version /, '');
  if (report.bundle.state === 'release') lines.push(`release ${report.bundle.dir} (${report.bundle.platform} packages, ${go}, built ${report.bundle.createdAt})`);
  else lines.push(`bundle  ${report.bundle.dir} (${go}, built ${report.bundle.createdAt}, recipe ${report.bundle.recipeHash.slice(0, 12)})`);
  lines.push(`cache   ${report.cacheDir}`);
  if (report.binariesDir) lines.push(`own     ${report.binariesDir} (PROVISIONER_BINARIES_DIR: used before the bundle)`);
  lines.push('');
  lines.push(
    ...formatTable(
      ['BINARY', 'VERSION', 'SOURCE', 'SHA256', 'SIZE', 'GZIP', 'SHIPPED', 'CACHE'],
      report.binaries.map((b) => [
        b.name,
        b.version,
        b.source,
        b.sha256.slice(0, 12),
        mib(b.size),
        mib(b.compressedSize),
        b.shipped ? 'yes' : 'no (dev)',
        b.userBinary ? `own binary: ${b.userBinary}` : cacheText(b.cache),
      ]),
      { alignRight: (_, column) => column === 4 || column === 5 },
    ),
  );
  lines.push('');
  lines.push(
    ...formatTable(
      ['PROVIDER', 'TYPE', 'VERSION', 'NAMESPACE', 'BINARY', 'SHA256'],
      report.components.map((c) => [c.provider, c.type, c.version, c.namespace, c.binary ?? '(CRDs only)', c.sha256.slice(0, 12)]),
    ),
  );
  return lines.join('\n') + '\n';
}

function cacheText(cache: BinaryVersion['cache']): string {
  switch (cache.state) {
    case 'ready':
      return cache.verified ? 'extracted, verified' : 'extracted';
    case 'absent':
      return cache.reason ?? 'not extracted';
    case 'stale':
      return 'changed, re-extracted on use';
    case 'corrupt':
      return 'CORRUPT, re-extracted on use';
    case 'damaged':
      return 'DAMAGED archive, cannot be extracted';
  }
}

function mib(bytes: number): string {
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}
