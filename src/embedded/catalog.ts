/**
 * The bundle catalog: finds the `bundle/` directory that `npm run bundle` builds,
 * reads and validates its `manifest.json`, and answers "which archive holds binary X"
 * and "which file holds provider Y's components".
 *
 * Where the binaries come from (`loadBinaryCatalog`; the first that applies wins;
 * a user's own binaries in `PROVISIONER_BINARIES_DIR` come before any of them, see cache.ts):
 *   1. the `bundleDir` option (a command-line flag, when a command offers one), else
 *      the environment variable `PROVISIONER_BUNDLE_DIR`: that bundle;
 *   2. `<package root>/bundle`, when it holds a manifest: a development checkout's
 *      bundle (`npm run bundle`). The package root is two directories above this file
 *      (so it works from `src/embedded/` under tsx/vitest and from `dist/embedded/`);
 *   3. `<package root>/release`, when it holds a manifest: an installed `provisioner`
 *      package, whose binaries are in the platform packages npm installed beside it
 *      (see release.ts).
 * With none of them, the error says how to build the bundle.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EnvironmentError } from '../errors.js';
import { binariesByName, bundleSchemaVersion, releaseDirName, type BundledBinary, type BundledComponents, type BundledLayer, type BundleManifest } from './manifest.js';
import { hostPlatform, loadReleaseCatalog, MissingLayerError, type ReleaseCatalog } from './release.js';

export { MissingLayerError };

/** Environment variable naming the bundle directory. */
export const bundleDirEnv = 'PROVISIONER_BUNDLE_DIR';

/** The package root: two levels above this file (`src/embedded/` or `dist/embedded/`). */
export const packageRoot: string = fileURLToPath(new URL('../..', import.meta.url)).replace(/[\\/]$/, '');

export interface CatalogOptions {
  /** Bundle directory. Default: `$PROVISIONER_BUNDLE_DIR`, else `<package root>/bundle`. */
  bundleDir?: string;
  /** Environment to read `PROVISIONER_BUNDLE_DIR` from. Default: `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** The `provisioner` package's root directory. Default: two levels above this file. */
  packageRoot?: string;
  /** Platform to run binaries on, in Node's names. Default: this machine's (`linux-x64`...). */
  platform?: string;
}

/** A dev bundle or an installed release: where a command's binaries and component YAMLs come from. */
export type BinaryCatalog = BundleCatalog | ReleaseCatalog;

/** Resolves the bundle directory: option > `$PROVISIONER_BUNDLE_DIR` > `<package root>/bundle`. */
export function resolveBundleDir(options: CatalogOptions = {}): string {
  const env = options.env ?? process.env;
  const chosen = options.bundleDir ?? nonEmpty(env[bundleDirEnv]) ?? path.join(options.packageRoot ?? packageRoot, 'bundle');
  return path.resolve(chosen);
}

/** Loads the catalog in the order the header of this file gives. */
export async function loadBinaryCatalog(options: CatalogOptions = {}): Promise<BinaryCatalog> {
  const env = options.env ?? process.env;
  const root = options.packageRoot ?? packageRoot;
  if (options.bundleDir !== undefined || nonEmpty(env[bundleDirEnv]) !== undefined) return loadCatalog(options);
  if (await isFile(path.join(root, 'bundle', 'manifest.json'))) return loadCatalog(options);
  const releaseDir = path.join(root, releaseDirName);
  if (await isFile(path.join(releaseDir, 'manifest.json'))) return loadReleaseCatalog(releaseDir, root, options.platform ?? hostPlatform());
  return loadCatalog(options);
}

/** The one-line next step for any missing or broken bundle. */
export function buildBundleHint(bundleDir: string): string {
  return (
    `Build the bundle: run \`npm run bundle\` in the package directory (${packageRoot}), ` +
    `or set ${bundleDirEnv} to a directory holding a built bundle (looked in ${bundleDir}).`
  );
}

/** A loaded, validated bundle manifest with lookups by binary name and by provider. */
export class BundleCatalog {
  readonly kind = 'bundle' as const;
  private readonly byName: ReadonlyMap<string, BundledBinary>;
  private readonly byProvider: ReadonlyMap<string, BundledComponents>;

  constructor(
    /** Absolute bundle directory; archive and component paths are relative to it. */
    readonly dir: string,
    readonly manifest: BundleManifest,
  ) {
    this.byName = binariesByName(manifest.binaries);
    this.byProvider = new Map(manifest.components.map((c) => [c.provider, c]));
  }

  get binaries(): readonly BundledBinary[] {
    return this.manifest.binaries;
  }

  get components(): readonly BundledComponents[] {
    return this.manifest.components;
  }

  /** Names of the binaries a release ships (`shipped: true`), in manifest order. */
  shippedNames(): string[] {
    return this.manifest.binaries.filter((b) => b.shipped).map((b) => b.name);
  }

  /** The binary called `name`, or the multi-call binary `name` is a link of; undefined when neither. */
  findBinary(name: string): BundledBinary | undefined {
    return this.byName.get(name);
  }

  /** The binary called `name` (or the one `name` is a link of); an EnvironmentError naming what the bundle does hold when absent. */
  binary(name: string): BundledBinary {
    const found = this.byName.get(name);
    if (!found) {
      throw new EnvironmentError(`The bundle in ${this.dir} has no binary named "${name}"`, {
        details: [`bundled binaries: ${[...this.byName.keys()].join(', ') || '(none)'}`],
        hint: `Rebuild the bundle with \`npm run bundle\` in ${packageRoot}, or put your own ${name} in PROVISIONER_BINARIES_DIR.`,
      });
    }
    return found;
  }

  /** The layer called `name` (e.g. `userland`); MissingLayerError when the bundle has none. */
  layer(name: string): BundledLayer {
    const found = this.manifest.layers?.find((l) => l.name === name);
    if (!found) {
      throw new MissingLayerError(name, `bundle in ${this.dir}`, `Rebuild the bundle with \`npm run bundle\` in ${packageRoot} on a Debian or Ubuntu machine of the nodes' architecture (it downloads the layer's packages with apt-get).`);
    }
    return found;
  }

  /** Absolute path of a layer's archive. */
  layerArchivePath(layer: BundledLayer): string {
    return path.join(this.dir, layer.archive);
  }

  /** The components of provider `provider` (e.g. `cluster-api`), or undefined. */
  findProvider(provider: string): BundledComponents | undefined {
    return this.byProvider.get(provider);
  }

  /** The components of provider `provider`; an EnvironmentError when absent. */
  provider(provider: string): BundledComponents {
    const found = this.byProvider.get(provider);
    if (!found) {
      throw new EnvironmentError(`The bundle in ${this.dir} has no components for provider "${provider}"`, {
        details: [`bundled providers: ${[...this.byProvider.keys()].join(', ') || '(none)'}`],
        hint: buildBundleHint(this.dir),
      });
    }
    return found;
  }

  /** The providers whose controllers run in `binary`. */
  providersOf(binary: string): BundledComponents[] {
    return this.manifest.components.filter((c) => c.binary === binary);
  }

  /** Absolute path of a binary's archive. */
  archivePath(binary: BundledBinary): string {
    return path.join(this.dir, binary.archive);
  }

  /** Absolute path of a provider's components YAML. */
  componentsPath(components: BundledComponents): string {
    return path.join(this.dir, components.file);
  }
}

/**
 * Reads and validates `<bundle dir>/manifest.json`. Throws EnvironmentError with the
 * `npm run bundle` hint when the bundle is missing, unreadable, malformed or of
 * another schema version.
 */
export async function loadCatalog(options: CatalogOptions = {}): Promise<BundleCatalog> {
  const dir = resolveBundleDir(options);
  const manifestPath = path.join(dir, 'manifest.json');
  let text: string;
  try {
    text = await readFile(manifestPath, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const what = code === 'ENOENT' ? 'is missing' : `cannot be read (${code ?? String(error)})`;
    throw new EnvironmentError(`The binary bundle ${what}: ${manifestPath}`, { hint: buildBundleHint(dir), cause: error });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new EnvironmentError(`The bundle manifest is not valid JSON: ${manifestPath}`, {
      details: [error instanceof Error ? error.message : String(error)],
      hint: buildBundleHint(dir),
      cause: error,
    });
  }
  const manifest = validateManifest(parsed, manifestPath, dir);
  const platform = options.platform ?? hostPlatform();
  if (manifest.platform !== undefined && manifest.platform !== platform) {
    throw new EnvironmentError(`The bundle in ${dir} was built for ${manifest.platform}, not for this ${platform}`, { hint: buildBundleHint(dir) });
  }
  return new BundleCatalog(dir, manifest);
}

/**
 * Checks that `value` is a BundleManifest of the schema this CLI reads; every problem
 * found is listed in the error's details as `<field path>: <problem>`.
 */
export function validateManifest(value: unknown, source: string, bundleDir: string = path.dirname(source)): BundleManifest {
  const problems: string[] = [];
  const fail = (message: string): never => {
    throw new EnvironmentError(message, { details: problems, hint: buildBundleHint(bundleDir) });
  };
  if (!isRecord(value)) return fail(`The bundle manifest is not a JSON object: ${source}`);
  if (value.schemaVersion !== bundleSchemaVersion) {
    problems.push(`schemaVersion: is ${JSON.stringify(value.schemaVersion)}, this provisioner reads ${bundleSchemaVersion}`);
    return fail(`The bundle manifest has an unsupported schema version: ${source}`);
  }
  for (const field of ['recipeHash', 'goVersion', 'createdAt'] as const) requireString(value, field, field, problems);
  if (value.platform !== undefined && (typeof value.platform !== 'string' || !/^(linux|darwin)-(x64|arm64)$/.test(value.platform)))
    problems.push(`platform: ${JSON.stringify(value.platform)} is not linux-x64, linux-arm64, darwin-x64 or darwin-arm64`);
  const names = new Set<string>();
  if (!Array.isArray(value.binaries)) problems.push('binaries: must be an array');
  else
    value.binaries.forEach((b: unknown, i) => {
      const at = `binaries[${i}]`;
      if (!isRecord(b)) return void problems.push(`${at}: must be an object`);
      for (const f of ['name', 'version', 'module', 'moduleVersion', 'package', 'archive'] as const) requireString(b, f, `${at}.${f}`, problems);
      for (const f of ['sha256', 'archiveSha256'] as const) requireSha256(b, f, `${at}.${f}`, problems);
      for (const f of ['size', 'compressedSize'] as const) requireSize(b, f, `${at}.${f}`, problems);
      if (typeof b.shipped !== 'boolean') problems.push(`${at}.shipped: must be true or false`);
      if (typeof b.name === 'string') {
        // The name becomes a file name in the cache: no separators, no dot files.
        if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(b.name)) problems.push(`${at}.name: "${b.name}" is not a plain file name`);
        if (names.has(b.name)) problems.push(`${at}.name: "${b.name}" appears twice`);
        names.add(b.name);
      }
      if (typeof b.archive === 'string') requireInside(b.archive, `${at}.archive`, problems);
      if (b.links !== undefined) {
        if (!Array.isArray(b.links)) return void problems.push(`${at}.links: must be an array of names when present`);
        b.links.forEach((link: unknown, j) => {
          // A link becomes a file name in the cache beside its binary, like a binary's name.
          if (typeof link !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(link)) return void problems.push(`${at}.links[${j}]: ${JSON.stringify(link)} is not a plain file name`);
          if (names.has(link)) problems.push(`${at}.links[${j}]: "${link}" is already a binary or a link`);
          names.add(link);
        });
      }
    });
  const providers = new Set<string>();
  const types = ['CoreProvider', 'BootstrapProvider', 'ControlPlaneProvider', 'InfrastructureProvider'];
  if (!Array.isArray(value.components)) problems.push('components: must be an array');
  else
    value.components.forEach((c: unknown, i) => {
      const at = `components[${i}]`;
      if (!isRecord(c)) return void problems.push(`${at}: must be an object`);
      for (const f of ['provider', 'namespace', 'version', 'file'] as const) requireString(c, f, `${at}.${f}`, problems);
      requireSha256(c, 'sha256', `${at}.sha256`, problems);
      if (typeof c.type !== 'string' || !types.includes(c.type)) problems.push(`${at}.type: must be one of ${types.join(', ')}`);
      if (c.binary !== undefined && (typeof c.binary !== 'string' || !names.has(c.binary)))
        problems.push(`${at}.binary: ${JSON.stringify(c.binary)} is not a binary of this bundle`);
      if (typeof c.file === 'string') requireInside(c.file, `${at}.file`, problems);
      if (typeof c.provider === 'string') {
        if (providers.has(c.provider)) problems.push(`${at}.provider: "${c.provider}" appears twice`);
        providers.add(c.provider);
      }
    });
  if (value.layers !== undefined && !Array.isArray(value.layers)) problems.push('layers: must be an array when present');
  else
    (value.layers ?? []).forEach((l: unknown, i) => {
      const at = `layers[${i}]`;
      if (!isRecord(l)) return void problems.push(`${at}: must be an object`);
      for (const f of ['name', 'archive', 'architecture'] as const) requireString(l, f, `${at}.${f}`, problems);
      for (const f of ['sha256', 'archiveSha256'] as const) requireSha256(l, f, `${at}.${f}`, problems);
      for (const f of ['size', 'compressedSize'] as const) requireSize(l, f, `${at}.${f}`, problems);
      if (typeof l.name === 'string' && !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(l.name)) problems.push(`${at}.name: "${l.name}" is not a plain file name`);
      if (typeof l.archive === 'string') requireInside(l.archive, `${at}.archive`, problems);
      if (!Array.isArray(l.packages) || !l.packages.every((p: unknown) => isRecord(p) && typeof p.name === 'string' && typeof p.version === 'string'))
        problems.push(`${at}.packages: must be an array of { name, version }`);
    });
  if (problems.length > 0) return fail(`The bundle manifest is malformed: ${source}`);
  // Every field the type names was checked above.
  return value as unknown as BundleManifest;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() ?? false;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function requireString(o: Record<string, unknown>, field: string, at: string, problems: string[]): void {
  if (typeof o[field] !== 'string' || o[field] === '') problems.push(`${at}: must be a non-empty string`);
}

function requireSha256(o: Record<string, unknown>, field: string, at: string, problems: string[]): void {
  const v = o[field];
  if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) problems.push(`${at}: must be 64 lower-case hex digits`);
}

function requireSize(o: Record<string, unknown>, field: string, at: string, problems: string[]): void {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) problems.push(`${at}: must be a non-negative integer`);
}

/** A path from the manifest must stay inside the bundle directory. */
function requireInside(relative: string, at: string, problems: string[]): void {
  const normal = path.posix.normalize(relative.replaceAll('\\', '/'));
  if (path.isAbsolute(relative) || normal === '..' || normal.startsWith('../')) problems.push(`${at}: "${relative}" points outside the bundle`);
}
