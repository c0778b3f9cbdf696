/**
 * The no-progress deadline end to end, on a platform whose infrastructure never becomes
 * ready here: `create cluster` on aws with a fake but well-formed credentials file. The
 * platform's offline check passes, CAPA runs with the file by path, its webhooks default
 * and validate our objects, and it tries to reach AWS, which this machine cannot: nothing
 * the user sees changes after its first error. With `--no-progress-timeout 1` the wait
 * must fail about a minute later — exit 5, naming the Cluster and the condition that
 * blocks it — instead of sitting in wait-infrastructure (it sat there for minutes when the
 * flag was silently ignored). The log bundle has CAPA's log and no credential value.
 * `destroy cluster` then exits 0 and leaves nothing: CAPA keeps the AWSCluster until AWS
 * confirms the deletion, which it cannot here, so the deletion stalls for the no-progress
 * timeout; then the aws platform sees that CAPA recorded nothing it created in AWS and that
 * its calls never got an answer, releases the AWSCluster, says so, and the deletion ends
 * (the control plane is temporary on aws).
 *
 * Fails (never skips) without the bundle: the CLI then exits 4 before any process starts.
 */
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/errors.js';
import { aliveRecorded, killRecorded } from '../integration/support/controlplane.js';
import { cli, ensureBuilt, fakeAwsKeys, processesMentioning, readJournal, startCli, useFakeAwsCredentials, type BackgroundCli } from './support/cli.js';
import { runTempDir } from '../support/run-dirs.js';
import { step } from './support/steps.js';

/** Longest the control plane's start and the stages before the wait may take on a loaded 2-core machine. */
const bootTimeoutMs = 600_000;
/** From the start of wait-infrastructure to the CLI's exit: the one-minute deadline, then the log bundle and the ordered stop. */
const stallExitMs = 150_000;

let dir = '';
let run: BackgroundCli | undefined;

beforeAll(async () => {
  await ensureBuilt();
  dir = await runTempDir('e2e-stall');
});

afterAll(async () => {
  if (run && !run.ended()) run.child.kill('SIGKILL');
  if (!dir) return;
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

describe('create cluster --no-progress-timeout 1 on aws, which CAPA cannot reach from here (1 + 1)', () => {
  // The destroy stands on the stalled create: a step (step(): at most once per file) both tests run, so each also passes alone.
  const stalledCreate = step(async () => {
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'stall', '--platform', 'aws', '--region', 'eu-west-1', '--control-plane-replicas', '1', '--workers', '1'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);
    await useFakeAwsCredentials(dir);

    run = startCli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '1'], bootTimeoutMs + stallExitMs);
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
    expect(ended.stderr).toMatch(/Cluster stall\/stall: InfrastructureReady/);
    // CAPA's own condition and error: it tried EC2 (with the file's keys) and could not reach it.
    expect(ended.stderr).toMatch(/AWSCluster stall\/stall: VpcReady VpcReconciliationFailed — failed to describe VPC resources by name: .*EC2: DescribeVpcs/);
    expect(ended.stdout).toBe('');

    const journal = await readJournal(dir);
    expect(journal.stages['wait-infrastructure']?.state).toBe('failed');
    expect(journal.stages['wait-infrastructure']?.error).toMatch(/No progress on the infrastructure/);
    // A failure worth a log bundle, and a temporary control plane that stopped.
    const bundles = (await readdir(dir)).filter((f) => /^log-bundle-.*\.tar\.gz$/.test(f));
    expect(bundles).toHaveLength(1);
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
    // CAPA ran, and its log is in the bundle; the keys it was given by file are nowhere in it.
    expect((await execa('tar', ['-tzf', path.join(dir, bundles[0]!)])).stdout).toMatch(/capa-manager\.log/);
    const content = await execa('tar', ['-xzOf', path.join(dir, bundles[0]!)], { encoding: 'utf8', maxBuffer: 512 * 2 ** 20 });
    expect(content.stdout).toMatch(/capa-manager|cluster-api-provider-aws/);
    expect(content.stdout).not.toContain(fakeAwsKeys.secret);
    expect(content.stdout).not.toContain(fakeAwsKeys.id);
  });

  it('fails wait-infrastructure about a minute after the last change: exit 5 naming the Cluster and its blocking condition', stalledCreate);

  // CAPA removes an AWSCluster's finalizer only once AWS confirms its resources are gone, which it cannot here. It recorded
  // nothing it created there (the first call failed) and no call got an answer: after the stall, destroy releases it and ends.
  it('destroy cluster on that install exits 0 after releasing the AWSCluster CAPA never created in AWS, saying why, and leaves nothing', async () => {
    await stalledCreate();
    const destroyed = await cli(['destroy', 'cluster', '--dir', dir, '--no-progress-timeout', '1'], bootTimeoutMs + stallExitMs);
    expect(destroyed.exitCode, destroyed.stderr).toBe(0);
    expect(destroyed.stderr).toMatch(/Released AWSCluster stall\/stall \(its finalizers removed\): CAPA recorded no VPC, subnet, security group, load balancer or instance of it in AWS, and its \w+ condition shows AWS was never reached/);
    expect(destroyed.stderr).toMatch(/Every Cluster API object of stall\/stall is gone/);
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
    // The local state is gone (the user's files stay).
    expect(await readdir(dir)).not.toContain('auth');
    expect(await readdir(dir)).toContain('install-config.yaml');
  });
});
