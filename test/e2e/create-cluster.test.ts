/**
 * `create cluster` end to end, as a new user runs it: `node bin/provisioner.js` with the
 * real bundled binaries on the in-memory platform, then `kubectl` on the new cluster, then
 * `destroy cluster`. Faults: a failing user hook, SIGKILL of the CLI during the machines
 * (and then of every control-plane process, as a reboot would),
 * SIGINT during the wait, bad input, webhook ports taken while the control plane starts.
 * dist/ is rebuilt first when older than src/.
 *
 * Fails (never skips) without the bundle: every CLI run then exits 4, and the kubectl
 * lookup throws with the bundle hint. Each group cleans up after itself before the next
 * starts — `destroy cluster`, then SIGKILL of whatever a pidfile still records, then the
 * dir is removed — so no group's cluster takes the CPU of the next. Creates pass
 * `--no-progress-timeout 5` so a stall ends as the CLI's own error naming what blocks,
 * well before the test's timeout.
 */
import { chmod, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { execa } from 'execa';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/errors.js';
import { exists } from '../../src/files.js';
import type { PidfileEntry } from '../../src/process/pidfile.js';
import { aliveRecorded, killRecorded, recordedProcesses, stillAliveAfter, waitFor } from '../integration/support/controlplane.js';
import {
  cli,
  editInstallConfig,
  ensureBuilt,
  getNodes,
  kubectl,
  processesMentioning,
  readJournal,
  startCli,
  type BackgroundCli,
  type CliRun,
} from './support/cli.js';
import { step } from './support/steps.js';
import { runTempDir } from '../support/run-dirs.js';

/** Longest one `create cluster` of 3+2 may take on a loaded 2-core machine before the test calls it hung. */
const createTimeoutMs = 900_000;
/** `--no-progress-timeout` of every create, in minutes: in-memory machines change state every few seconds. */
const stallMinutes = '5';
const destroyTimeoutMs = 300_000;
/** Processes of the local control plane: etcd, kube-apiserver and capi-manager (serving the four providers). */
const controlPlaneProcesses = 3;

/** Every stage `create cluster` journals, in order. */
const journaledStages = [
  'manifests',
  'controlplane',
  'preflight',
  'hooks/pre-provision',
  'infrastructure',
  'wait-infrastructure',
  'hooks/infra-ready',
  'hooks/bootstrap-data',
  'control-plane',
  'workers',
  'wait-cluster',
  'hooks/post-provision',
  'hand-off',
];

const dirs: string[] = [];
const background: BackgroundCli[] = [];

async function newInstallDir(prefix: string): Promise<string> {
  const dir = await runTempDir(`e2e-${prefix}`);
  dirs.push(dir);
  return dir;
}

/** `create install-config` with flags, as a user without a terminal runs it. */
async function installConfig(dir: string, controlPlane: number, workers: number): Promise<void> {
  const run = await cli(['create', 'install-config', '--dir', dir, '--name', 'demo', '--control-plane-replicas', String(controlPlane), '--workers', String(workers)], 60_000);
  expect(run.exitCode, run.stderr).toBe(0);
}

/** `create cluster` args with the stall limit; extra args after. */
function createArgs(dir: string, ...extra: string[]): string[] {
  return ['create', 'cluster', '--dir', dir, '--no-progress-timeout', stallMinutes, ...extra];
}

/** Runs `create cluster` to its end. */
async function createCluster(dir: string, ...extra: string[]) {
  await kubectl(); // throws with the bundle hint, at once, when the bundle is missing
  return cli(createArgs(dir, ...extra), createTimeoutMs);
}

async function startCreate(dir: string): Promise<BackgroundCli> {
  await kubectl();
  const run = startCli(createArgs(dir), createTimeoutMs);
  background.push(run);
  return run;
}

/** Destroys what `dir` holds, kills what a pidfile still records, removes the dir. */
async function dispose(dir: string): Promise<void> {
  if (!dir || !dirs.includes(dir)) return;
  dirs.splice(dirs.indexOf(dir), 1);
  if (await exists(path.join(dir, '.provisioner', 'controlplane'))) {
    const run = await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs).catch(() => undefined);
    if (run?.exitCode !== 0) process.stderr.write(`cleanup: destroy cluster --dir ${dir} exited ${run?.exitCode}:\n${run?.stderr}\n`);
  }
  // The safety net: whatever a pidfile still records dies.
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

async function logBundles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => /^log-bundle-.*\.tar\.gz$/.test(f)).map((f) => path.join(dir, f));
}

/** Pidfiles of the local control plane (none when it never started). */
async function pidfileNames(dir: string): Promise<string[]> {
  return readdir(path.join(dir, '.provisioner', 'controlplane', 'pids')).catch(() => []);
}

function kubeconfigOf(dir: string): string {
  return path.join(dir, 'auth', 'kubeconfig');
}

/** The workload cluster's API server URL, from its kubeconfig. */
async function workloadServer(dir: string): Promise<string> {
  const server = /^\s*server:\s*(\S+)/m.exec(await readFile(kubeconfigOf(dir), 'utf8'))?.[1];
  if (!server) throw new Error(`no server in ${kubeconfigOf(dir)}`);
  return server;
}

async function expectReadyNodes(dir: string, count: number): Promise<void> {
  const nodes = await getNodes(kubeconfigOf(dir));
  expect(nodes, JSON.stringify(nodes)).toHaveLength(count);
  expect(nodes.filter((n) => !n.ready).map((n) => n.name)).toEqual([]);
}

beforeAll(async () => {
  await ensureBuilt();
});

afterAll(async () => {
  for (const run of background) if (!run.ended()) run.child.kill('SIGKILL');
  for (const dir of [...dirs]) await dispose(dir);
});

describe('acceptance: install-config (3 control-plane + 2 workers), create cluster, kubectl, destroy', () => {
  let dir = '';
  /** The create every test here looks at: run once, before them, so each can also run alone (`-t`). */
  let create: CliRun | undefined;
  let recorded: PidfileEntry[] = [];
  /** Each test's precondition: the create succeeded (its stderr says why not). */
  const expectCreated = () => expect(create?.exitCode, `create cluster did not succeed:\n${create?.stderr}`).toBe(0);
  beforeAll(async () => {
    await kubectl(); // fails here, with the bundle hint, when the bundle is missing
    dir = await newInstallDir('accept');
    await installConfig(dir, 3, 2);
    create = await createCluster(dir);
  }, createTimeoutMs); // beyond the e2e tier's hook timeout: a 3+2 create
  afterAll(() => dispose(dir));

  it('create cluster exits 0 and prints auth/kubeconfig on stdout', () => {
    expectCreated();
    expect(create!.stdout.trim()).toBe(kubeconfigOf(dir));
  });

  it('the kubeconfig is 0600 and kubectl lists 5 nodes, each Ready', async () => {
    expectCreated();
    expect((await stat(kubeconfigOf(dir))).mode & 0o777).toBe(0o600);
    await expectReadyNodes(dir, 5);
  });

  it('wait-for install-complete on the running cluster adopts its control plane, asks the workload API, exits 0 and prints auth/kubeconfig', async () => {
    expectCreated();
    const before = (await aliveRecorded(dir)).map((e) => e.pid).sort();
    const run = await cli(['wait-for', 'install-complete', '--dir', dir, '--no-progress-timeout', stallMinutes], createTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(kubeconfigOf(dir));
    expect(run.stderr).toContain('Using the control plane already running');
    // create cluster's own healthy-wait: the conditions, then the workload cluster's API.
    expect(run.stderr).toContain("The workload cluster's API answers with 5 Ready node(s)");
    expect((await aliveRecorded(dir)).map((e) => e.pid).sort()).toEqual(before);
    expect((await stat(kubeconfigOf(dir))).mode & 0o777).toBe(0o600);
  });

  it('the journal has every stage succeeded; the final state file holds no Secret', async () => {
    expectCreated();
    const journal = await readJournal(dir);
    expect(journal.runs).toBe(1);
    expect(journal.completedAt).toBeDefined();
    expect(Object.keys(journal.stages)).toEqual(expect.arrayContaining(journaledStages));
    const notSucceeded = Object.entries(journal.stages).filter(([, r]) => r.state !== 'succeeded');
    expect(notSucceeded).toEqual([]);

    const state = await readFile(path.join(dir, '.provisioner', 'cluster-state.yaml'), 'utf8');
    const kinds = parseAllDocuments(state).map((d) => (d.toJS() as { kind?: string } | null)?.kind);
    expect(kinds).toEqual(expect.arrayContaining(['Cluster', 'KubeadmControlPlane', 'MachineDeployment', 'Machine']));
    expect(kinds.filter((k) => k === 'Machine')).toHaveLength(5);
    expect(kinds).not.toContain('Secret');
    expect(state).not.toMatch(/^kind: Secret\s*$/m);
  });

  it('destroy cluster exits 0, leaves no process alive and no control plane, keeps install-config.yaml and cluster-api/', async () => {
    expectCreated();
    recorded = await recordedProcesses(dir);
    expect(recorded).toHaveLength(controlPlaneProcesses);
    expect(recorded.filter((e) => !e.detached).map((e) => e.name)).toEqual([]);
    expect((await aliveRecorded(dir)).length).toBe(controlPlaneProcesses);

    const run = await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('destroyed demo/demo');
    expect(run.stderr).toContain('Every Cluster API object of demo/demo is gone');
    expect((await stillAliveAfter(recorded, 5_000)).map((e) => `${e.name} ${e.pid}`)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);

    expect(await exists(path.join(dir, '.provisioner', 'controlplane'))).toBe(false);
    expect(await exists(path.join(dir, 'auth'))).toBe(false);
    expect(await exists(path.join(dir, 'install-config.yaml'))).toBe(true);
    expect((await readdir(path.join(dir, 'cluster-api'))).filter((f) => f.endsWith('.yaml')).length).toBeGreaterThan(0);
  });
});

describe('a failing pre-provision hook (1 + 1)', () => {
  let dir = '';
  const marker = 'E2E-HOOK-MARKER';
  afterAll(() => dispose(dir));

  // Each test runs the steps it stands on (step(): at most once per file), so each also passes alone.
  const failedCreate = step(async () => {
    dir = await newInstallDir('hook');
    await installConfig(dir, 1, 1);
    await writeFile(path.join(dir, 'fail.sh'), `#!/bin/sh\necho "${marker} stage=$PROVISIONER_STAGE kubeconfig=$KUBECONFIG"\necho "to stderr too" >&2\nexit 3\n`);
    await chmod(path.join(dir, 'fail.sh'), 0o755);
    await editInstallConfig(dir, (doc) => {
      doc.hooks = { preProvision: [{ path: './fail.sh' }] };
    });

    const run = await createCluster(dir);
    expect(run.exitCode, run.stderr).toBe(ExitCode.hook);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`${marker} stage=pre-provision kubeconfig=${path.join(dir, 'auth', 'management.kubeconfig')}`);
    expect(run.stderr).toContain('to stderr too');
    expect(run.stderr).toMatch(/hook \.\/fail\.sh exited with code 3/);
    expect(run.stderr).toContain('Next step:');

    const journal = await readJournal(dir);
    expect(journal.stages['hooks/pre-provision']?.state).toBe('failed');
    expect(journal.stages['hooks/pre-provision']?.error).toMatch(/exited with code 3/);
    expect(journal.stages['preflight']?.state).toBe('succeeded');
    expect(journal.stages['infrastructure']).toBeUndefined();
    expect(journal.completedAt).toBeUndefined();
    expect(await readFile(path.join(dir, 'logs', 'hooks', 'pre-provision-1.log'), 'utf8')).toContain(marker);

    // The automatic log bundle: named on the terminal, holding the hook's output and no private key.
    const bundles = await logBundles(dir);
    expect(bundles).toHaveLength(1);
    expect(run.stderr).toContain(`Log bundle for this failure: ${bundles[0]}`);
    expect((await stat(bundles[0]!)).mode & 0o777).toBe(0o600);
    const content = await execa('tar', ['-xzOf', bundles[0]!], { encoding: 'utf8', maxBuffer: 512 * 2 ** 20 });
    expect(content.stdout).toContain(marker);
    expect(content.stdout).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
  });

  it('create cluster exits 7 (hook) with the hook output and exit code on stderr; the journal shows the hook stage failed', failedCreate);

  it('destroy cluster after the failed create exits 0 and stops the control plane left running', async () => {
    await failedCreate();
    const recorded = await recordedProcesses(dir);
    expect(recorded).toHaveLength(controlPlaneProcesses);
    const run = await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('nothing to destroy');
    expect((await stillAliveAfter(recorded, 5_000)).map((e) => e.name)).toEqual([]);
    expect(await exists(path.join(dir, '.provisioner', 'controlplane'))).toBe(false);
  });
});

describe('resume after SIGKILL of the CLI during the machines (1 + 1)', () => {
  let dir = '';
  let survivors: PidfileEntry[] = [];
  afterAll(() => dispose(dir));

  const killed = step(async () => {
    dir = await newInstallDir('sigkill');
    await installConfig(dir, 1, 1);
    const first = await startCreate(dir);
    // Killed once the wait for the machines is journaled (before it is announced) and runs: tens of seconds here.
    // Not at `workers` started: that stage (a MachineDeployment applied) ends within milliseconds on this platform, so a
    // kill sent when its line is read can land after it ended and before the wait was journaled, with no stage running
    // (seen once, run alone).
    await first.waitForStderr(/stage wait-cluster started/, createTimeoutMs);
    first.child.kill('SIGKILL');
    const ended = await first.result();
    expect(ended.signal).toBe('SIGKILL');

    const journal = await readJournal(dir);
    const running = Object.entries(journal.stages).filter(([, r]) => r.state === 'running').map(([name]) => name);
    expect(running).toHaveLength(1);
    expect(running[0]).toBe('wait-cluster');
    expect(journal.completedAt).toBeUndefined();

    survivors = await aliveRecorded(dir);
    expect(survivors).toHaveLength(controlPlaneProcesses);
  });

  const resumed = step(async () => {
    await killed();
    // Its own cluster holds the in-memory port: no wait for it here.
    const run = await cli(createArgs(dir), createTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(kubeconfigOf(dir));
    expect(run.stderr).toContain('Resuming: run 2');
    expect(run.stderr).toContain('Using the control plane already running');
    await expectReadyNodes(dir, 2);

    const journal = await readJournal(dir);
    expect(journal.runs).toBe(2);
    expect(journal.completedAt).toBeDefined();
    expect(Object.entries(journal.stages).filter(([, r]) => r.state !== 'succeeded')).toEqual([]);
    // Adopted, not restarted: the same processes serve the cluster.
    expect((await aliveRecorded(dir)).map((e) => e.pid).sort()).toEqual(survivors.map((e) => e.pid).sort());
  });

  it('leaves the journal stage running and the detached control plane up', killed);

  it('create cluster again adopts the control plane, resumes, exits 0 with every node Ready', resumed, 2 * createTimeoutMs);

  it('after every process of the control plane is killed (as by a reboot), create cluster again restarts it from its data and the in-memory provider brings the nodes back, also when another program held the cluster\'s port meanwhile', async () => {
    await resumed();
    const before = await aliveRecorded(dir);
    await killRecorded(dir);
    expect(await aliveRecorded(dir)).toEqual([]);
    // While the provider is down its cluster's port is free, and another program can take it (as in CI run D, most
    // likely another control plane's in-memory provider picking a port). The restarted provider's first listen then
    // fails; it must listen again once the port is free. The port is held until capi-manager's log shows that failure.
    const port = Number(new URL(await workloadServer(dir)).port);
    const listenFailed = /failed to start WorkloadClusterListener[^\n]*:\d+/g;
    const managerLog = path.join(dir, 'logs', 'capi-manager.log');
    const failuresBefore = (await readFile(managerLog, 'utf8')).match(listenFailed)?.length ?? 0;
    // killRecorded waited until every killed process's last thread was gone (process/proc.ts), so its sockets are closed.
    const holder = await hold(port);
    const create = await startCreate(dir);
    try {
      await waitFor('capi-manager to fail to listen on the held port', async () => ((await readFile(managerLog, 'utf8')).match(listenFailed)?.length ?? 0) > failuresBefore, 300_000);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
    const run = await create.result();
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('Using the control plane already running');
    // The Cluster API conditions survived in etcd; the workload API, served by the restarted provider, is what the wait checks.
    expect(run.stderr).toContain("The workload cluster's API answers with 2 Ready node(s)");
    const after = await aliveRecorded(dir);
    expect(after).toHaveLength(controlPlaneProcesses);
    expect(after.map((e) => e.pid).filter((pid) => before.some((b) => b.pid === pid))).toEqual([]);
    await expectReadyNodes(dir, 2);
  }, 3 * createTimeoutMs);
});

describe('bad input loses nothing', () => {
  it('two errors in install-config.yaml: exit 3 naming both fields, no control plane started, the file untouched', async () => {
    const dir = await newInstallDir('bad');
    await installConfig(dir, 3, 2);
    await editInstallConfig(dir, (doc) => {
      const pools = doc.machinePools as { quantity: number }[];
      pools[0]!.quantity = 2;
      // Overlapping blocks, carved from the test range like every test cluster's.
      doc.networking = { podCIDRs: ['198.19.0.0/17'], serviceCIDRs: ['198.19.64.0/20'] };
    });
    const before = await readFile(path.join(dir, 'install-config.yaml'), 'utf8');

    const run = await cli(createArgs(dir), 120_000);
    expect(run.exitCode, run.stderr).toBe(ExitCode.config);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('machinePools[0].quantity');
    expect(run.stderr).toContain('networking.serviceCIDRs[0]');
    expect(await pidfileNames(dir)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
    expect(await readFile(path.join(dir, 'install-config.yaml'), 'utf8')).toBe(before);
    // Bad input ran nothing: no log bundle.
    expect(await logBundles(dir)).toEqual([]);
    await dispose(dir);
  });
});

/** Listens on 127.0.0.1:`port` until closed: another program holding the port. */
function hold(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

interface PortsFile {
  controllers: Record<string, { webhook: number }>;
}

describe('busy webhook ports while the control plane starts (create cluster --dry-run, 1 + 1)', () => {
  let dir = '';
  const held: Server[] = [];
  afterAll(async () => {
    for (const server of held) server.close();
    await dispose(dir);
  });

  it('every controller whose webhook port was taken starts on a new one, and the preflight reaches every webhook', async () => {
    dir = await newInstallDir('ports');
    await installConfig(dir, 1, 1);
    const run = startCli(['create', 'cluster', '--dir', dir, '--dry-run'], createTimeoutMs);
    background.push(run);
    // ports.json is written once the API server is up; the controllers start after the CRDs.
    await run.waitForStderr(/stage controlplane\/crds started/, 300_000);
    const portsFile = path.join(dir, '.provisioner', 'controlplane', 'ports.json');
    const planned = JSON.parse(await readFile(portsFile, 'utf8')) as PortsFile;
    const taken = Object.entries(planned.controllers).map(([name, p]) => ({ name, port: p.webhook }));
    expect(taken).toHaveLength(controlPlaneProcesses - 2);
    for (const { port } of taken) held.push(await hold(port));

    const ended = await run.result();
    expect(ended.exitCode, ended.stderr).toBe(0);
    expect(ended.stdout).toMatch(/\d+ objects valid; nothing applied/);
    for (const { name } of taken) expect(ended.stderr).toContain(`${name}: a port was taken by another program; retrying on new ports`);
    const served = JSON.parse(await readFile(portsFile, 'utf8')) as PortsFile;
    for (const { name, port } of taken) expect(served.controllers[name]?.webhook, name).not.toBe(port);
    // A dry-run's control plane is temporary.
    expect(await aliveRecorded(dir)).toEqual([]);
  });
});

describe('SIGINT during wait-cluster, then resume with --output json (1 + 1)', () => {
  let dir = '';
  afterAll(() => dispose(dir));

  const interrupted = step(async () => {
    dir = await newInstallDir('sigint');
    await installConfig(dir, 1, 1);
    const first = await startCreate(dir);
    await first.waitForStderr(/stage wait-cluster started/, createTimeoutMs);
    // Let the watches start, so the interrupt lands inside the wait.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(first.ended()).toBe(false);
    const sent = performance.now();
    first.child.kill('SIGINT');
    const ended = await first.result();
    const exitMs = performance.now() - sent;
    expect(ended.exitCode, ended.stderr).toBe(ExitCode.interrupted);
    expect(exitMs).toBeLessThan(30_000);
    expect(ended.stderr).toContain('SIGINT received');
    expect(ended.stderr).toMatch(/Interrupted while waiting/);

    const journal = await readJournal(dir);
    expect(journal.stages['wait-cluster']?.state).toBe('interrupted');
    expect(journal.completedAt).toBeUndefined();
    expect(await aliveRecorded(dir)).toHaveLength(controlPlaneProcesses);
  });

  it('exits 130 soon after SIGINT, journals the wait as interrupted, leaves the control plane up', interrupted);

  it('create cluster --output json resumes to exit 0: every stdout line is a JSON event, with stages and a final cluster result', async () => {
    await interrupted();
    const run = await cli(createArgs(dir, '--output', 'json'), createTimeoutMs);
    expect(run.exitCode, run.stderr + run.stdout.slice(-4000)).toBe(0);

    const lines = run.stdout.split('\n').filter((l) => l.trim() !== '');
    const events = lines.map((line) => {
      const parsed = JSON.parse(line) as { type?: unknown; [k: string]: unknown };
      expect(typeof parsed.type, line).toBe('string');
      return parsed as { type: string; stage?: string; state?: string; kind?: string; text?: string; data?: { kubeconfig?: string; resumed?: boolean } };
    });
    const stages = events.filter((e) => e.type === 'stage');
    expect(stages.find((e) => e.stage === 'wait-cluster' && e.state === 'succeeded')).toBeDefined();
    expect(stages.find((e) => e.stage === 'hand-off' && e.state === 'succeeded')).toBeDefined();
    // Hooks done in the interrupted run are not run again.
    expect(stages.find((e) => e.stage === 'hooks/pre-provision')?.state).toBe('skipped');
    const results = events.filter((e) => e.type === 'result');
    expect(results.map((e) => e.kind)).toEqual(['cluster']);
    expect(results[0]?.text).toBe(kubeconfigOf(dir));
    expect(results[0]?.data?.kubeconfig).toBe(kubeconfigOf(dir));
    expect(results[0]?.data?.resumed).toBe(true);
    expect(events.indexOf(results[0]!)).toBeGreaterThan(events.lastIndexOf(stages.at(-1)!));

    await expectReadyNodes(dir, 2);
    const journal = await readJournal(dir);
    expect(journal.runs).toBe(2);
    expect(journal.stages['wait-cluster']?.state).toBe('succeeded');
  }, 2 * createTimeoutMs);
});
