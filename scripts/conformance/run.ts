/**
 * `npm run conformance -- --dir D [--focus REGEX]`: Kubernetes' [Conformance] tests (the bundle's
 * e2e.test) against the cluster of the install in D (a hosts-platform cluster `create cluster`
 * made; its kubeconfig D/auth/kubeconfig).
 *
 * First the e2e images we build (agnhost and busybox, src/nodeartifacts/e2e-images.ts) go onto
 * every node with `provisioner images load` (pause is there already); then e2e.test runs every
 * [Conformance] test (those matching --focus too, when given), one after another. Every other
 * image the suite names points at provisioner.local, which has none: a test needing one cannot
 * start its pods, and is reported as not runnable, naming the image, rather than failed. (Which
 * images a test needs is known only once it runs: e2e.test has no map of them.) The whole suite,
 * 446 tests, takes hours.
 *
 * Prints every test that ran with its result, then `conformance: N passed, N failed, N not
 * runnable`. Exit 0 when none failed, 1 otherwise.
 * Files: D/conformance/ (e2e.test's JSON report, JUnit and output).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { ensureBinaries, ensureLayer, resolveCacheDir } from '../../src/embedded/cache.js';
import { loadBinaryCatalog, packageRoot } from '../../src/embedded/catalog.js';
import { ensureE2eImages } from '../../src/nodeartifacts/e2e-images.js';
import { missingImages, runSuite } from './e2e-suite.js';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { dir: { type: 'string' }, focus: { type: 'string' } } });
  if (!values.dir) throw new Error('usage: npm run conformance -- --dir <install dir> [--focus REGEX]');
  const dir = path.resolve(values.dir);
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as const)[process.arch as 'x64' | 'arm64'];
  if (process.platform !== 'linux' || arch === undefined) throw new Error('the e2e images are built from Linux binaries: run this on Linux (amd64 or arm64)');

  const catalog = await loadBinaryCatalog();
  const binaries = await ensureBinaries(['e2e.test', 'kubectl', 'agnhost'], { catalog });
  const userland = await ensureLayer(catalog, 'userland', { catalog });
  const images = await ensureE2eImages(
    { path: binaries.agnhost!, version: catalog.binary('agnhost').version },
    { path: userland.path, sha256: userland.layer.sha256, description: 'userland' },
    { cacheDir: resolveCacheDir({}), architecture: arch },
  );
  process.stdout.write(`conformance: loading ${images.map((i) => i.ref).join(', ')} onto every node (images load)\n`);
  const load = await execa(process.execPath, [path.join(packageRoot, 'bin', 'provisioner.js'), 'images', 'load', '--dir', dir, ...images.map((i) => i.file)], { stdio: 'inherit', reject: false });
  if (load.exitCode !== 0) throw new Error(`provisioner images load exited ${load.exitCode}`);

  const workDir = path.join(dir, 'conformance');
  process.stdout.write(`conformance: running e2e.test (${values.focus ? `[Conformance] tests matching ${JSON.stringify(values.focus)}` : 'every [Conformance] test'}); its output goes to ${path.join(workDir, 'e2e.log')}\n`);
  const run = await runSuite({
    e2eTest: binaries['e2e.test']!,
    kubectl: binaries.kubectl!,
    kubeconfig: path.join(dir, 'auth', 'kubeconfig'),
    focus: values.focus ?? '.',
    labelFilter: 'Conformance',
    workDir,
    timeout: '24h',
    run: async (command, args, env) => {
      const result = await execa(command, args, { env, cwd: workDir, reject: false });
      return { exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr };
    },
  });
  const ran = run.specs.filter((s) => s.state !== 'skipped' && s.state !== 'pending');
  const passed = ran.filter((s) => s.state === 'passed');
  const notRunnable = ran.filter((s) => s.state !== 'passed').map((s) => ({ spec: s, images: missingImages(s) })).filter((x) => x.images.length > 0);
  const failed = ran.filter((s) => s.state !== 'passed' && !notRunnable.some((x) => x.spec === s));
  const lines: string[] = [];
  for (const spec of passed) lines.push(`  passed        ${spec.seconds.toFixed(1).padStart(6)}s  ${spec.name}`);
  for (const spec of failed) lines.push(`  FAILED        ${spec.seconds.toFixed(1).padStart(6)}s  ${spec.name}\n      ${(spec.failure ?? spec.state).split('\n')[0]}`);
  for (const { spec, images: refs } of notRunnable) lines.push(`  not runnable  ${spec.seconds.toFixed(1).padStart(6)}s  ${spec.name}\n      needs ${refs.join(', ')} (not built here)`);
  process.stdout.write(`${lines.join('\n')}\n`);
  process.stdout.write(`conformance: ${passed.length} passed, ${failed.length} failed, ${notRunnable.length} not runnable, of ${ran.length} [Conformance] tests run in ${run.seconds.toFixed(0)}s (report: ${path.join(workDir, 'report.json')})\n`);
  if (run.exitCode !== 0 && failed.length === 0) process.stdout.write(`conformance: e2e.test exited ${run.exitCode} (see ${run.logFile})\n`);
  process.exitCode = failed.length > 0 || (ran.length === 0 && run.exitCode !== 0) ? 1 : 0;
}

main().catch((error: unknown) => {
  process.stderr.write(`conformance: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
