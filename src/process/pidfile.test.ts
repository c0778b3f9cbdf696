import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectGone } from '../../test/support/process-gone.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { findStale, isAlive, pidfilePath, pidsDir, readPidfiles, removePidfile, stateDirEnv, stopStale, writePidfile, type PidfileEntry } from './pidfile.js';
import { isPidRunning, isSameProcess, processStartTime } from './proc.js';
import { sleep } from '../concurrency.js';

let dir: string;
const children: ChildProcess[] = [];

function entryFor(name: string, pid: number, startTime: string | null): PidfileEntry {
  return { name, pid, startTime, binary: '/bin/sleep', argsHash: 'h', ports: {}, logFile: '/dev/null', detached: false, ownerPid: 1, startedAt: new Date().toISOString() };
}

async function sleeper(args: string[] = ['300'], env?: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn('/bin/sleep', args, { stdio: 'ignore', ...(env ? { env } : {}) });
  children.push(child);
  await new Promise((resolve) => child.once('spawn', resolve));
  return child;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proc-pidfile-'));
});
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

describe('process identity', () => {
  it('reads the start time of a live process and nothing for a dead one', async () => {
    const child = await sleeper();
    const startTime = processStartTime(child.pid!);
    expect(startTime).toMatch(/^\d+$/);
    expect(processStartTime(process.pid)).toMatch(/^\d+$/);
    expect(isSameProcess(child.pid!, startTime!)).toBe(true);
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    expect(processStartTime(child.pid!)).toBeUndefined();
    expect(isSameProcess(child.pid!, startTime!)).toBe(false);
  });
});

describe('pidfile registry', () => {
  it('takes a live pid with another start time for a recycled pid, not ours', async () => {
    const child = await sleeper();
    const realStart = processStartTime(child.pid!)!;
    const recycled = entryFor('etcd', child.pid!, String(Number(realStart) - 1000));
    expect(isPidRunning(child.pid!)).toBe(true);
    expect(isAlive(recycled)).toBe(false);
    expect(isAlive(entryFor('etcd', child.pid!, realStart))).toBe(true);

    await writePidfile(dir, recycled);
    expect(await findStale(dir)).toEqual([]);
    expect(existsSync(pidfilePath(dir, 'etcd'))).toBe(false); // not ours: the entry is dropped
    expect(isPidRunning(child.pid!)).toBe(true); // and the unrelated process is untouched
  });

  it('finds running entries, drops dead and unreadable ones', async () => {
    const live = await sleeper();
    const dead = await sleeper(['0']);
    await new Promise((resolve) => dead.once('exit', resolve));
    await writePidfile(dir, entryFor('live', live.pid!, processStartTime(live.pid!)!));
    await writePidfile(dir, entryFor('dead', dead.pid!, '12345'));
    await writeFile(join(pidsDir(dir), 'garbage.json'), '{not json');
    const stale = await findStale(dir);
    expect(stale.map((e) => e.name)).toEqual(['live']);
    expect((await readPidfiles(dir)).map((e) => e.name)).toEqual(['live']);
    expect(existsSync(join(pidsDir(dir), 'garbage.json'))).toBe(false);
  });

  it('stops stale processes (SIGTERM, then SIGKILL) and removes their files', async () => {
    const polite = await sleeper();
    const stubborn = spawn('/bin/sh', ['-c', "trap '' TERM; while true; do sleep 0.1; done"], { stdio: 'ignore' });
    children.push(stubborn);
    await new Promise((resolve) => stubborn.once('spawn', resolve));
    await sleep(100);
    await writePidfile(dir, entryFor('polite', polite.pid!, processStartTime(polite.pid!)!));
    await writePidfile(dir, entryFor('stubborn', stubborn.pid!, processStartTime(stubborn.pid!)!));
    const exits = [polite, stubborn].map((c) => new Promise<NodeJS.Signals | null>((resolve) => c.once('exit', (_code, signal) => resolve(signal))));
    const sink = new RecordingSink();
    const stopped = await stopStale(dir, { graceMs: 300, events: sink });
    expect(stopped.map((e) => e.name).sort()).toEqual(['polite', 'stubborn']);
    expect(await Promise.all(exits)).toEqual(['SIGTERM', 'SIGKILL']);
    expect(await readPidfiles(dir)).toEqual([]);
    const warnings = sink.ofType('log').filter((e) => e.level === 'warn').map((e) => e.message);
    expect(warnings.filter((m) => m.includes('left running by an earlier run'))).toHaveLength(2);
    // The one that needed SIGKILL says so; the polite one does not.
    expect(warnings.filter((m) => m.includes('killed with SIGKILL'))).toEqual([`stubborn (pid ${stubborn.pid}) did not exit within 0.3 s of SIGTERM: killed with SIGKILL`]);
  });

  it('finds and stops a child started for this state dir that no pidfile records (its command killed before it wrote one)', async () => {
    const recordedChild = await sleeper(['300'], { [stateDirEnv]: dir });
    const unrecorded = await sleeper(['301'], { [stateDirEnv]: dir });
    const otherDirs = await sleeper(['302'], { [stateDirEnv]: `${dir}-other` });
    await writePidfile(dir, entryFor('recorded', recordedChild.pid!, processStartTime(recordedChild.pid!)!));

    const stale = await findStale(dir);
    // The recorded one once, by its pidfile; the unrecorded one by its command name; not the other dir's.
    expect(stale.map((e) => [e.name, e.pid])).toEqual([['recorded', recordedChild.pid], ['sleep', unrecorded.pid]]);
    expect(stale[1]).toMatchObject({ detached: true, startTime: processStartTime(unrecorded.pid!) });

    const exit = new Promise<NodeJS.Signals | null>((resolve) => unrecorded.once('exit', (_code, signal) => resolve(signal)));
    const sink = new RecordingSink();
    await stopStale(dir, { filter: (e) => e.name === 'sleep', graceMs: 1_000, events: sink });
    expect(await exit).toBe('SIGTERM');
    expect(sink.ofType('log').map((e) => e.message)).toEqual([`Stopping sleep (pid ${unrecorded.pid}) left running by an earlier run`]);
    expect(isPidRunning(otherDirs.pid!)).toBe(true);
    expect((await findStale(dir)).map((e) => e.name)).toEqual(['recorded']);
  });

  it('stops only what the filter selects', async () => {
    const a = await sleeper();
    const b = await sleeper();
    await writePidfile(dir, { ...entryFor('a', a.pid!, processStartTime(a.pid!)!), detached: true });
    await writePidfile(dir, entryFor('b', b.pid!, processStartTime(b.pid!)!));
    const stopped = await stopStale(dir, { filter: (e) => !e.detached, graceMs: 1_000 });
    expect(stopped.map((e) => e.name)).toEqual(['b']);
    expect(isPidRunning(a.pid!)).toBe(true);
    expect((await readPidfiles(dir)).map((e) => e.name)).toEqual(['a']);
  });

  it("stops a stale process's whole process group, grandchildren included", async () => {
    const grandchildFile = join(dir, 'grandchild.pid');
    // A group leader, as every ManagedProcess child is; detached: false as a temporary control plane records it.
    const leader = spawn('/bin/sh', ['-c', `sleep 300 & echo $! > "${grandchildFile}"; wait`], { stdio: 'ignore', detached: true });
    children.push(leader);
    for (let i = 0; i < 100 && !existsSync(grandchildFile); i++) await sleep(20);
    const grandchild = Number(readFileSync(grandchildFile, 'utf8').trim());
    await writePidfile(dir, entryFor('leader', leader.pid!, processStartTime(leader.pid!)!));
    await stopStale(dir, { graceMs: 2_000 });
    await expectGone(grandchild);
  });

  it('removes a pidfile only when it still records the given pid', async () => {
    await mkdir(pidsDir(dir), { recursive: true });
    await writePidfile(dir, entryFor('x', 4242, null));
    await removePidfile(dir, 'x', 4343);
    expect(existsSync(pidfilePath(dir, 'x'))).toBe(true);
    await removePidfile(dir, 'x', 4242);
    expect(existsSync(pidfilePath(dir, 'x'))).toBe(false);
    expect(await readPidfiles(join(dir, 'none'))).toEqual([]);
  });
});
