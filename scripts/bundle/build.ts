/**
 * `npm run bundle`: builds every bundled binary with `go build` (a test suite's with `go test -c`) from the wrapper
 * modules in embedded/modules or from our own module (provider/), assembles each provider's component manifest from
 * the module cache, and packages both into bundle/ with a manifest (the layout an
 * npm release ships; see src/embedded/manifest.ts).
 *
 * Builds are cached by a hash of their recipe (wrapper go.mod/go.sum/sources by name and
 * content — for our own module, every non-test Go source below it —, the recipe entry, linker flags, Go version and target; see build-key.ts), so
 * an unchanged recipe rebuilds nothing. The cache lives outside the work tree and its
 * keys name no path, so fresh clones and second checkouts reuse it.
 *
 * It also builds the userland layer of the kube-proxy and flannel images from Debian's
 * packages (userland.ts; Linux targets of this machine's architecture, where apt exists).
 *
 * Usage: tsx scripts/bundle/build.ts [--only name,name] [--release] [--target os/arch] [--out dir]
 *   --only     build just these binaries, and the userland layer if `userland` is named (default: all)
 *   --release  leave out the development tools (clusterctl, kubectl); default: include them
 *   --target   Go target, e.g. darwin/arm64 (default: this machine's); see recipe.ts releaseTargets
 *   --out      bundle directory (default: <repo>/bundle)
 * Environment: PROVISIONER_BUILD_CACHE (default: $XDG_CACHE_HOME/provisioner/build or ~/.cache/provisioner/build).
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, cp, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createGzip } from 'node:zlib';
import { execa } from 'execa';
import { exists, sha256OfFile, writeFileAtomic } from '../../src/files.js';
import { bundleSchemaVersion, type BundleManifest, type BundledBinary, type BundledComponents, type BundledLayer } from '../../src/embedded/manifest.js';
import { sharedGoFlags } from '../go-flags.mjs';
import { buildKey, localReplaces, patchedReplace, readModuleInputs, readWrapperInputs, type WrapperInput } from './build-key.js';
import { assembleComponents } from './components.js';
import { addedFiles, patchesFor, sourcePatches } from './patches.js';
import { binaryRecipes, builtFor, componentRecipes, hostTarget, parseTarget, targetPlatform, type BinaryRecipe, type ComponentsRecipe, type Target } from './recipe.js';
import { buildUserlandLayer, dpkgArchitecture } from './userland.js';

/** The name `--only` selects the userland layer by. */
const userlandLayerName = 'userland';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modulesDir = path.join(repoRoot, 'embedded/modules');
/** Bumped when this script changes how it builds, to invalidate cached outputs. */
const builderRevision = '3';
/**
 * gzip level of the archives. 6 (zlib's default), not 9: for the kube binary (141.7 MiB) -9 took
 * 20.2 s and -6 6.5 s, for an archive 1% larger (41.90 MB against 41.50 MB); over the whole
 * bundle that is about 90 s of a cold setup for about 2 MiB of download. Not part of the build
 * key: it changes the archive, not the binary, and build.json records the archive's sha256.
 */
const gzipLevel = 6;
/** Oldest Go that builds the wrappers: the highest `go` directive among them. */
const minimumGo = [1, 26] as const;

interface ModuleInfo {
  Path: string;
  Version: string;
  Dir?: string;
  Time?: string;
  Origin?: { Hash?: string };
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

export interface BuildBundleOptions {
  /** Bundle directory to write. */
  outDir: string;
  /** Go target. Default: this machine's. */
  target?: Target;
  /** Build just these binaries. Default: every recipe. */
  only?: ReadonlySet<string>;
  /** Leave out the development tools (`shipped: false`). Default: false. */
  shippedOnly?: boolean;
  /** Build cache. Default: `$PROVISIONER_BUILD_CACHE`, else `$XDG_CACHE_HOME/provisioner/build`, else `~/.cache/provisioner/build`. */
  cacheRoot?: string;
}

/** Default build cache directory (see the usage above). */
export function defaultBuildCache(): string {
  return process.env.PROVISIONER_BUILD_CACHE
    ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'provisioner', 'build');
}

/** Builds (or takes from the build cache) the selected binaries for one target and writes a bundle directory. */
export async function buildBundle(options: BuildBundleOptions): Promise<BundleManifest> {
  const goVersion = await checkGo();
  const target = options.target ?? hostTarget();
  const cacheRoot = options.cacheRoot ?? defaultBuildCache();
  const { only } = options;
  if (only) {
    const unknown = [...only].filter((n) => n !== userlandLayerName && !binaryRecipes.some((r) => r.name === n));
    if (unknown.length) throw new Error(`unknown binary ${unknown.join(', ')}; known: ${binaryRecipes.map((r) => r.name).join(', ')}, ${userlandLayerName} (the layer)`);
  }
  const selected = binaryRecipes.filter((r) => (!only || only.has(r.name)) && (!options.shippedOnly || r.shipped) && builtFor(r, target));
  const outDir = path.resolve(options.outDir);

  log(`provisioner bundle: ${goVersion}, target ${target.goos}/${target.goarch}, cache ${cacheRoot}`);
  const started = Date.now();
  const binaries: BundledBinary[] = [];
  const timings: { name: string; seconds: number; cached: boolean; size: number; compressed: number }[] = [];
  await mkdir(path.join(outDir, 'bin'), { recursive: true });
  for (const recipe of selected) {
    const t0 = Date.now();
    const built = await buildBinary(recipe, goVersion, cacheRoot, target);
    const archive = `bin/${recipe.name}.gz`;
    await copyFile(built.archivePath, path.join(outDir, archive));
    binaries.push({
      name: recipe.name,
      version: built.version,
      module: recipe.versionModule,
      moduleVersion: built.version,
      package: recipe.package,
      archive,
      sha256: built.sha256,
      archiveSha256: built.archiveSha256,
      size: built.size,
      compressedSize: built.compressedSize,
      shipped: recipe.shipped,
      ...(recipe.links ? { links: [...recipe.links] } : {}),
    });
    const seconds = (Date.now() - t0) / 1000;
    timings.push({ name: recipe.name, seconds, cached: built.cached, size: built.size, compressed: built.compressedSize });
    log(`  ${recipe.name.padEnd(30)} ${built.cached ? 'cached' : 'built '} ${seconds.toFixed(1).padStart(6)}s  ${mib(built.size)} -> ${mib(built.compressedSize)}`);
  }

  const components: BundledComponents[] = [];
  await mkdir(path.join(outDir, 'components'), { recursive: true });
  for (const recipe of componentRecipes) {
    const info = await componentsSource(recipe);
    const assembled = await assembleComponents(recipe, info.Dir, info.Version);
    const file = `components/${recipe.provider}.yaml`;
    await writeFileAtomic(path.join(outDir, file), assembled.yaml);
    components.push({
      provider: recipe.provider,
      type: recipe.type,
      namespace: recipe.namespace,
      version: info.Version,
      ...(recipe.binary ? { binary: recipe.binary } : {}),
      file,
      sha256: createHash('sha256').update(assembled.yaml).digest('hex'),
    });
    log(`  components ${recipe.provider.padEnd(22)} ${info.Version}: ${assembled.crdNames.length} CRDs, ${assembled.webhookConfigurations} webhook configurations`);
  }

  const layers: BundledLayer[] = [];
  if (!only || only.has(userlandLayerName)) {
    const layer = await userlandLayer(target, cacheRoot, outDir);
    if (layer) layers.push(layer);
  }

  // --only rebuilds some binaries into an existing bundle: carry the others over from its
  // manifest (when their archives are still there), so a partial rebuild never prunes them.
  if (only) {
    binaries.splice(0, binaries.length, ...(await withUnselectedCarriedOver(binaries, outDir, target)));
    if (!only.has(userlandLayerName)) layers.push(...(await previousLayers(outDir, target)));
  }

  const manifest: BundleManifest = {
    schemaVersion: bundleSchemaVersion,
    recipeHash: createHash('sha256').update(binaries.map((b) => b.sha256).join(',') + components.map((c) => c.sha256).join(',')).digest('hex'),
    goVersion,
    platform: targetPlatform(target),
    createdAt: new Date().toISOString(),
    binaries,
    components,
    ...(layers.length ? { layers } : {}),
  };
  // Remove archives of binaries no longer in the bundle, so the directory matches the manifest.
  const keep = new Set(binaries.map((b) => path.basename(b.archive)));
  for (const entry of await readdir(path.join(outDir, 'bin'))) if (!keep.has(entry)) await rm(path.join(outDir, 'bin', entry), { force: true });
  await writeFileAtomic(path.join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');

  const total = timings.reduce((a, t) => a + t.size, 0);
  const compressed = timings.reduce((a, t) => a + t.compressed, 0);
  log(`bundle ready in ${((Date.now() - started) / 1000).toFixed(1)}s at ${outDir}: ${binaries.length} binaries, ${mib(total)} -> ${mib(compressed)} (${(100 * (1 - compressed / total)).toFixed(0)}% deflation), ${components.length} component manifests`);
  return manifest;
}

/**
 * Builds (or takes from the cache) the userland layer and copies its gzip into
 * `<out>/layers/`. Undefined, with a note, where it cannot be built: not a Linux target,
 * another architecture than this machine's, or no Debian (dpkg) here.
 */
async function userlandLayer(target: Target, cacheRoot: string, outDir: string): Promise<BundledLayer | undefined> {
  const architecture = await dpkgArchitecture();
  if (target.goos !== 'linux' || architecture !== target.goarch) {
    log(`  layer ${userlandLayerName}: not built (${architecture === undefined ? 'no dpkg on this machine' : `apt gives ${architecture} packages`}, target ${target.goos}/${target.goarch}); the kube-proxy and flannel images need it`);
    return undefined;
  }
  const t0 = Date.now();
  const built = await buildUserlandLayer(cacheRoot, architecture);
  const archive = `layers/${userlandLayerName}.tar.gz`;
  await mkdir(path.join(outDir, 'layers'), { recursive: true });
  await copyFile(built.archivePath, path.join(outDir, archive));
  log(`  layer ${userlandLayerName.padEnd(24)} ${built.cached ? 'cached' : 'built '} ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s  ${mib(built.size)} -> ${mib(built.compressedSize)}  ${built.packages.map((p) => `${p.name} ${p.version}`).join(', ')}`);
  return {
    name: userlandLayerName,
    archive,
    sha256: built.sha256,
    archiveSha256: built.archiveSha256,
    size: built.size,
    compressedSize: built.compressedSize,
    architecture,
    packages: built.packages,
  };
}

/** The existing bundle's layers whose archives are still there (for `--only` without the layer). */
async function previousLayers(outDir: string, target: Target): Promise<BundledLayer[]> {
  let previous: BundleManifest | undefined;
  try {
    previous = JSON.parse(await readFile(path.join(outDir, 'manifest.json'), 'utf8')) as BundleManifest;
  } catch {
    return []; // no bundle yet
  }
  if (previous.schemaVersion !== bundleSchemaVersion || previous.platform !== targetPlatform(target)) return [];
  const kept: BundledLayer[] = [];
  for (const layer of previous.layers ?? []) if (await exists(path.join(outDir, layer.archive))) kept.push(layer);
  return kept;
}

/** The built binaries plus the existing bundle's entries for every other recipe, in recipe order. */
async function withUnselectedCarriedOver(built: BundledBinary[], outDir: string, target: Target): Promise<BundledBinary[]> {
  let previous: BundleManifest | undefined;
  try {
    previous = JSON.parse(await readFile(path.join(outDir, 'manifest.json'), 'utf8')) as BundleManifest;
  } catch {
    return built; // no bundle yet: nothing to carry over
  }
  if (previous.schemaVersion !== bundleSchemaVersion || previous.platform !== targetPlatform(target)) return built;
  const result: BundledBinary[] = [];
  for (const recipe of binaryRecipes) {
    const fresh = built.find((b) => b.name === recipe.name);
    if (fresh) {
      result.push(fresh);
      continue;
    }
    const kept = previous.binaries.find((b) => b.name === recipe.name);
    if (kept && (await stat(path.join(outDir, kept.archive)).catch(() => undefined))) result.push(kept);
  }
  return result;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      release: { type: 'boolean', default: false },
      target: { type: 'string' },
      out: { type: 'string', default: path.join(repoRoot, 'bundle') },
    },
  });
  await buildBundle({
    outDir: values.out,
    shippedOnly: values.release,
    ...(values.target ? { target: parseTarget(values.target) } : {}),
    ...(values.only ? { only: new Set(values.only.split(',').map((s) => s.trim())) } : {}),
  });
}

/**
 * The version of our own modules' binaries and components: package.json's, as a Go
 * version (`v0.1.0`). No git: a release tarball or a fresh clone gives the same bytes.
 */
async function ownVersion(): Promise<string> {
  const pkg = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  return `v${pkg.version}`;
}

/** Directory and version of the module a components recipe reads its config/ from. */
async function componentsSource(recipe: ComponentsRecipe): Promise<{ Dir: string; Version: string }> {
  if ('ownModule' in recipe) return { Dir: path.join(repoRoot, recipe.ownModule), Version: await ownVersion() };
  const info = await moduleInfo(recipe.wrapper, recipe.module);
  if (!info.Dir) throw new Error(`module ${recipe.module} has no directory in the module cache`);
  return { Dir: info.Dir, Version: info.Version };
}

/** Checks that Go exists and is new enough; returns `go version`'s answer. */
async function checkGo(): Promise<string> {
  let out: string;
  try {
    out = (await execa('go', ['version'], { env: { GOTOOLCHAIN: 'local' } })).stdout.trim();
  } catch {
    throw new Error(`Go is needed to build the bundle and was not found on PATH. Install Go ${minimumGo.join('.')} or newer, then run \`npm run bundle\` again.`);
  }
  const m = /go(\d+)\.(\d+)/.exec(out);
  const major = Number(m?.[1] ?? 0);
  const minor = Number(m?.[2] ?? 0);
  if (major < minimumGo[0] || (major === minimumGo[0] && minor < minimumGo[1])) {
    throw new Error(`${out} is too old: the bundled modules need Go ${minimumGo.join('.')} or newer. Install a newer Go, then run \`npm run bundle\` again.`);
  }
  return out;
}

const moduleInfoCache = new Map<string, Promise<ModuleInfo>>();

/** Version and module-cache directory of a module as the wrapper pins it (downloads it if needed). */
function moduleInfo(wrapper: string, module: string): Promise<ModuleInfo> {
  const key = `${wrapper}:${module}`;
  let pending = moduleInfoCache.get(key);
  if (!pending) {
    pending = (async () => {
      const cwd = path.join(modulesDir, wrapper);
      const listed = JSON.parse((await execa('go', ['list', '-m', '-json', module], { cwd, env: goEnv() })).stdout) as ModuleInfo;
      const downloaded = JSON.parse(
        (await execa('go', ['mod', 'download', '-json', `${module}@${listed.Version}`], { cwd, env: goEnv() })).stdout,
      ) as ModuleInfo;
      return { ...listed, ...downloaded };
    })();
    moduleInfoCache.set(key, pending);
  }
  return pending;
}

/** The Go environment of every go command here; with a target, of a build for it. */
function goEnv(target?: Target): Record<string, string> {
  // Static, reproducible, and never a toolchain download; the go tier compiles with the same sharedGoFlags.
  const env: Record<string, string> = { CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: `-mod=readonly -buildvcs=false ${sharedGoFlags}`, GOWORK: 'off' };
  return target ? { ...env, GOOS: target.goos, GOARCH: target.goarch } : env;
}

/** Linker flags that make the binary report its real version (CAPI refuses a v0.0.0 API server). */
function versionFlags(recipe: BinaryRecipe, info: ModuleInfo): string[] {
  const v = info.Version;
  const m = /^v(\d+)\.(\d+)/.exec(v);
  const commit = info.Origin?.Hash ?? '';
  const date = info.Time ? new Date(info.Time).toISOString().replace(/\.\d{3}Z$/, 'Z') : '';
  const vars = { gitVersion: v, gitMajor: m?.[1] ?? '', gitMinor: m?.[2] ?? '', gitCommit: commit, gitTreeState: 'clean', buildDate: date };
  const packageFlags = recipe.versionPackages.flatMap((pkg) => Object.entries(vars).filter(([, value]) => value !== '').map(([name, value]) => `-X ${pkg}.${name}=${value}`));
  // A variable named for a commit gets the commit; any other, the version.
  const variableFlags = (recipe.versionVariables ?? []).map((variable) => `-X ${variable}=${/Commit$/.test(variable) ? commit : v}`);
  return [...packageFlags, ...variableFlags];
}

interface BuiltBinary {
  version: string;
  archivePath: string;
  sha256: string;
  archiveSha256: string;
  size: number;
  compressedSize: number;
  cached: boolean;
}

async function buildBinary(recipe: BinaryRecipe, goVersion: string, cacheRoot: string, target: Target): Promise<BuiltBinary> {
  let version: string;
  let ldflags: string;
  let buildDir: string;
  let patched = 'none';
  let inputs: WrapperInput[];
  if ('ownModule' in recipe) {
    version = await ownVersion();
    ldflags = ['-s', '-w', ...recipe.versionPackages.map((pkg) => `-X ${pkg}.Version=${version}`)].join(' ');
    buildDir = path.join(repoRoot, recipe.ownModule);
    inputs = await readModuleInputs(buildDir);
  } else {
    const info = await moduleInfo(recipe.wrapper, recipe.versionModule);
    version = info.Version;
    ldflags = ['-s', '-w', ...versionFlags(recipe, info)].join(' ');
    const patchedWrapper = await preparePatchedWrapper(recipe.wrapper, cacheRoot);
    // The patched wrapper's directory name is a hash of exactly the patches this wrapper's modules take.
    if (patchedWrapper) patched = path.basename(patchedWrapper);
    buildDir = patchedWrapper ?? path.join(modulesDir, recipe.wrapper);
    inputs = await readWrapperInputs(path.join(modulesDir, recipe.wrapper));
  }
  // A test binary (recipe.testBinary) takes the same flags; `-c` writes it instead of running it.
  const args = [...(recipe.testBinary ? ['test', '-c'] : ['build']), '-ldflags', ldflags];
  const key = buildKey({ builderRevision, recipe, ldflags, patched, goVersion, env: goEnv(target), inputs });
  const dir = path.join(cacheRoot, key);
  const metaPath = path.join(dir, 'build.json');

  try {
    const meta = JSON.parse(await readFile(metaPath, 'utf8')) as Omit<BuiltBinary, 'cached' | 'archivePath'>;
    await stat(path.join(dir, `${recipe.name}.gz`));
    return { ...meta, archivePath: path.join(dir, `${recipe.name}.gz`), cached: true };
  } catch {
    // Not cached (or incomplete): build below.
  }

  await mkdir(dir, { recursive: true });
  const binaryPath = path.join(dir, recipe.name);
  const tmpBinary = `${binaryPath}.tmp-${process.pid}`;
  try {
    await execa('go', [...args, '-o', tmpBinary, recipe.package], {
      cwd: buildDir,
      env: goEnv(target),
      stdout: 'inherit',
      stderr: 'inherit',
    });
  } catch (error) {
    await rm(tmpBinary, { force: true });
    throw new Error(`go ${args[0]} of ${recipe.name} (${recipe.package}) for ${target.goos}/${target.goarch} failed; see the compiler output above`, { cause: error });
  }
  await rename(tmpBinary, binaryPath);
  const sha256 = await sha256OfFile(binaryPath);
  const archivePath = path.join(dir, `${recipe.name}.gz`);
  const tmpArchive = `${archivePath}.tmp-${process.pid}`;
  await pipeline(createReadStream(binaryPath), createGzip({ level: gzipLevel }), createWriteStream(tmpArchive));
  await rename(tmpArchive, archivePath);
  const meta = {
    version,
    sha256,
    archiveSha256: await sha256OfFile(archivePath),
    size: (await stat(binaryPath)).size,
    compressedSize: (await stat(archivePath)).size,
  };
  await rm(binaryPath);
  await writeFileAtomic(metaPath, JSON.stringify(meta, null, 2));
  return { ...meta, archivePath, cached: false };
}

const patchedWrappers = new Map<string, Promise<string | undefined>>();

/**
 * Applies the source patches (see patches.ts) for one wrapper: copies each patched
 * module from the module cache into the build cache, edits the copy, and writes a copy
 * of the wrapper that `replace`s the module with it. (Go refuses `-overlay` for
 * module-cache files.) The committed go.mod stays the one pin of every version.
 * Returns the directory to build in, or undefined when no patch applies.
 */
function preparePatchedWrapper(wrapper: string, cacheRoot: string): Promise<string | undefined> {
  let pending = patchedWrappers.get(wrapper);
  if (!pending) {
    pending = (async () => {
      const inGraph = async (module: string) => {
        try {
          return await moduleInfo(wrapper, module);
        } catch {
          return undefined; // not part of this wrapper's build
        }
      };
      const modules = [...new Set([...sourcePatches.map((p) => p.module), ...addedFiles.map((a) => a.module)])];
      const replaces: string[] = [];
      for (const module of modules) {
        // A module none of whose patches this wrapper takes costs no `go list`.
        const { patches, added } = patchesFor(wrapper, module);
        if (patches.length === 0 && added.length === 0) continue;
        const info = await inGraph(module);
        if (!info?.Dir) continue;
        const key = createHash('sha256').update(JSON.stringify({ builderRevision, version: info.Version, patches, added })).digest('hex').slice(0, 16);
        const copy = path.join(cacheRoot, 'patched', `${module.replaceAll('/', '_')}@${info.Version}-${key}`);
        if (!(await exists(path.join(copy, '.complete')))) {
          await rm(copy, { recursive: true, force: true });
          await cp(info.Dir, copy, { recursive: true });
          await execa('chmod', ['-R', 'u+w', copy]);
          for (const patch of patches) {
            const file = path.join(copy, patch.file);
            let text = await readFile(file, 'utf8');
            for (const edit of patch.edits) {
              const found = text.split(edit.find).length - 1;
              if (found !== (edit.count ?? 1)) {
                throw new Error(
                  `source patch for ${module}@${info.Version} ${patch.file} expected ${edit.count ?? 1} match(es) of ${JSON.stringify(edit.find)}, found ${found}; ` +
                    'upstream changed: update scripts/bundle/patches.ts',
                );
              }
              text = text.split(edit.find).join(edit.replace);
            }
            await writeFile(file, text);
          }
          for (const file of added) await writeFile(path.join(copy, file.file), file.content);
          await writeFile(path.join(copy, '.complete'), '');
        }
        replaces.push(patchedReplace(module, info.Version, path.basename(copy)));
      }
      if (replaces.length === 0) return undefined;
      // A copy of the wrapper whose go.mod adds the replace lines. (A go.work would do the
      // same without a copy, but workspace mode loads the graph unpruned and hits an
      // ambiguous-import clash between old and split genproto modules.)
      const inputs = await readWrapperInputs(path.join(modulesDir, wrapper));
      const hash = createHash('sha256').update(replaces.join('\n'));
      for (const input of inputs) hash.update(input.content);
      const dir = path.join(cacheRoot, 'wrappers', `${wrapper}-${hash.digest('hex').slice(0, 16)}`);
      await mkdir(dir, { recursive: true });
      for (const input of inputs) {
        if (input.name.startsWith('../')) continue; // a module of this repository the wrapper replaces to: copied below
        let text = input.content.toString('utf8');
        if (input.name === 'go.mod') {
          text = await copyLocalReplaces(text, inputs, cacheRoot);
          text += `\n// Added by scripts/bundle/build.ts: source patches (scripts/bundle/patches.ts).\n${replaces.join('\n')}\n`;
        }
        await mkdir(path.dirname(path.join(dir, input.name)), { recursive: true });
        await writeFile(path.join(dir, input.name), text);
      }
      return dir;
    })();
    patchedWrappers.set(wrapper, pending);
  }
  return pending;
}

/**
 * A patched wrapper is a copy in the build cache, where the relative directory of a module of
 * this repository that its go.mod replaces to (capi's `../../../provider`) leads nowhere: each
 * such module's inputs (go.mod, go.sum, Go sources; `readWrapperInputs`) are copied to
 * `<build cache>/own/<name>-<hash of them>` and the line rewritten to it, relative again so
 * that no path of this machine reaches the binary. Returns the rewritten go.mod.
 */
async function copyLocalReplaces(goMod: string, inputs: readonly WrapperInput[], cacheRoot: string): Promise<string> {
  let text = goMod;
  for (const local of localReplaces(goMod)) {
    const prefix = `${local.dir}/`;
    const files = inputs.filter((input) => input.name.startsWith(prefix)).map((input) => ({ name: input.name.slice(prefix.length), content: input.content }));
    const hash = createHash('sha256');
    for (const file of files) hash.update(`\0${file.name}\0${file.content.length}\0`).update(file.content);
    const name = `${path.posix.basename(local.dir)}-${hash.digest('hex').slice(0, 16)}`;
    const copy = path.join(cacheRoot, 'own', name);
    if (!(await exists(path.join(copy, '.complete')))) {
      await rm(copy, { recursive: true, force: true });
      for (const file of files) {
        await mkdir(path.dirname(path.join(copy, file.name)), { recursive: true });
        await writeFile(path.join(copy, file.name), file.content);
      }
      await writeFile(path.join(copy, '.complete'), '');
    }
    text = text.replace(local.line, `replace ${local.module} => ../../own/${name}`);
  }
  return text;
}

function mib(bytes: number): string {
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

// Run as a script (`npm run bundle`), not when release:pack imports buildBundle.
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    log(`bundle failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
