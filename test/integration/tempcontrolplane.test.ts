/**
 * A temporary control plane (detached: false) never outlives the process that booted it,
 * even when that process is SIGKILLed: its children are spawned through
 * `setpriv --pdeathsig KILL`, so the kernel kills them with it. The booting process is the
 * fixture test/fixtures/boot-temp-controlplane.ts, run with `node --import tsx`.
 * Fails (never skips) when the bundle is missing: the fixture exits with loadCatalog's error.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/embedded/catalog.js';
import { pidfilePath } from '../../src/process/pidfile.js';
import { aliveRecorded, GiveUp, expectedProcessCount, recordedProcesses, removeInstallDir, stateDirOf, stillAliveAfter, tempInstallDir, waitFor } from './support/controlplane.js';

const fixture = path.join(packageRoot, 'test', 'fixtures', 'boot-temp-controlplane.ts');
/** How long the children may take to die after their parent: the brief's ~5 s. */
const deathWithinMs = 5_000;

interface Fixture {
  child: ResultPromise;
  stdout: () => string;
  stderr: () => string;
}

function bootFixture(dir: string): Fixture {
  const child = execa(process.execPath, ['--import', 'tsx', fixture, dir], { cwd: packageRoot, reject: false, timeout: 300_000 });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return { child, stdout: () => stdout, stderr: () => stderr };
}

/** Waits for `check` while the fixture runs; fails with its output when it exits first. */
async function whileRunning(fixtureRun: Fixture, what: string, check: () => Promise<boolean> | boolean, timeoutMs = 180_000): Promise<void> {
  let exited = false;
  void fixtureRun.child.then(() => (exited = true));
  await waitFor(what, async () => {
    if (await check()) return true;
    if (exited) throw new GiveUp(`the fixture exited first:\n${fixtureRun.stderr()}\n${fixtureRun.stdout().slice(-2000)}`);
    return false;
  }, timeoutMs);
}

const exists = (file: string) => access(file).then(() => true, () => false);

describe('a temporary control plane whose CLI is killed with SIGKILL', () => {
  let dir = '';
  let running: Fixture | undefined;

  beforeAll(async () => {
    dir = await tempInstallDir('temp');
  });

  afterEach(async () => {
    running?.child.kill('SIGKILL');
    running = undefined;
  });

  afterAll(async () => {
    await removeInstallDir(dir);
  });

  it('leaves no child alive when killed while it boots (API server starting)', async () => {
    running = bootFixture(dir);
    await whileRunning(running, 'the kube-apiserver pidfile', () => exists(pidfilePath(stateDirOf(dir), 'kube-apiserver')));
    const recorded = await aliveRecorded(dir);
    expect(recorded.map((e) => e.name).sort()).toEqual(['etcd', 'kube-apiserver']);
    expect(recorded.every((e) => !e.detached && e.ownerPid === running!.child.pid)).toBe(true);

    running.child.kill('SIGKILL');
    expect((await running.child).signal).toBe('SIGKILL');
    expect(await stillAliveAfter(recorded, deathWithinMs)).toEqual([]);
  });

  it('leaves no child alive when killed once everything runs', async () => {
    running = bootFixture(dir);
    await whileRunning(running, 'the fixture to report the control plane started', () => running!.stdout().includes('{"type":"fixture","state":"started"}'));
    const recorded = await aliveRecorded(dir);
    expect(recorded).toHaveLength(await expectedProcessCount());

    running.child.kill('SIGKILL');
    await running.child;
    expect(await stillAliveAfter(recorded, deathWithinMs)).toEqual([]);
    // The pidfiles stay behind for the next run to check; none of them names a live process.
    expect((await recordedProcesses(dir)).filter((e) => recorded.some((r) => r.pid === e.pid))).toHaveLength(await expectedProcessCount());
    expect(await aliveRecorded(dir)).toEqual([]);
  });
});
