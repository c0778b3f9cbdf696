/**
 * The release catalog: how an installed `provisioner` package (npm, npx, pnpm) finds
 * its binaries. The package itself holds no binary; it holds `release/manifest.json`
 * (every binary's sha256 per platform) and the component YAMLs, and depends, with
 * exact versions, on one optional package per binary per platform,
 * `@provisioner/<binary>-<os>-<cpu>`, which npm installs only on a matching `os`/`cpu`.
 *
 * A binary is found by resolving `<package>/package.json` from the `provisioner`
 * package (as Node would resolve an import from it, so hoisted npm layouts and pnpm's
 * symlinked ones both work), checking the installed package's version, and then, in
 * the cache (cache.ts), its sha256 before first use.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { EnvironmentError } from '../errors.js';
import type { BinaryFormat, BundledComponents, Platform, PlatformBinary, ReleasedBinary, ReleaseManifest } from './manifest.js';
import { binariesByName, binaryFormats, releaseSchemaVersion } from './manifest.js';

/** This machine's platform in Node's names, e.g. `linux-x64` (possibly one no release is built for). */
export function hostPlatform(): string {
  return `${process.platform}-${process.arch}`;
}

/** The fix for a platform package npm did not install, in the order a user should try it. */
function missingPackageFixes(pkg: string, version: string): string[] {
  return [
    `npm installs ${pkg} as an optional dependency of provisioner, only where its os and cpu match: reinstall without --omit=optional (and without optional=false in .npmrc)`,
    'a package-lock.json written on another OS or CPU can lack this platform\'s packages (npm/cli#4828): remove node_modules and package-lock.json, then install again',
    `or install it yourself: npm install ${pkg}@${version}`,
  ];
}

/** The platform package that holds a binary for this machine is not installed. */
export class MissingPlatformPackageError extends EnvironmentError {
  constructor(
    readonly packageName: string,
    readonly platform: string,
    readonly binary: string,
    version: string,
    options: { cause?: unknown } = {},
  ) {
    super(`The platform package ${packageName} is not installed: provisioner needs it for ${binary} on ${platform}`, {
      details: missingPackageFixes(packageName, version),
      hint: `Reinstall provisioner with its optional dependencies, or set PROVISIONER_BINARIES_DIR to a directory holding your own ${binary}.`,
      ...(options.cause === undefined ? {} : { cause: options.cause }),
    });
  }
}

/**
 * A node-image layer (the `userland` layer of the kube-proxy and flannel images) that the
 * bundle or release in use does not hold: a bundle built before layers, or on a machine
 * without Debian's apt, or an installed release (releases do not carry layers yet).
 */
export class MissingLayerError extends EnvironmentError {
  constructor(
    readonly layer: string,
    /** Where it was looked for: the bundle directory, or `release <version>`. */
    readonly source: string,
    hint: string,
  ) {
    super(`The ${source} has no "${layer}" layer, which the kube-proxy and flannel node images are built on`, { hint });
  }
}

/** One binary's build for this platform, and where its installed package keeps it. */
export interface LocatedBinary {
  binary: ReleasedBinary;
  build: PlatformBinary;
  /** Absolute path of the file inside the installed package (`bin/<name>` or `bin/<name>.gz`). */
  file: string;
}

export class ReleaseCatalog {
  readonly kind = 'release' as const;
  private readonly byName: ReadonlyMap<string, ReleasedBinary>;
  private readonly require: NodeJS.Require;

  constructor(
    /** Absolute release directory; component paths are relative to it. */
    readonly dir: string,
    readonly manifest: ReleaseManifest,
    /** The platform to find binaries for. */
    readonly platform: string,
    /** The `provisioner` package's root: platform packages are resolved from there. */
    packageRoot: string,
  ) {
    this.byName = binariesByName(manifest.binaries);
    this.require = createRequire(path.join(packageRoot, 'package.json'));
  }

  get components(): readonly BundledComponents[] {
    return this.manifest.components;
  }

  get binaries(): readonly ReleasedBinary[] {
    return this.manifest.binaries;
  }

  /** The binary called `name` (or the one `name` is a link of); an EnvironmentError naming what the release holds when absent. */
  binary(name: string): ReleasedBinary {
    const found = this.byName.get(name);
    if (!found) {
      throw new EnvironmentError(`provisioner ${this.manifest.version} ships no binary named "${name}"`, {
        details: [`shipped binaries: ${[...this.byName.keys()].join(', ') || '(none)'}`],
        hint: `Put your own ${name} in PROVISIONER_BINARIES_DIR.`,
      });
    }
    return found;
  }

  /** The providers whose controllers run in `binary`. */
  providersOf(binary: string): BundledComponents[] {
    return this.manifest.components.filter((c) => c.binary === binary);
  }

  /**
   * Node-image layers are not packed into releases yet (scripts/release/pack.ts): always
   * MissingLayerError, so the kube-proxy and flannel images fail with a clear cause.
   */
  layer(name: string): never {
    throw new MissingLayerError(name, `release provisioner ${this.manifest.version}`, 'Use a development bundle (`npm run bundle` on Debian or Ubuntu) and point PROVISIONER_BUNDLE_DIR at it: releases do not carry the userland layer yet.');
  }

  /** Absolute path of a provider's components YAML. */
  componentsPath(components: BundledComponents): string {
    return path.join(this.dir, components.file);
  }

  /**
   * Finds this platform's build of `name` in its installed package and checks the
   * package's version is exactly the release's. Its content is checked by the cache.
   */
  async locate(name: string): Promise<LocatedBinary> {
    const binary = this.binary(name);
    const build = binary.platforms[this.platform as Platform];
    if (!build) {
      throw new EnvironmentError(`provisioner ${this.manifest.version} has no ${name} for ${this.platform}`, {
        details: [`built for: ${Object.keys(binary.platforms).join(', ')}`],
        hint: `Run provisioner on one of those platforms, or set PROVISIONER_BINARIES_DIR to a directory holding your own ${name} for ${this.platform}.`,
      });
    }
    let manifestFile: string;
    try {
      manifestFile = this.require.resolve(`${build.package}/package.json`);
    } catch (error) {
      throw new MissingPlatformPackageError(build.package, this.platform, name, this.manifest.version, { cause: error });
    }
    const packageDir = path.dirname(manifestFile);
    const installed = await readInstalledVersion(manifestFile);
    if (installed !== this.manifest.version) {
      throw new EnvironmentError(`The installed ${build.package} is version ${installed ?? '(unreadable)'}; provisioner ${this.manifest.version} needs exactly ${this.manifest.version}`, {
        details: [`package: ${packageDir}`],
        hint: `Reinstall provisioner so npm installs the matching ${build.package}@${this.manifest.version}.`,
      });
    }
    return { binary, build, file: path.join(packageDir, build.file) };
  }
}

async function readInstalledVersion(manifestFile: string): Promise<string | undefined> {
  try {
    const parsed = JSON.parse(await readFile(manifestFile, 'utf8')) as { version?: unknown };
    return typeof parsed.version === 'string' ? parsed.version : undefined;
  } catch {
    return undefined;
  }
}

/** Reads and checks `<release dir>/manifest.json`; every problem is listed by field path. */
export async function loadReleaseCatalog(dir: string, packageRoot: string, platform: string = hostPlatform()): Promise<ReleaseCatalog> {
  const file = path.join(dir, 'manifest.json');
  const reinstall = 'Reinstall provisioner (npm install provisioner, or npx provisioner).';
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new EnvironmentError(`The release manifest cannot be read: ${file}`, {
      details: [error instanceof Error ? error.message : String(error)],
      hint: reinstall,
      cause: error,
    });
  }
  const problems = releaseManifestProblems(parsed);
  if (problems.length > 0) throw new EnvironmentError(`The release manifest is malformed: ${file}`, { details: problems, hint: reinstall });
  return new ReleaseCatalog(dir, parsed as ReleaseManifest, platform, packageRoot);
}

/** What is wrong with a release manifest, as `<field path>: <problem>` lines; empty when nothing is. */
export function releaseManifestProblems(value: unknown): string[] {
  const problems: string[] = [];
  if (!isRecord(value)) return ['(root): must be a JSON object'];
  if (value.schemaVersion !== releaseSchemaVersion) {
    return [`schemaVersion: is ${JSON.stringify(value.schemaVersion)}, this provisioner reads ${releaseSchemaVersion}`];
  }
  for (const field of ['version', 'goVersion', 'createdAt']) if (!nonEmptyString(value[field])) problems.push(`${field}: must be a non-empty string`);
  if (!Array.isArray(value.binaries)) problems.push('binaries: must be an array');
  else
    value.binaries.forEach((b: unknown, i) => {
      const at = `binaries[${i}]`;
      if (!isRecord(b)) return void problems.push(`${at}: must be an object`);
      for (const f of ['name', 'version', 'module', 'moduleVersion', 'package']) if (!nonEmptyString(b[f])) problems.push(`${at}.${f}: must be a non-empty string`);
      if (typeof b.name === 'string' && !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(b.name)) problems.push(`${at}.name: "${b.name}" is not a plain file name`);
      if (b.links !== undefined && (!Array.isArray(b.links) || !b.links.every((l: unknown) => typeof l === 'string' && /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(l))))
        problems.push(`${at}.links: must be an array of plain file names when present`);
      if (!isRecord(b.platforms)) return void problems.push(`${at}.platforms: must be an object`);
      for (const [platform, build] of Object.entries(b.platforms)) {
        const where = `${at}.platforms.${platform}`;
        if (!isRecord(build)) {
          problems.push(`${where}: must be an object`);
          continue;
        }
        if (!nonEmptyString(build.package)) problems.push(`${where}.package: must be a non-empty string`);
        if (!binaryFormats.includes(build.format as BinaryFormat)) problems.push(`${where}.format: must be one of ${binaryFormats.join(', ')}`);
        if (typeof build.file !== 'string' || !/^bin\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(build.file)) problems.push(`${where}.file: must be bin/<file name>`);
        if (typeof build.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(build.sha256)) problems.push(`${where}.sha256: must be 64 lower-case hex digits`);
        for (const f of ['size', 'fileSize']) {
          const v = build[f];
          if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) problems.push(`${where}.${f}: must be a non-negative integer`);
        }
      }
    });
  if (!Array.isArray(value.components)) problems.push('components: must be an array');
  else
    value.components.forEach((c: unknown, i) => {
      const at = `components[${i}]`;
      if (!isRecord(c)) return void problems.push(`${at}: must be an object`);
      for (const f of ['provider', 'namespace', 'version', 'file', 'type']) if (!nonEmptyString(c[f])) problems.push(`${at}.${f}: must be a non-empty string`);
      if (typeof c.file === 'string' && !/^components\/[A-Za-z0-9][A-Za-z0-9._-]*\.yaml$/.test(c.file)) problems.push(`${at}.file: must be components/<name>.yaml`);
    });
  return problems;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmptyString(value: unknown): boolean {
  return typeof value === 'string' && value !== '';
}
