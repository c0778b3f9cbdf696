/**
 * `provisioner management start|stop|status` as a user runs it: `node bin/provisioner.js`
 * with the real bundled binaries, detached processes owned by the install directory.
 * Faults: a second command on the same directory, SIGKILL of every control-plane process,
 * SIGKILL of the CLI in the middle of a start. dist/ is rebuilt first when it is older than
 * src/. Fails (never skips) when the bundle is missing: `management start` exits 4 with the hint.
 */
import { readFile, stat, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalog, packageRoot } from '../../src/embedded/catalog.js';
import { loadComponents } from '../../src/controlplane/install.js';
import { ExitCode } from '../../src/errors.js';
import { managementControllers } from '../../src/services/management.js';
import { KubeClient } from '../../src/kube/client.js';
import { stateDirEnv, type PidfileEntry } from '../../src/process/pidfile.js';
import { processesWithEnv } from '../../src/process/proc.js';
import {
  aliveRecorded,
  GiveUp,
  expectedProcessCount,
  recordedProcesses,
  removeInstallDir,
  stateDirOf,
  stillAliveAfter,
  tempInstallDir,
  waitFor,
} from './support/controlplane.js';

const cliPath = path.join(packageRoot, 'bin', 'provisioner.js');
/** Longest a full boot may take on a loaded 2-core machine before the test calls it hung. */
const bootTimeoutMs = 240_000;
/** "Fast": a command that boots nothing. Node alone takes seconds to start on a loaded 2-core machine; a boot takes 20 s or more. */
const fastMs = 15_000;
/** An install config of the hosts platform (its listen address is not used by `management start`). */
const hostsInstallConfig = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
platform:
  hosts: {}
bootstrap:
  listenAddress: 198.19.0.1
`;

/** Newest mtime of the compiled sources under `dir` (tests excluded). */
async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, await newestSource(file));
    else if (/\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name)) newest = Math.max(newest, (await stat(file)).mtimeMs);
  }
  return newest;
}

/** `npm run build` when dist/main.js is missing or older than a source file. */
async function ensureBuilt(): Promise<void> {
  const built = await stat(path.join(packageRoot, 'dist', 'main.js')).then((s) => s.mtimeMs, () => 0);
  if (built >= (await newestSource(path.join(packageRoot, 'src')))) return;
  const build = await execa('npm', ['run', 'build'], { cwd: packageRoot, reject: false, all: true });
  if (build.exitCode !== 0) throw new Error(`npm run build failed:\n${build.all}`);
}

interface CliRun {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  durationMs: number;
}

async function cli(args: string[], timeoutMs = bootTimeoutMs): Promise<CliRun> {
  const started = performance.now();
  const run = await execa(process.execPath, [cliPath, ...args], { cwd: packageRoot, reject: false, timeout: timeoutMs });
  return { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr, durationMs: performance.now() - started };
}

/** Starts `management start` in the background; resolves once its stderr matches `line`. */
async function startUntil(dir: string, line: RegExp): Promise<{ child: ResultPromise; stderr: () => string }> {
  const child = execa(process.execPath, [cliPath, 'management', 'start', '--dir', dir], { cwd: packageRoot, reject: false, timeout: bootTimeoutMs });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let exited = false;
  void child.then(() => (exited = true));
  await waitFor(`"${line.source}" on the stderr of management start`, () => {
    if (line.test(stderr)) return true;
    if (exited) throw new GiveUp(`management start exited first:\n${stderr}`);
    return false;
  }, 120_000);
  return { child, stderr: () => stderr };
}

interface StatusRow {
  name: string;
  pid: number;
  running: boolean;
  healthy: boolean | undefined;
  logFile: string;
}

/** `management status --output json`: every stdout line is JSON; the result event holds the processes. */
async function statusJson(dir: string): Promise<StatusRow[]> {
  const run = await cli(['management', 'status', '--dir', dir, '--output', 'json'], 60_000);
  expect(run.exitCode, run.stderr).toBe(0);
  const events = run.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as { type: string; kind?: string; data?: { processes: StatusRow[] } });
  const result = events.find((e) => e.type === 'result' && e.kind === 'status');
  expect(result?.data?.processes, run.stdout).toBeDefined();
  return result!.data!.processes;
}

/** The last 40 lines of each log, read now: the run's temp dirs are gone by the time anyone reads a CI log. */
async function logTails(logFiles: readonly string[]): Promise<string> {
  const tails: string[] = [];
  for (const file of logFiles) tails.push(`${file}:\n${(await readFile(file, 'utf8').catch((e: Error) => e.message)).split('\n').slice(-40).join('\n')}`);
  return tails.join('\n\n');
}

async function expectAllHealthy(dir: string): Promise<void> {
  const processes = await statusJson(dir);
  expect(processes).toHaveLength(await expectedProcessCount());
  const unhealthy = processes.filter((p) => !(p.running && p.healthy));
  expect(unhealthy.map((p) => p.name), `${JSON.stringify(unhealthy)}\n${await logTails(unhealthy.map((p) => p.logFile))}`).toEqual([]);
}

function killAll(entries: readonly PidfileEntry[]): void {
  for (const entry of entries) {
    try {
      process.kill(entry.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

describe('provisioner management, as a user runs it', () => {
  const dirs: string[] = [];
  const children: ResultPromise[] = [];

  const newDir = async (prefix: string) => {
    const dir = await tempInstallDir(prefix);
    dirs.push(dir);
    return dir;
  };

  beforeAll(async () => {
    await ensureBuilt();
  });

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    for (const dir of dirs) {
      await cli(['management', 'stop', '--dir', dir], 60_000).catch(() => undefined);
      await removeInstallDir(dir);
    }
  });

  describe('start, status, restart after a kill, stop', () => {
    // One running control plane serves the block; a test run alone (or after `stop`) starts it itself.
    let dir = '';
    const kubeconfig = () => path.join(dir, 'auth', 'management.kubeconfig');
    const running = async (): Promise<string> => {
      if (!dir) dir = await newDir('mgmt');
      if ((await aliveRecorded(dir)).length !== (await expectedProcessCount())) {
        const run = await cli(['management', 'start', '--dir', dir]);
        expect(run.exitCode, run.stderr).toBe(0);
      }
      return dir;
    };

    it('start prints the kubeconfig path on stdout and exits 0', async () => {
      dir = await newDir('mgmt');
      const run = await cli(['management', 'start', '--dir', dir]);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe(kubeconfig());
      expect(run.stderr).toMatch(/Management cluster ready in/);
      expect((await stat(kubeconfig())).mode & 0o777).toBe(0o600);
    });

    it('status lists every process healthy (etcd, the API server, one manager per bundled binary), as a table and as JSON lines', async () => {
      await running();
      const run = await cli(['management', 'status', '--dir', dir], 60_000);
      expect(run.exitCode, run.stderr).toBe(0);
      // The table, then the kubeconfig line, then one line per unhealthy process saying why.
      const lines = run.stdout.split('\n');
      const rows = lines.slice(1, lines.findIndex((l) => l.startsWith('kubeconfig:'))).filter((l) => l.trim());
      const managers = [...new Set((await loadCatalog()).components.flatMap((c) => (c.binary ? [c.binary] : [])))];
      expect(rows.map((r) => r.split(/\s+/)[0]).sort()).toEqual(['etcd', 'kube-apiserver', ...managers].sort());
      // On failure: the whole output (its last lines say why) and each such process's log tail (the row's last column).
      const notHealthy = rows.filter((row) => row.split(/\s+/)[2] !== 'healthy');
      expect(notHealthy, `${run.stdout}\n${await logTails(notHealthy.map((row) => row.split(/\s+/).at(-1)!))}`).toEqual([]);
      expect(run.stdout).toContain(`kubeconfig: ${kubeconfig()}`);
      await expectAllHealthy(dir);
    });

    it('start again while it runs says "already running", fast, and changes nothing', async () => {
      await running();
      const before = (await aliveRecorded(dir)).map((e) => e.pid).sort();
      const run = await cli(['management', 'start', '--dir', dir], 60_000);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe(kubeconfig());
      expect(run.stderr).toContain('already running');
      expect(run.durationMs).toBeLessThan(fastMs);
      expect((await aliveRecorded(dir)).map((e) => e.pid).sort()).toEqual(before);
    });

    it('keeps its objects when every process is killed with SIGKILL and started again', async () => {
      await running();
      const kube = KubeClient.fromFile(kubeconfig());
      try {
        await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'survives-sigkill' } });
      } finally {
        kube.close();
      }
      const entries = await aliveRecorded(dir);
      expect(entries).toHaveLength(await expectedProcessCount());
      killAll(entries);
      expect(await stillAliveAfter(entries, 10_000)).toEqual([]);

      const run = await cli(['management', 'start', '--dir', dir]);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stderr).not.toContain('already running');
      await expectAllHealthy(dir);
      const again = KubeClient.fromFile(kubeconfig());
      try {
        const ns = await again.get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'survives-sigkill' } });
        expect(ns?.metadata.name).toBe('survives-sigkill');
      } finally {
        again.close();
      }
    });

    it('stop leaves no recorded process alive', async () => {
      await running();
      const entries = await aliveRecorded(dir);
      expect(entries).toHaveLength(await expectedProcessCount());
      const run = await cli(['management', 'stop', '--dir', dir], 120_000);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^stopped /);
      expect(await stillAliveAfter(entries, 0)).toEqual([]);
      expect(await recordedProcesses(dir)).toEqual([]);
      const again = await cli(['management', 'stop', '--dir', dir], 60_000);
      expect(again.exitCode).toBe(0);
      expect(again.stdout.trim()).toBe('nothing was running');
    });
  });

  describe('start --platform hosts', () => {
    it('runs only the hosts providers (one capi-manager: core, kubeadm and agent) and installs only their CRDs', async () => {
      const dir = await newDir('mgmt-hosts');
      await expectHostsProvidersOnly(dir, ['--platform', 'hosts']);
    });

    it("without --platform, runs only the providers of the install config's platform", async () => {
      const dir = await newDir('mgmt-install');
      await writeFile(path.join(dir, 'install-config.yaml'), hostsInstallConfig, { mode: 0o600 });
      const stderr = await expectHostsProvidersOnly(dir, []);
      expect(stderr).toContain("Running the providers of platform hosts, the install config's (--platform names another)");
    });

    /** Starts `management start --dir dir ...args`, checks that only the hosts platform's providers run and their CRDs alone are served, stops it; returns start's stderr. */
    async function expectHostsProvidersOnly(dir: string, args: string[]): Promise<string> {
      const run = await cli(['management', 'start', '--dir', dir, ...args]);
      expect(run.exitCode, run.stderr).toBe(0);
      const catalog = await loadCatalog();
      const wanted = new Set(managementControllers('hosts').map((c) => c.provider));
      const selected = catalog.components.filter((c) => wanted.has(c.provider));
      const others = catalog.components.filter((c) => !wanted.has(c.provider));
      // The bundle carries other platforms' providers, or this test would show nothing.
      expect(others.filter((c) => c.binary).length).toBeGreaterThan(0);
      const managers = [...new Set(selected.flatMap((c) => (c.binary ? [c.binary] : [])))];
      const processes = await statusJson(dir);
      expect(processes.map((p) => p.name).sort()).toEqual(['etcd', 'kube-apiserver', ...managers].sort());
      expect(processes.filter((p) => !(p.running && p.healthy)).map((p) => p.name)).toEqual([]);

      const crdsOf = async (components: typeof catalog.components) =>
        (await Promise.all(components.map((c) => loadComponents(c.provider, c.namespace, catalog.componentsPath(c))))).flatMap((c) =>
          c.objects.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name),
        );
      const kube = KubeClient.fromFile(path.join(dir, 'auth', 'management.kubeconfig'));
      try {
        const served = (await kube.list('apiextensions.k8s.io/v1', 'CustomResourceDefinition')).map((o) => o.metadata.name);
        expect(served.sort()).toEqual((await crdsOf(selected)).sort());
        const unserved = await crdsOf(others);
        expect(unserved.length).toBeGreaterThan(0);
        expect(served.filter((name) => unserved.includes(name))).toEqual([]);
      } finally {
        kube.close();
      }
      const stopped = await cli(['management', 'stop', '--dir', dir], 120_000);
      expect(stopped.exitCode, stopped.stderr).toBe(0);
      return run.stderr;
    }

    it('refuses an unknown platform with a usage error naming the choices', async () => {
      const dir = await newDir('mgmt-unknown');
      const run = await cli(['management', 'start', '--dir', dir, '--platform', 'nowhere'], 60_000);
      expect(run.exitCode).toBe(ExitCode.usage);
      expect(run.stderr).toContain('unknown platform "nowhere"');
      expect(run.stderr).toContain('hosts');
      expect(run.durationMs).toBeLessThan(fastMs);
    });
  });

  describe('a start interrupted', () => {
    /** A `management start` in a new directory, left running once its stderr matches `line`. */
    const interruptedStart = async (prefix: string, line: RegExp) => {
      const dir = await newDir(prefix);
      const start = await startUntil(dir, line);
      children.push(start.child);
      return { dir, ...start };
    };
    it('refuses a second command on the same --dir with exit 4, naming the holder', async () => {
      const { dir, child } = await interruptedStart('busy', /\betcd ready\b/);
      try {
        const holder = `"management start" (pid ${child.pid}`;
        for (const args of [['management', 'start', '--dir', dir], ['management', 'stop', '--dir', dir]]) {
          const run = await cli(args, 60_000);
          expect(run.exitCode, `${args.join(' ')}: ${run.stderr}`).toBe(ExitCode.environment);
          expect(run.stderr).toContain(holder);
          expect(run.durationMs).toBeLessThan(fastMs);
        }
      } finally {
        child.kill('SIGKILL');
        await child;
        await cli(['management', 'stop', '--dir', dir], 120_000);
      }
    });

    it('leaves nothing running once `management stop` follows a SIGKILL of the CLI after etcd was ready', async () => {
      // Killed at once: left alone, the start would finish and exit by itself.
      const { dir, child } = await interruptedStart('killed', /\betcd ready\b/);
      child.kill('SIGKILL');
      const ended = await child;
      expect(ended.signal).toBe('SIGKILL');
      const left = await aliveRecorded(dir);
      // Detached children outlive the CLI by design: etcd at least was left running.
      expect(left.map((e) => e.name)).toContain('etcd');

      const run = await cli(['management', 'stop', '--dir', dir], 120_000);
      expect(run.exitCode, run.stderr).toBe(0);
      expect(await stillAliveAfter(left, 0)).toEqual([]);
      expect(await aliveRecorded(dir)).toEqual([]);
      // Nor one the killed CLI had started without recording it yet (the kill lands as the API server starts).
      expect(await processesWithEnv(stateDirEnv, stateDirOf(dir))).toEqual([]);
    });

    it('comes back healthy when `management start` follows a SIGKILL of the CLI after the API server was ready', async () => {
      const { dir, child } = await interruptedStart('resumed', /\bkube-apiserver ready\b/);
      child.kill('SIGKILL');
      await child;
      const left = await aliveRecorded(dir);
      expect(left.map((e) => e.name)).toEqual(expect.arrayContaining(['etcd', 'kube-apiserver']));

      const run = await cli(['management', 'start', '--dir', dir]);
      expect(run.exitCode, run.stderr).toBe(0);
      // Half a control plane (no CRDs, no controllers) is not "already running".
      expect(run.stderr).not.toContain('already running');
      // What was left is stopped API server first, so each exits on SIGTERM (an API server whose etcd went first hangs until SIGKILL).
      expect(run.stderr).toMatch(/Stopping kube-apiserver \(pid \d+\) left running/);
      expect(run.stderr).not.toContain('killed with SIGKILL');
      await expectAllHealthy(dir);
      expect(await stillAliveAfter(left, 0)).toEqual([]);
    });
  });
});
