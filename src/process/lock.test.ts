import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError, UsageError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { acquireDirLock, lockFileName, type LockHolder } from './lock.js';
import { processStartTime } from './proc.js';

let dir: string;
const children: ChildProcess[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proc-lock-'));
});
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

async function writeHolder(holder: Partial<LockHolder>): Promise<void> {
  const full: LockHolder = { pid: 999_999, startTime: '1', hostname: hostname(), command: 'create cluster', startedAt: '2026-01-02T03:04:05.000Z', token: 'theirs', ...holder };
  await writeFile(join(dir, lockFileName), JSON.stringify(full));
}

async function liveProcess(): Promise<ChildProcess> {
  const child = spawn('/bin/sleep', ['300'], { stdio: 'ignore' });
  children.push(child);
  await new Promise((resolve) => child.once('spawn', resolve));
  return child;
}

describe('acquireDirLock', () => {
  it('refuses an install directory that does not exist, or a file, creating nothing; creates one only when told to', async () => {
    const missing = join(dir, 'typo', 'install');
    const error = (await acquireDirLock(missing, { command: 'destroy cluster' }).catch((e: unknown) => e)) as UsageError;
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toBe(`No install directory at ${missing}: destroy cluster needs one`);
    expect(error.hint).toContain('--dir');
    expect(existsSync(join(dir, 'typo')), 'the missing directory or its parent').toBe(false);
    const file = join(dir, 'a-file');
    await writeFile(file, 'x');
    await expect(acquireDirLock(file, { command: 'create cluster' })).rejects.toThrow(`${file} is not a directory: create cluster needs an install directory`);
    const lock = await acquireDirLock(missing, { command: 'management start', createDir: true });
    expect(await readdir(missing)).toEqual([lockFileName]);
    await lock.release();
  });

  it('writes the holder and refuses a second acquirer, naming the holder', async () => {
    const lock = await acquireDirLock(dir, { command: 'create cluster' });
    const onDisk = JSON.parse(await readFile(join(dir, lockFileName), 'utf8')) as LockHolder;
    expect(onDisk).toEqual(lock.holder);
    expect(onDisk).toMatchObject({ pid: process.pid, startTime: processStartTime(process.pid), hostname: hostname(), command: 'create cluster' });

    const error = await acquireDirLock(dir, { command: 'destroy cluster' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toBe(
      `${dir} is in use by another provisioner command: "create cluster" (pid ${process.pid}, since ${lock.holder.startedAt})`,
    );
    expect((error as EnvironmentError).hint).toBe(`Wait for it to finish or stop it (kill ${process.pid}), then retry.`);

    await lock.release();
    expect(existsSync(join(dir, lockFileName))).toBe(false);
    const again = await acquireDirLock(dir, { command: 'destroy cluster' });
    await again.release();
  });

  it('refuses while another live process holds it', async () => {
    const holder = await liveProcess();
    await writeHolder({ pid: holder.pid!, startTime: processStartTime(holder.pid!)! });
    await expect(acquireDirLock(dir, { command: 'gather bootstrap' })).rejects.toThrow(
      `${dir} is in use by another provisioner command: "create cluster" (pid ${holder.pid}, since 2026-01-02T03:04:05.000Z)`,
    );
  });

  it('takes over a lock whose holder is dead, with a warning', async () => {
    const dead = spawn('/bin/true');
    await new Promise((resolve) => dead.once('exit', resolve));
    await writeHolder({ pid: dead.pid! });
    const sink = new RecordingSink();
    const lock = await acquireDirLock(dir, { command: 'create cluster', events: sink });
    expect(lock.holder.pid).toBe(process.pid);
    const [warning] = sink.ofType('log');
    expect(warning?.level).toBe('warn');
    expect(warning?.message).toBe(`Took over a stale lock on ${dir} from pid ${dead.pid} (create cluster, since 2026-01-02T03:04:05.000Z), which is no longer running`);
    expect((await readdir(dir)).sort()).toEqual([lockFileName]); // no temp or aside files left
    await lock.release();
  });

  it('takes over a lock whose pid was recycled (start time differs)', async () => {
    const other = await liveProcess();
    const realStart = processStartTime(other.pid!)!;
    await writeHolder({ pid: other.pid!, startTime: String(Number(realStart) + 7) });
    const sink = new RecordingSink();
    const lock = await acquireDirLock(dir, { command: 'create cluster', events: sink });
    expect(lock.holder.pid).toBe(process.pid);
    expect(sink.ofType('log')[0]?.message).toContain(`from pid ${other.pid}`);
    await lock.release();
  });

  it('never takes a lock held on another host', async () => {
    await writeHolder({ hostname: 'elsewhere.example', pid: 1 });
    const error = (await acquireDirLock(dir, { command: 'create cluster' }).catch((e: unknown) => e)) as EnvironmentError;
    expect(error.message).toContain('(pid 1 on elsewhere.example, since');
    expect(error.hint).toContain(`delete ${join(dir, lockFileName)}`);
  });

  it('replaces an unreadable lock file', async () => {
    await writeFile(join(dir, lockFileName), '');
    const sink = new RecordingSink();
    const lock = await acquireDirLock(dir, { command: 'create cluster', events: sink });
    expect(sink.ofType('log')[0]?.message).toBe(`Replaced an unreadable lock file ${join(dir, lockFileName)}`);
    await lock.release();
  });

  it('release leaves a lock that is no longer ours', async () => {
    const lock = await acquireDirLock(dir, { command: 'create cluster' });
    await writeHolder({ token: 'someone-else' });
    await lock.release();
    expect(JSON.parse(await readFile(join(dir, lockFileName), 'utf8')).token).toBe('someone-else');
  });

  it('lets exactly one of many concurrent acquirers win', async () => {
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => acquireDirLock(dir, { command: 'race' })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected').every((r) => (r as PromiseRejectedResult).reason instanceof EnvironmentError)).toBe(true);
    expect((await readdir(dir)).sort()).toEqual([lockFileName]);
  });
});
