/**
 * `npx provisioner` as a user with Node and no Go gets it: the release packages for this
 * machine (`release:pack --targets host`: the main package and one package per binary)
 * published to a private Verdaccio on loopback with no uplink, then, in an empty
 * directory with a PATH that has no `go` and a cold npm cache and binary cache:
 *
 *   npx --registry <local> provisioner create install-config --dir D --name x
 *   npx --registry <local> provisioner create cluster --dir D      (in-memory, to Ready nodes)
 *   npx --registry <local> provisioner destroy cluster --dir D
 *
 * and `npm install --ignore-scripts` of the same packages, then `provisioner version --verify`
 * from node_modules (and the same with pnpm). The binaries must come from the installed
 * platform packages: a development bundle is nowhere on that path.
 *
 * Packing builds the host's binaries through the build cache (seconds when `npm run
 * bundle` ran; a fresh machine needs Go here, as for every other test tier).
 */
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { releasePack, type PackReport } from '../../scripts/release/pack.js';
import { hostTarget, targetPlatform } from '../../scripts/bundle/recipe.js';
import { killRecorded } from '../integration/support/controlplane.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import type { VersionReport } from '../../src/services/version.js';
import { releaseDirName, type ReleaseManifest } from '../../src/embedded/manifest.js';
import { ensureBuilt, getNodes } from './support/cli.js';
import { seedDependencies, startRegistry, type LocalRegistry } from './support/registry.js';
import { runTempDir } from '../support/run-dirs.js';

const packTimeoutMs = 1_500_000;
const createTimeoutMs = 900_000;
const commandTimeoutMs = 300_000;

/** PATH with only the directories of node/npm and the system's tools, none of which holds `go`. */
async function pathWithoutGo(): Promise<string> {
  const candidates = [path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'];
  const kept: string[] = [];
  for (const dir of [...new Set(candidates)]) {
    const hasGo = await stat(path.join(dir, 'go')).then(() => true, () => false);
    if (!hasGo) kept.push(dir);
  }
  return kept.join(':');
}

/** The last lines of every controller's log in `dir`, for a failure message (the work dir is removed afterwards). */
async function controllerLogTails(dir: string, lines = 15): Promise<string> {
  const logs = path.join(dir, 'logs');
  const files = (await readdir(logs).catch(() => [] as string[])).filter((f) => f.endsWith('-manager.log'));
  const tails = await Promise.all(
    files.map(async (f) => `--- ${f}\n${(await readFile(path.join(logs, f), 'utf8')).trimEnd().split('\n').slice(-lines).join('\n')}`),
  );
  return tails.join('\n');
}

describe('npx provisioner from a registry, with no Go', () => {
  let work: string;
  let registry: LocalRegistry;
  let report: PackReport;
  let env: Record<string, string>;
  const platform = targetPlatform(hostTarget());

  beforeAll(async () => {
    work = await runTempDir('e2e-npx');
    const packStarted = performance.now();
    // dist/ is compiled here only when older than src/; release:pack's own compile would rewrite it in place
    // under the CLI runs of the test beside this one (a CI run's hosts-pivot-self read a half-written module).
    await ensureBuilt();
    // Brotli quality 1: this test checks the packages' format and contents, not their size (a release packs at 11).
    report = await releasePack({ targets: [hostTarget()], outDir: path.join(work, 'release'), compileCli: false, brotliQuality: 1 });
    console.log(`release:pack --targets host took ${((performance.now() - packStarted) / 1000).toFixed(0)} s`);
    registry = await startRegistry(path.join(work, 'registry'));
    const seeded = await seedDependencies(registry, path.join(work, 'registry'));
    console.log(`registry ${registry.url}: ${seeded} dependency packages mirrored from the npm cache`);
    // Platform packages first, as a release publishes them: the main package's optional dependencies then resolve.
    for (const pkg of [...report.packages].reverse()) await registry.publish(pkg.tarball);
    env = {
      PATH: await pathWithoutGo(),
      HOME: path.join(work, 'home'),
      npm_config_cache: path.join(work, 'npm-cache'),
      npm_config_update_notifier: 'false',
      npm_config_fund: 'false',
      npm_config_audit: 'false',
      PROVISIONER_CACHE_DIR: path.join(work, 'binary-cache'),
    };
    await mkdir(env.HOME!, { recursive: true });
  }, packTimeoutMs);

  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** A command in `cwd` with the user's environment: no Go, cold caches, the private registry. */
  const run = (cwd: string, file: string, args: string[], timeout: number) =>
    execa(file, args, { cwd, env, extendEnv: false, reject: false, all: true, timeout, stdin: 'ignore' });

  it('packs one package per binary for this platform, each with its os and cpu and its binary brotli-compressed, and a main package with none', async () => {
    const names = report.packages.map((p) => p.name);
    expect(names[0]).toBe('provisioner');
    for (const name of names.slice(1)) expect(name).toMatch(new RegExp(`^@provisioner/[a-z0-9-]+-${platform}$`));
    // The Kubernetes components are one package: the multi-call kube.
    expect(names).toContain(`@provisioner/kube-${platform}`);
    expect(names).not.toContain(`@provisioner/kube-apiserver-${platform}`);
    for (const pkg of report.packages) expect(pkg.unpackedBytes).toBeLessThan(80 << 20);
    const manifest = JSON.parse(await readFile(path.join(work, 'release', 'stage', 'provisioner', releaseDirName, 'manifest.json'), 'utf8')) as ReleaseManifest;
    const shipped = manifest.binaries.map((b) => [b.name, b.platforms[platform]?.format, b.platforms[platform]?.file]);
    expect(shipped).toEqual(manifest.binaries.map((b) => [b.name, 'brotli', `bin/${b.name}.br`]));
    console.log(report.packages.map((p) => `${p.name}: ${(p.packedBytes / 2 ** 20).toFixed(1)} MiB packed, ${(p.unpackedBytes / 2 ** 20).toFixed(1)} MiB unpacked`).join('\n'));
  });

  it(
    'creates an in-memory cluster to Ready nodes with npx alone, then destroys it',
    async () => {
      const which = await run(work, 'sh', ['-c', 'command -v go'], 10_000);
      expect(which.exitCode, `go is on the test PATH ${env.PATH}: ${which.stdout}`).not.toBe(0);
      const cwd = path.join(work, 'empty');
      await mkdir(cwd);
      const dir = path.join(cwd, 'D');
      const npx = (args: string[], timeout = commandTimeoutMs) => run(cwd, 'npx', ['--yes', '--registry', `${registry.url}/`, 'provisioner', ...args], timeout);
      try {
        const started = performance.now();
        const config = await npx(['create', 'install-config', '--dir', dir, '--name', 'x']);
        expect(config.exitCode, config.all).toBe(0);
        const installed = performance.now();
        const createStarted = performance.now();
        const create = await npx(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '5'], createTimeoutMs);
        expect(create.exitCode, `${create.all}\n${await controllerLogTails(dir)}`).toBe(0);
        const done = performance.now();
        console.log(
          `npx first run: install + create install-config ${((installed - started) / 1000).toFixed(1)} s, ` +
            `create cluster ${((done - createStarted) / 1000).toFixed(1)} s`,
        );

        const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig'));
        expect(nodes).toHaveLength(5);
        expect(nodes.every((n) => n.ready)).toBe(true);

        // The binaries came from the platform packages npx installed, not from a checkout's bundle.
        const version = await npx(['version', '--output', 'json']);
        expect(version.exitCode, version.all).toBe(0);
        const result = version.stdout
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { type: string; data?: VersionReport })
          .find((event) => event.type === 'result');
        expect(result?.data?.bundle.state).toBe('release');
        // Every binary ships brotli-compressed and was extracted into the binary cache; kube-apiserver ran through kube's link beside it.
        for (const name of ['etcd', 'kube']) {
          const binary = result?.data?.binaries.find((b) => b.name === name);
          expect(binary?.cache, name).toMatchObject({ state: 'ready' });
          expect(binary!.cache.path.startsWith(path.join(work, 'binary-cache', 'bin')), binary!.cache.path).toBe(true);
        }
        const kube = result!.data!.binaries.find((b) => b.name === 'kube');
        expect((await stat(path.join(path.dirname(kube!.cache.path), 'kube-apiserver'))).ino).toBe((await stat(kube!.cache.path)).ino);

        const destroy = await npx(['destroy', 'cluster', '--dir', dir]);
        expect(destroy.exitCode, destroy.all).toBe(0);
      } finally {
        await killRecorded(dir).catch(() => undefined);
      }
    },
    createTimeoutMs + 2 * commandTimeoutMs,
  );

  it(
    'installs with npm install --ignore-scripts and with pnpm: only this platform\'s packages, every binary verified',
    async () => {
      const npmDir = path.join(work, 'npm-install');
      await mkdir(npmDir);
      const install = await run(npmDir, 'npm', ['install', '--ignore-scripts', '--registry', `${registry.url}/`, 'provisioner'], commandTimeoutMs);
      expect(install.exitCode, install.all).toBe(0);
      const scoped = await readdir(path.join(npmDir, 'node_modules', '@provisioner'));
      const expected = report.packages.slice(1).map((p) => p.name.replace('@provisioner/', ''));
      expect(scoped.sort()).toEqual(expected.sort());
      const verify = await run(npmDir, path.join(npmDir, 'node_modules', '.bin', 'provisioner'), ['version', '--verify'], commandTimeoutMs);
      expect(verify.exitCode, verify.all).toBe(0);
      expect(verify.stdout).toMatch(/^release /m);
      expect(verify.stdout).not.toMatch(/CORRUPT|DAMAGED|not installed/);
      // Each binary checked: extracted by the npx test before (same cache) or its package's archive hashed.
      const checked = verify.stdout.match(/extracted, verified|not extracted; its archive holds the binary/g) ?? [];
      expect(checked, verify.stdout).toHaveLength(report.packages.length - 1);

      const pnpmDir = path.join(work, 'pnpm-install');
      await mkdir(pnpmDir);
      const pnpmBin = path.join(packageRoot, 'node_modules', '.bin', 'pnpm');
      const pnpm = await run(pnpmDir, pnpmBin, ['add', '--ignore-scripts', '--registry', `${registry.url}/`, 'provisioner'], commandTimeoutMs);
      expect(pnpm.exitCode, pnpm.all).toBe(0);
      const pnpmVerify = await run(pnpmDir, path.join(pnpmDir, 'node_modules', '.bin', 'provisioner'), ['version', '--verify'], commandTimeoutMs);
      expect(pnpmVerify.exitCode, pnpmVerify.all).toBe(0);
      expect(pnpmVerify.stdout).toMatch(/^release /m);
    },
    3 * commandTimeoutMs,
  );

  it('a missing platform package is exit 4, naming the package, the platform and the fix', async () => {
    const dir = path.join(work, 'omit-optional');
    await mkdir(dir);
    const install = await run(dir, 'npm', ['install', '--omit=optional', '--ignore-scripts', '--registry', `${registry.url}/`, 'provisioner'], commandTimeoutMs);
    expect(install.exitCode, install.all).toBe(0);
    expect(JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8'))).toHaveProperty('dependencies.provisioner');
    const managementDir = path.join(dir, 'm');
    try {
      const start = await run(dir, path.join(dir, 'node_modules', '.bin', 'provisioner'), ['management', 'start', '--dir', managementDir], commandTimeoutMs);
      expect(start.exitCode, start.all).toBe(4);
      expect(start.stderr).toMatch(new RegExp(`@provisioner/[a-z-]+-${platform} is not installed`));
      expect(start.stderr).toContain('--omit=optional');
      expect(start.stderr).toContain('npm/cli#4828');
    } finally {
      await killRecorded(managementDir).catch(() => undefined);
    }
  });
});
