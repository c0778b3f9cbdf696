/**
 * The no-progress deadline end to end, on a platform whose infrastructure never becomes
 * ready: `create cluster` on aws, where the manifests are real but no AWS controller runs
 * here, so the Cluster's infrastructure is never provisioned and nothing the user sees
 * changes once the core controller has set its conditions. With `--no-progress-timeout 1`
 * the wait must fail about a minute later — exit 5, naming the Cluster and the condition
 * that blocks it — instead of sitting in wait-infrastructure (it sat there for minutes when
 * the flag was silently ignored). The control plane is temporary on aws: nothing is left
 * running afterwards.
 *
 * Fails (never skips) without the bundle: the CLI then exits 4 before any process starts.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/errors.js';
import { aliveRecorded, killRecorded } from '../integration/support/controlplane.js';
import { cli, ensureBuilt, processesMentioning, readJournal, startCli, type BackgroundCli } from './support/cli.js';

/** Longest the control plane's start and the stages before the wait may take on a loaded 2-core machine. */
const bootTimeoutMs = 600_000;
/** From the start of wait-infrastructure to the CLI's exit: the one-minute deadline, then the log bundle and the ordered stop. */
const stallExitMs = 150_000;

let dir = '';
let run: BackgroundCli | undefined;

beforeAll(async () => {
  await ensureBuilt();
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-e2e-stall-'));
});

afterAll(async () => {
  if (run && !run.ended()) run.child.kill('SIGKILL');
  if (!dir) return;
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

describe('create cluster --no-progress-timeout 1 on aws, whose infrastructure never becomes ready (1 + 1)', () => {
  it('fails wait-infrastructure about a minute after the last change: exit 5 naming the Cluster and its blocking condition', async () => {
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'stall', '--platform', 'aws', '--region', 'eu-west-1', '--control-plane-replicas', '1', '--workers', '1'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);

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
    expect(ended.stdout).toBe('');

    const journal = await readJournal(dir);
    expect(journal.stages['wait-infrastructure']?.state).toBe('failed');
    expect(journal.stages['wait-infrastructure']?.error).toMatch(/No progress on the infrastructure/);
    // A failure worth a log bundle, and a temporary control plane that stopped.
    expect((await readdir(dir)).filter((f) => /^log-bundle-.*\.tar\.gz$/.test(f))).toHaveLength(1);
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });
});
