import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InfrastructureError } from '../errors.js';
import { type ProcessEvent } from '../events.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { ProcessError } from './errors.js';
import { ManagedProcess, type ManagedProcessOptions } from './managed-process.js';
import { isPidRunning } from './proc.js';
import { Supervisor } from './supervisor.js';
import { sleep } from '../concurrency.js';

let dir: string;
let sink: RecordingSink;
const supervisors: Supervisor[] = [];

async function script(name: string, body: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

function proc(name: string, binary: string, options: Partial<ManagedProcessOptions> = {}): ManagedProcess {
  return new ManagedProcess({ name, binary, logDir: join(dir, 'logs'), events: sink, stopGraceMs: 1_000, startTimeoutMs: 3_000, probeIntervalMs: 50, ...options });
}

function supervisor(options: ConstructorParameters<typeof Supervisor>[0] = {}): Supervisor {
  const s = new Supervisor({ events: sink, ...options });
  supervisors.push(s);
  return s;
}

function states(name: string): ProcessEvent['state'][] {
  return sink.ofType('process').filter((e) => e.name === name).map((e) => e.state);
}

async function until(condition: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(20);
  }
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proc-supervisor-'));
  sink = new RecordingSink();
});
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stopAll().catch(() => {})));
  await rm(dir, { recursive: true, force: true });
});

describe('Supervisor', () => {
  it('starts in order and stops in reverse order', async () => {
    const s = supervisor();
    const [a, b, c] = ['a', 'b', 'c'].map((n) => proc(n, '/bin/sleep', { args: ['300'] }));
    await s.start([a!, b!]);
    await s.start([c!]); // later additions (controllers after CRDs)
    expect(s.processes.map((p) => p.name)).toEqual(['a', 'b', 'c']);
    const readyOrder = sink.ofType('process').filter((e) => e.state === 'ready').map((e) => e.name);
    expect(readyOrder).toEqual(['a', 'b', 'c']);
    await s.stopAll();
    const stopOrder = sink.ofType('process').filter((e) => e.state === 'stopped').map((e) => e.name);
    expect(stopOrder).toEqual(['c', 'b', 'a']);
    expect(s.processes).toEqual([]);
  });

  it('stopSome stops the chosen ones in reverse order without restarting them; the rest keep running', async () => {
    const s = supervisor();
    const [a, b, c] = ['a', 'b', 'c'].map((n) => proc(n, '/bin/sleep', { args: ['300'] }));
    await s.start([a!, b!, c!]);
    await s.stopSome((p) => p.name !== 'a');
    expect(sink.ofType('process').filter((e) => e.state === 'stopped').map((e) => e.name)).toEqual(['c', 'b']);
    expect(s.processes.map((p) => p.name)).toEqual(['a']);
    await sleep(300);
    expect(states('b')).toEqual(['starting', 'ready', 'stopped']); // no exited, no restarting
    expect(isPidRunning(a!.pid!)).toBe(true);
    await s.stopAll();
    expect(states('a').at(-1)).toBe('stopped');
  });

  it('rolls back the started ones in reverse when the second fails', async () => {
    const s = supervisor();
    const first = proc('first', '/bin/sleep', { args: ['300'] });
    const second = proc('second', await script('second', 'echo "listen tcp 127.0.0.1:6443: bind: address already in use" >&2; exit 1'), {
      readiness: async () => false,
    });
    const third = proc('third', '/bin/sleep', { args: ['300'] });
    await s.start([proc('zero', '/bin/sleep', { args: ['300'] })]);
    const firstPid = await s.start([first]).then(() => first.pid);
    const error = await s.start([second, third]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProcessError);
    expect((error as ProcessError).logTail.at(-1)).toContain('address already in use');
    expect(isPidRunning(firstPid!)).toBe(true); // an earlier call's process stays up
    expect(third.state).toBe('idle');
    expect(s.processes.map((p) => p.name)).toEqual(['zero', 'first']);

    const rollback = supervisor();
    const x = proc('x', '/bin/sleep', { args: ['300'] });
    const y = proc('y', '/bin/sleep', { args: ['300'] });
    const failing = proc('failing', await script('failing', 'exit 7'), { readiness: async () => false });
    await expect(rollback.start([x, y, failing])).rejects.toThrow('failing exited with code 7 before it was ready');
    expect([x.state, y.state]).toEqual(['stopped', 'stopped']);
    const stopOrder = sink.ofType('process').filter((e) => e.state === 'stopped' && ['x', 'y'].includes(e.name)).map((e) => e.name);
    expect(stopOrder).toEqual(['y', 'x']);
    expect(rollback.processes).toEqual([]);
  });

  it('restarts a crashed process with backoff and reports exited then restarting', async () => {
    const marker = join(dir, 'crashed-once');
    const binary = await script('flaky', `if [ ! -f "${marker}" ]; then touch "${marker}"; sleep 0.2; echo "panic: lost lease"; exit 2; fi\nexec sleep 300`);
    const fatal: unknown[] = [];
    const s = supervisor({ restart: { initialDelayMs: 100 }, onFatal: (e) => fatal.push(e) });
    const flaky = proc('flaky', binary);
    await s.start([flaky]);
    const firstPid = flaky.pid;
    await until(() => states('flaky').filter((st) => st === 'ready').length === 2);
    expect(states('flaky')).toEqual(['starting', 'ready', 'exited', 'restarting', 'starting', 'ready']);
    const restarting = sink.ofType('process').find((e) => e.state === 'restarting');
    expect(restarting?.exitCode).toBe(2);
    expect(restarting?.logTail?.at(-1)).toBe('panic: lost lease');
    expect(restarting?.message).toBe('restart 1 of 5 in 100 ms after it exited with code 2');
    expect(flaky.pid).not.toBe(firstPid);
    expect(flaky.state).toBe('ready');
    expect(fatal).toEqual([]);
  });

  it('reports failed and calls onFatal when the restart budget is used up', async () => {
    const binary = await script('doomed', 'sleep 0.1; echo "fatal: corrupt data dir"; exit 1');
    const fatal: ProcessError[] = [];
    const s = supervisor({ restart: { initialDelayMs: 50, maxDelayMs: 120, maxRestarts: 3 }, onFatal: (e) => fatal.push(e) });
    await s.start([proc('doomed', binary)]);
    await until(() => fatal.length > 0, 10_000);
    expect(states('doomed')).toEqual([
      'starting', 'ready', 'exited', 'restarting',
      'starting', 'ready', 'exited', 'restarting',
      'starting', 'ready', 'exited', 'restarting',
      'starting', 'ready', 'exited', 'failed',
    ]);
    const delays = sink.ofType('process').filter((e) => e.state === 'restarting').map((e) => e.message?.match(/in (\d+) ms/)?.[1]);
    expect(delays).toEqual(['50', '100', '120']);
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toBeInstanceOf(ProcessError);
    expect(fatal[0]?.reason).toBe('restarts');
    expect(fatal[0]?.message).toBe('doomed kept exiting: 3 restart(s) in 10 min, last exit with code 1');
    expect(fatal[0]?.logTail.at(-1)).toBe('fatal: corrupt data dir');
    expect(sink.ofType('process').at(-1)?.logTail?.at(-1)).toBe('fatal: corrupt data dir');
  });

  it('counts a restart that fails before ready against the budget', async () => {
    const marker = join(dir, 'ran');
    const ready = join(dir, 'ready');
    // Ready the first time; every later start exits before the probe passes.
    const binary = await script(
      'worse',
      `if [ -f "${marker}" ]; then echo "cannot recover"; exit 4; fi\ntouch "${marker}" "${ready}"; sleep 0.1; rm "${ready}"; exit 1`,
    );
    const fatal: ProcessError[] = [];
    const s = supervisor({ restart: { initialDelayMs: 20, maxRestarts: 2 }, onFatal: (e) => fatal.push(e) });
    await s.start([proc('worse', binary, { readiness: async () => existsSync(ready) })]);
    await until(() => fatal.length > 0, 10_000);
    expect(states('worse')).toEqual(['starting', 'ready', 'exited', 'restarting', 'starting', 'exited', 'restarting', 'starting', 'exited', 'failed']);
    expect(fatal[0]?.exitStatus).toBe(4);
    expect(fatal[0]?.logTail.at(-1)).toBe('cannot recover');
  });

  it('stopAll runs once under concurrent calls and from an aborted signal', async () => {
    const controller = new AbortController();
    const s = supervisor({ signal: controller.signal });
    await s.start([proc('one', '/bin/sleep', { args: ['300'] }), proc('two', '/bin/sleep', { args: ['300'] })]);
    const pids = s.processes.map((p) => p.pid!);
    controller.abort();
    const first = s.stopAll();
    const second = s.stopAll();
    expect(first).toBe(second);
    await Promise.all([first, second]);
    expect(sink.ofType('process').filter((e) => e.state === 'stopped')).toHaveLength(2);
    expect(pids.map(isPidRunning)).toEqual([false, false]);
    await expect(s.start([proc('late', '/bin/sleep', { args: ['1'] })])).rejects.toThrow(/after stopAll/);
  });

  it('does not restart what stopAll stopped, and cancels a pending restart', async () => {
    const binary = await script('dies', 'sleep 0.1; exit 1');
    const s = supervisor({ restart: { initialDelayMs: 5_000 } });
    await s.start([proc('dies', binary)]);
    await until(() => states('dies').includes('restarting'));
    const begin = Date.now();
    await s.stopAll();
    expect(Date.now() - begin).toBeLessThan(1_000);
    await sleep(300);
    expect(states('dies')).toEqual(['starting', 'ready', 'exited', 'restarting']);
  });

  it('does not restart what stopSome gave up, and cancels its pending restart (a fence must not be undone by a crash just before it)', async () => {
    const binary = await script('dies-fenced', 'sleep 0.1; exit 1');
    const s = supervisor({ restart: { initialDelayMs: 300 } });
    await s.start([proc('dies-fenced', binary), proc('stays', '/bin/sleep', { args: ['300'] })]);
    await until(() => states('dies-fenced').includes('restarting'));
    await s.stopSome((p) => p.name === 'dies-fenced');
    await sleep(800);
    expect(states('dies-fenced')).toEqual(['starting', 'ready', 'exited', 'restarting']);
    expect(s.processes.map((p) => p.name)).toEqual(['stays']);
    await s.stopAll();
  });

  it('collects every stop error into one InfrastructureError', async () => {
    const s = supervisor({ stopTimeoutMs: 200 });
    const stuck = proc('stuck', '/bin/sleep', { args: ['300'] });
    const fine = proc('fine', '/bin/sleep', { args: ['300'] });
    await s.start([fine, stuck]);
    stuck.stop = () => new Promise(() => {}); // never resolves: the time limit must cut it off
    const error = await s.stopAll().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InfrastructureError);
    expect((error as InfrastructureError).details).toEqual(['stuck did not stop within 200 ms']);
    expect(fine.state).toBe('stopped');
    process.kill(stuck.pid!, 'SIGKILL');
  });
});
