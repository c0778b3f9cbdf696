/**
 * Ctrl-C end to end: a real SIGINT sent to the CLI's process group, as a terminal sends it
 * to its foreground job. The CLI runs `create cluster` on the aws platform, whose local
 * control plane is temporary (it stops when the command ends) and whose infrastructure never
 * becomes ready here (no AWS controller runs), so the command is interrupted, first while a
 * pre-provision hook and the hook's own child run, then, resumed, while it waits for the
 * infrastructure. Each time, only the CLI may get the signal: it stops the hook's whole
 * process group and then its children in order (controllers, API server, etcd), each one
 * reporting "stopped", none "exited" on its own.
 *
 * The same install then shows the no-progress deadline, on a platform whose infrastructure
 * never becomes ready here: fake but well-formed AWS credentials, so the platform's offline
 * check passes, CAPA runs with the file by path, its webhooks default and validate our
 * objects, and it tries to reach AWS at `platform.aws.endpointURL`, a loopback port that
 * refuses every connection (so no query, not even a DNS lookup of AWS's names, leaves the
 * machine): nothing the user sees changes after its first error. Resumed a third time with `--no-progress-timeout 1`, the
 * wait must fail about a minute later — exit 5, naming the Cluster and the condition that
 * blocks it — instead of sitting in wait-infrastructure (it sat there for minutes when the
 * flag was silently ignored). The log bundle has CAPA's log and no credential value.
 * `destroy cluster` then exits 0 and leaves nothing: CAPA keeps the AWSCluster until AWS
 * confirms the deletion, which it cannot here, so the deletion stalls for the no-progress
 * timeout; then the aws platform sees that CAPA recorded nothing it created in AWS and that
 * its calls never got an answer, releases the AWSCluster, says so, and the deletion ends
 * (the control plane is temporary on aws). One install, so one control plane fewer than an
 * install of its own for the stall.
 *
 * Fails (never skips) without the bundle: the CLI then exits 4 before any process starts.
 */
import { readFileSync } from 'node:fs';
import { chmod, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/errors.js';
import { processStartTime } from '../../src/process/proc.js';
import { aliveRecorded, killRecorded, recordedProcesses, waitFor } from '../integration/support/controlplane.js';
import { cli, editInstallConfig, ensureBuilt, fakeAwsKeys, processesMentioning, readJournal, startCli, useFakeAwsCredentials, type BackgroundCli } from './support/cli.js';
import { runTempDir } from '../support/run-dirs.js';
import { step } from './support/steps.js';

/** Longest a start of the control plane and the stages before the interrupt may take on a loaded 2-core machine. */
const bootTimeoutMs = 600_000;
/** From SIGINT to the CLI's exit: the hook's group, then every control-plane process, each within its stop grace. */
const stopTimeoutMs = 90_000;
/** From the start of wait-infrastructure to the CLI's exit: the one-minute deadline, then the log bundle and the ordered stop. */
const stallExitMs = 150_000;

/** One line of `--output json`, as far as these tests read it. */
interface EventLine {
  type: string;
  name?: string;
  stage?: string;
  state?: string;
  message?: string;
}

type ProcessEventLine = EventLine & { type: 'process'; name: string; state: string };

let dir = '';
const runs: BackgroundCli[] = [];

beforeAll(async () => {
  await ensureBuilt();
  dir = await runTempDir('e2e-sigint');
});

afterAll(async () => {
  for (const run of runs) if (!run.ended()) process.kill(-run.pid, 'SIGKILL');
  if (!dir) return;
  // Nothing here outlives the CLI when the test passes; this is the net for when it does not.
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

/** A loopback port nothing listens on (bound, read and closed). */
async function closedLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `create cluster --output json` as a terminal's foreground job: the leader of its own process group. */
function startCreate(): BackgroundCli {
  const run = startCli(['create', 'cluster', '--dir', dir, '--output', 'json'], bootTimeoutMs + stopTimeoutMs, { processGroup: true });
  runs.push(run);
  return run;
}

function events(stdout: string): EventLine[] {
  // The last line may still be on its way.
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{') && line.endsWith('}'))
    .map((line) => JSON.parse(line) as EventLine);
}

function processEvents(stdout: string): ProcessEventLine[] {
  return events(stdout).filter((event): event is ProcessEventLine => event.type === 'process');
}

/** Sends SIGINT to the CLI's process group, as Ctrl-C does; returns what the CLI reported after it. */
async function interrupt(run: BackgroundCli): Promise<{ exitCode: number | undefined; stderr: string; before: ProcessEventLine[]; after: ProcessEventLine[] }> {
  const before = processEvents(run.stdout());
  const recorded = await aliveRecorded(dir);
  // Whatever the platform needs (etcd, the API server, its controllers) was started and still runs.
  const started = startOrder(before);
  expect(started.slice(0, 2)).toEqual(['etcd', 'kube-apiserver']);
  expect(started.length, 'controllers started').toBeGreaterThan(2);
  expect(recorded.map((e) => e.name).sort(), 'every control-plane process runs before the interrupt').toEqual([...started].sort());
  // Nothing of the control plane shares the CLI's process group (a terminal would signal it too).
  for (const entry of recorded) expect(processGroupOf(entry.pid), entry.name).not.toBe(run.pid);
  process.kill(-run.pid, 'SIGINT');
  const ended = await Promise.race([
    run.result(),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`the CLI did not exit within ${stopTimeoutMs} ms of SIGINT:\n${run.stderr()}`)), stopTimeoutMs)),
  ]);
  return { exitCode: ended.exitCode, stderr: ended.stderr, before, after: processEvents(ended.stdout).slice(before.length) };
}

/** Process names in the order they became ready in `events`. */
function startOrder(events: readonly ProcessEventLine[]): string[] {
  return events.filter((e) => e.state === 'ready').map((e) => e.name);
}

/** Checks the ordered stop: each process reported once, "stopped", controllers first, then the API server, then etcd. */
function expectOrderedStop(after: readonly ProcessEventLine[], started: readonly string[]): void {
  expect(after.filter((e) => e.state !== 'stopped').map((e) => `${e.name}: ${e.state} ${e.message ?? ''}`), 'no process ended on its own').toEqual([]);
  expect(after.map((e) => e.name)).toEqual([...started].reverse());
  expect(after.slice(-2).map((e) => e.name)).toEqual(['kube-apiserver', 'etcd']);
  expect(after.every((e) => e.message === 'stopped')).toBe(true);
}

async function expectNothingRunning(): Promise<void> {
  expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
  expect(await processesMentioning(dir)).toEqual([]);
  // The pidfiles went with the processes: stopped, not left behind.
  expect(await recordedProcesses(dir)).toEqual([]);
}

describe('Ctrl-C (SIGINT to the CLI process group) during create cluster with a temporary control plane (aws, 1 + 1)', () => {
  // The resume stands on the first interrupt: a step (step(): at most once per file) both tests run, so each also passes alone.
  const interruptedInHook = step(async () => {
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'sigint', '--platform', 'aws', '--region', 'eu-west-1', '--control-plane-replicas', '1', '--workers', '1'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);
    // The platform's own pre-provision check runs first and needs a well-formed credentials file.
    await useFakeAwsCredentials(dir);
    // Every AWS call goes to a loopback port nothing listens on: refused at once, never resolved or sent elsewhere.
    const refusing = await closedLoopbackPort();
    await editInstallConfig(dir, (doc) => {
      (doc.platform as { aws: Record<string, unknown> }).aws.endpointURL = `http://127.0.0.1:${refusing}`;
    });
    // A hook whose child ignores nothing and holds the hook's output pipe.
    await writeFile(
      path.join(dir, 'hold.sh'),
      '#!/bin/sh\nsleep 600 &\necho $! > "$PROVISIONER_DIR/hook-child.pid"\necho $$ > "$PROVISIONER_DIR/hook.pid"\nwait\n',
    );
    await chmod(path.join(dir, 'hold.sh'), 0o755);
    await editInstallConfig(dir, (doc) => {
      doc.hooks = { preProvision: [{ path: './hold.sh', timeout: '30m' }] };
    });

    const run = startCreate();
    const pidOf = async (file: string) => Number((await readFile(path.join(dir, file), 'utf8')).trim());
    const [hookPid, hookChildPid] = await waitFor(
      'the pre-provision hook and its child to run',
      async () => {
        if (run.ended()) throw new Error(`create cluster ended first:\n${run.stderr()}\n${run.stdout().slice(-3000)}`);
        return Promise.all([pidOf('hook.pid'), pidOf('hook-child.pid')]);
      },
      bootTimeoutMs,
    );

    const { exitCode, stderr, before, after } = await interrupt(run);
    expect(exitCode, stderr).toBe(ExitCode.interrupted);
    expect(stderr).toContain('SIGINT received');
    expectOrderedStop(after, startOrder(before));
    for (const pid of [hookPid, hookChildPid]) expect(processStartTime(pid), `hook process ${pid}`).toBeUndefined();
    await expectNothingRunning();

    const journal = await readJournal(dir);
    expect(journal.stages['hooks/pre-provision']?.state).toBe('interrupted');
    expect(journal.completedAt).toBeUndefined();
  });

  it('during a pre-provision hook: stops the hook with its child, then every control-plane process in order; exits 130', interruptedInHook);

  // The stall stands on the second interrupt: a step too.
  const interruptedInWait = step(async () => {
    await interruptedInHook();
    await writeFile(path.join(dir, 'hold.sh'), '#!/bin/sh\necho ok\n');
    const run = startCreate();
    await waitFor(
      'the infrastructure wait to start',
      () => {
        if (run.ended()) throw new Error(`create cluster ended first:\n${run.stderr()}\n${run.stdout().slice(-3000)}`);
        return events(run.stdout()).some((e) => e.type === 'stage' && e.stage === 'wait-infrastructure' && e.state === 'started');
      },
      bootTimeoutMs,
    );
    // Let the watches start, so the interrupt lands inside the wait.
    await new Promise((resolve) => setTimeout(resolve, 2_000));

    const { exitCode, stderr, before, after } = await interrupt(run);
    expect(exitCode, stderr).toBe(ExitCode.interrupted);
    expectOrderedStop(after, startOrder(before));
    await expectNothingRunning();

    const journal = await readJournal(dir);
    expect(journal.runs).toBe(2);
    expect(journal.stages['hooks/pre-provision']?.state).toBe('succeeded');
    expect(journal.stages['infrastructure']?.state).toBe('succeeded');
    expect(journal.stages['wait-infrastructure']?.state).toBe('interrupted');
  });

  it('resumed, during wait-infrastructure: the same ordered stop; the journal shows where to go on', interruptedInWait);

  describe('resumed again with --no-progress-timeout 1 on aws, which CAPA cannot reach from here', () => {
    let run: BackgroundCli | undefined;
    afterAll(() => {
      if (run && !run.ended()) run.child.kill('SIGKILL');
    });

    // The destroy stands on the stalled create: a step both tests run, so each also passes alone.
    const stalledCreate = step(async () => {
      await interruptedInWait();
      run = startCli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '1'], bootTimeoutMs + stallExitMs);
      runs.push(run);
      await run.waitForStderr(/stage wait-infrastructure started/, bootTimeoutMs);
      const waitStarted = performance.now();
      const ended = await Promise.race([
        run.result(),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`create cluster still waited ${stallExitMs / 1000} s into wait-infrastructure:\n${run?.stderr().slice(-4000)}`)), stallExitMs),
        ),
      ]);
      const waitedMs = performance.now() - waitStarted;
      process.stderr.write(`e2e no-progress: wait-infrastructure ended ${Math.round(waitedMs / 1000)} s after it started\n`);

      expect(ended.exitCode, ended.stderr).toBe(ExitCode.infrastructure);
      expect(waitedMs).toBeGreaterThanOrEqual(60_000);
      // The stall names how long nothing changed, and what blocks: the Cluster and its InfrastructureReady condition.
      expect(ended.stderr).toMatch(/No progress on the infrastructure for 6\d s/);
      expect(ended.stderr).toMatch(/Cluster sigint\/sigint: InfrastructureReady/);
      // CAPA's own condition and error: it tried EC2 (with the file's keys) and could not reach it.
      expect(ended.stderr).toMatch(/AWSCluster sigint\/sigint: VpcReady VpcReconciliationFailed — failed to describe VPC resources by name: .*EC2: DescribeVpcs/);
      expect(ended.stdout).toBe('');

      const journal = await readJournal(dir);
      expect(journal.runs).toBe(3);
      expect(journal.stages['wait-infrastructure']?.state).toBe('failed');
      expect(journal.stages['wait-infrastructure']?.error).toMatch(/No progress on the infrastructure/);
      // A failure worth a log bundle (the interrupts made none), and a temporary control plane that stopped.
      const bundles = (await readdir(dir)).filter((f) => /^log-bundle-.*\.tar\.gz$/.test(f));
      expect(bundles).toHaveLength(1);
      await expectNothingRunning();
      // CAPA ran, and its log is in the bundle; the keys it was given by file are nowhere in it.
      expect((await execa('tar', ['-tzf', path.join(dir, bundles[0]!)])).stdout).toMatch(/capa-manager\.log/);
      const content = await execa('tar', ['-xzOf', path.join(dir, bundles[0]!)], { encoding: 'utf8', maxBuffer: 512 * 2 ** 20 });
      expect(content.stdout).toMatch(/capa-manager|cluster-api-provider-aws/);
      // Every AWS call CAPA made went to the loopback endpoint, and it never looked up one of AWS's names.
      expect(content.stdout).toMatch(/dial tcp 127\.0\.0\.1:\d+: connect: connection refused/);
      expect(content.stdout).not.toMatch(/lookup [a-z0-9.-]*amazonaws\.com/);
      expect(content.stdout).not.toContain(fakeAwsKeys.secret);
      expect(content.stdout).not.toContain(fakeAwsKeys.id);
    });

    it('fails wait-infrastructure about a minute after the last change: exit 5 naming the Cluster and its blocking condition', stalledCreate);

    // CAPA removes an AWSCluster's finalizer only once AWS confirms its resources are gone, which it cannot here. It recorded
    // nothing it created there (the first call failed) and no call got an answer: after the stall, destroy releases it and ends.
    it('destroy cluster on that install exits 0 after releasing the AWSCluster CAPA never created in AWS, saying why, and leaves nothing', async () => {
      await stalledCreate();
      const destroyed = await cli(['destroy', 'cluster', '--dir', dir, '--no-progress-timeout', '1'], bootTimeoutMs + stallExitMs);
      // On a failure, what Cluster API's controllers said about the Cluster's deletion (the ledger's open entry for this
      // test: which descendant or control-plane object held the Cluster once its AWSCluster was gone); the afterAll
      // removes the install dir and these logs with it.
      const managerLog = destroyed.exitCode === 0 ? '' : await readFile(path.join(dir, 'logs', 'capi-manager.log'), 'utf8').catch((error: unknown) => `(no capi-manager.log: ${String(error)})`);
      const aboutSigint = managerLog.split('\n').filter((line) => line.includes('sigint')).slice(-80).join('\n');
      expect(destroyed.exitCode, `${destroyed.stderr}\ncapi-manager.log, the lines naming sigint (last 80):\n${aboutSigint}`).toBe(0);
      expect(destroyed.stderr).toMatch(/Released AWSCluster sigint\/sigint \(its finalizers removed\): CAPA recorded no VPC, subnet, security group, load balancer or instance of it in AWS, and its \w+ condition shows AWS was never reached/);
      expect(destroyed.stderr).toMatch(/Every Cluster API object of sigint\/sigint is gone/);
      expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
      expect(await processesMentioning(dir)).toEqual([]);
      // The local state is gone (the user's files stay).
      expect(await readdir(dir)).not.toContain('auth');
      expect(await readdir(dir)).toContain('install-config.yaml');
    });
  });
});

/** Process group id of a running process: /proc/<pid>/stat field 5. */
function processGroupOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}
