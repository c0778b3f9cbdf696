import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError, InterruptedError } from '../errors.js';
import { expectGone } from '../../test/support/process-gone.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { ProcessError } from './errors.js';
import { rotatedPath } from './log-file.js';
import { defaultPdeathsigWrapper, ManagedProcess, type ManagedProcessOptions } from './managed-process.js';
import { pidfilePath, readPidfiles } from './pidfile.js';
import { fieldsAfterComm, isPidRunning, processStartTime } from './proc.js';
import { sleep } from '../concurrency.js';

let dir: string;
const started: ManagedProcess[] = [];

async function script(name: string, body: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

function managed(options: Omit<ManagedProcessOptions, 'logDir'> & { logDir?: string }): ManagedProcess {
  const proc = new ManagedProcess({ logDir: join(dir, 'logs'), startTimeoutMs: 3_000, stopGraceMs: 1_000, probeIntervalMs: 50, ...options });
  started.push(proc);
  return proc;
}

/** Ready when `file` exists. */
const fileProbe = (file: string) => async () => existsSync(file);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proc-managed-'));
});
afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop()));
  await rm(dir, { recursive: true, force: true });
});

describe('ManagedProcess', () => {
  it('uses setpriv --pdeathsig on this Linux machine', () => {
    expect(defaultPdeathsigWrapper()).toBe('/usr/bin/setpriv');
  });

  it('resolves start when the probe passes, records a pidfile, and stops', async () => {
    const ready = join(dir, 'ready');
    const binary = await script('server', `echo starting; sleep 0.3; touch "${ready}"; echo serving; exec sleep 300`);
    const sink = new RecordingSink();
    const stateDir = join(dir, 'state');
    const proc = managed({ name: 'server', binary, readiness: fileProbe(ready), events: sink, stateDir, ports: { secure: 1234 } });
    await proc.start();
    expect(proc.state).toBe('ready');
    const pid = proc.pid;
    expect(pid).toBeGreaterThan(0);
    expect(existsSync(ready)).toBe(true);

    const [entry] = await readPidfiles(stateDir);
    expect(entry).toMatchObject({ name: 'server', pid, binary, ports: { secure: 1234 }, detached: false, ownerPid: process.pid, logFile: proc.logFile });
    expect(entry?.startTime).toBe(processStartTime(pid!));
    // setpriv exec'd the script: the pid runs the script itself, with the death signal set.
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain('setpriv');

    await proc.stop();
    expect(proc.state).toBe('stopped');
    expect(isPidRunning(pid!)).toBe(false);
    expect(existsSync(pidfilePath(stateDir, 'server'))).toBe(false);
    expect(await readFile(proc.logFile, 'utf8')).toMatch(/=== .* provisioner: starting server: .*\nstarting\nserving\n/);
    expect(sink.ofType('process').map((e) => e.state)).toEqual(['starting', 'ready', 'stopped']);
  });

  it('rejects at once with exit code and log tail when the process exits before ready', async () => {
    const lines = Array.from({ length: 30 }, (_, i) => `echo "log line ${i}"`).join('\n');
    const binary = await script('crash', `${lines}\necho "fatal: bad flag" >&2\nexit 3`);
    const sink = new RecordingSink();
    const proc = managed({ name: 'crash', binary, readiness: async () => false, startTimeoutMs: 30_000, events: sink });
    const begin = Date.now();
    const error = await proc.start().catch((e: unknown) => e);
    expect(Date.now() - begin).toBeLessThan(5_000);
    expect(error).toBeInstanceOf(ProcessError);
    const failure = error as ProcessError;
    expect(failure.message).toBe('crash exited with code 3 before it was ready');
    expect(failure.reason).toBe('exited');
    expect(failure.exitStatus).toBe(3);
    expect(failure.logTail).toHaveLength(20);
    expect(failure.logTail.at(-1)).toBe('fatal: bad flag');
    expect(failure.logTail[0]).toBe('log line 11');
    expect(failure.details.at(-1)).toBe('  fatal: bad flag');
    expect(failure.hint).toContain(proc.logFile);
    expect(proc.state).toBe('exited');
    const exited = sink.ofType('process').find((e) => e.state === 'exited');
    expect(exited?.exitCode).toBe(3);
    expect(exited?.logTail?.at(-1)).toBe('fatal: bad flag');
  });

  it('reports a signal when the process is killed before ready', async () => {
    const binary = await script('selfkill', 'kill -KILL $$');
    const error = (await managed({ name: 'selfkill', binary, readiness: async () => false }).start().catch((e: unknown) => e)) as ProcessError;
    expect(error.message).toBe('selfkill exited with signal SIGKILL before it was ready');
    expect(error.exitSignal).toBe('SIGKILL');
  });

  it('times out, stops the process and names the last probe failure', async () => {
    const binary = await script('slow', 'echo "waiting for etcd"; exec sleep 300');
    const sink = new RecordingSink();
    const proc = managed({
      name: 'slow',
      binary,
      startTimeoutMs: 600,
      events: sink,
      readiness: async () => {
        throw new Error('connection refused');
      },
    });
    const error = (await proc.start().catch((e: unknown) => e)) as ProcessError;
    expect(error).toBeInstanceOf(ProcessError);
    expect(error.reason).toBe('timeout');
    expect(error.message).toBe('slow was not ready after 600 ms (last check: connection refused)');
    expect(error.logTail).toContain('waiting for etcd');
    expect(proc.state).toBe('stopped');
    expect(proc.pid).toBeUndefined();
    expect(sink.ofType('process').at(-1)?.message).toBe('stopped: not ready after 600 ms (last check: connection refused)');
  });

  it('escalates to SIGKILL when SIGTERM is trapped, and stop is idempotent', async () => {
    const binary = await script('stubborn', `trap 'echo "ignoring TERM"' TERM\necho up\nwhile true; do sleep 0.1; done`);
    const proc = managed({ name: 'stubborn', binary, stopGraceMs: 500 });
    await proc.start();
    await sleep(200); // let the shell install its trap
    const pid = proc.pid!;
    const begin = Date.now();
    const [a, b] = [proc.stop(), proc.stop()];
    expect(a).toBe(b);
    await a;
    expect(Date.now() - begin).toBeGreaterThanOrEqual(450);
    expect(isPidRunning(pid)).toBe(false);
    expect(await readFile(proc.logFile, 'utf8')).toContain('ignoring TERM');
    await proc.stop(); // again, after it stopped
    expect(proc.state).toBe('stopped');
  });

  it('stops within the grace when the process honours SIGTERM', async () => {
    const proc = managed({ name: 'polite', binary: '/bin/sleep', args: ['300'], stopGraceMs: 10_000 });
    await proc.start();
    const begin = Date.now();
    await proc.stop();
    expect(Date.now() - begin).toBeLessThan(2_000);
  });

  it('rotates its log at the cap while the process writes', async () => {
    const binary = await script('chatty', `i=0\nwhile [ $i -lt 400 ]; do echo "chatty line $i padding padding padding"; i=$((i+1)); done\nexec sleep 300`);
    const proc = managed({ name: 'chatty', binary, logMaxBytes: 4096 });
    await proc.start();
    // A read on the libuv pool can land between rotation's rename and the new file's open: missing counts as not yet.
    const current = () => readFile(proc.logFile, 'utf8').catch(() => '');
    for (let i = 0; i < 100 && !(await current()).includes('chatty line 399'); i++) await sleep(50);
    expect((await stat(proc.logFile)).size).toBeLessThanOrEqual(4096);
    expect((await stat(rotatedPath(proc.logFile))).size).toBeLessThanOrEqual(4096);
    expect(existsSync(`${proc.logFile}.2`)).toBe(false);
    expect(await readFile(proc.logFile, 'utf8')).toContain('chatty line 399');
  });

  it('gives the child only allow-listed variables and NO_PROXY', async () => {
    process.env.PROVISIONER_TEST_SECRET = 'leak';
    process.env.PROVISIONER_TEST_ALLOWED = 'passed';
    try {
      const proc = managed({
        name: 'env',
        binary: '/usr/bin/env',
        env: { allow: ['PROVISIONER_TEST_ALLOWED'], extra: { EXTRA_ONE: '1' } },
      });
      await proc.start();
      for (let i = 0; i < 100 && proc.pid !== undefined; i++) await sleep(20);
      const vars = (await readFile(proc.logFile, 'utf8'))
        .split('\n')
        .filter((line) => line.includes('=') && !line.startsWith('==='))
        .map((line) => line.slice(0, line.indexOf('=')))
        .sort();
      const expected = ['EXTRA_ONE', 'NO_PROXY', 'PROVISIONER_TEST_ALLOWED', 'no_proxy', ...['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ'].filter((n) => process.env[n] !== undefined)];
      expect(vars).toEqual(expected.sort());
      expect(await readFile(proc.logFile, 'utf8')).toContain('NO_PROXY=127.0.0.1,::1,localhost');
    } finally {
      delete process.env.PROVISIONER_TEST_SECRET;
      delete process.env.PROVISIONER_TEST_ALLOWED;
    }
  });

  it('fails with EnvironmentError for a missing binary', async () => {
    const error = await managed({ name: 'missing', binary: join(dir, 'nope') }).start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toContain('is missing or not executable');
  });

  it('stops and rejects with InterruptedError when the signal aborts during start', async () => {
    const proc = managed({ name: 'aborted', binary: '/bin/sleep', args: ['300'], readiness: async () => false, startTimeoutMs: 30_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const error = await proc.start({ signal: controller.signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InterruptedError);
    expect(proc.state).toBe('stopped');
    expect(proc.pid).toBeUndefined();
  });

  it('reports an unexpected exit after ready and can start again', async () => {
    const binary = await script('flaky', 'sleep 0.2; echo "panic: boom"; exit 2');
    const sink = new RecordingSink();
    const proc = managed({ name: 'flaky', binary, events: sink });
    const exits: number[] = [];
    const seen = new Promise<void>((resolve) =>
      proc.onUnexpectedExit((info) => {
        exits.push(info.exitCode ?? -1);
        expect(info.logTail.at(-1)).toBe('panic: boom');
        resolve();
      }),
    );
    await proc.start();
    await seen;
    expect(exits).toEqual([2]);
    expect(proc.state).toBe('exited');
    await proc.start();
    expect(proc.state).toBe('ready');
    expect(sink.ofType('process').map((e) => e.state)).toEqual(['starting', 'ready', 'exited', 'starting', 'ready']);
  });

  it('runs in its own process group, out of ours, and stop() ends the whole group', async () => {
    const grandchildFile = join(dir, 'grandchild.pid');
    // The grandchild ignores nothing and holds the log pipe, as a helper a component forks would.
    const binary = await script('forking', `sleep 300 &\necho $! > "${grandchildFile}"\nexec sleep 300`);
    const proc = managed({ name: 'forking', binary, readiness: fileProbe(grandchildFile) });
    await proc.start();
    const pid = proc.pid!;
    const grandchild = Number((await readFile(grandchildFile, 'utf8')).trim());
    // A terminal's Ctrl-C goes to the CLI's process group: the child must not be in it.
    expect(processGroupOf(pid)).toBe(pid);
    expect(processGroupOf(grandchild)).toBe(pid);
    expect(processGroupOf(pid)).not.toBe(processGroupOf(process.pid));
    await proc.stop();
    expect(isPidRunning(pid)).toBe(false);
    // Gone, or a zombie until whoever inherited it reaps it: either way it runs nothing.
    await expectGone(grandchild);
  });

  it('runs detached in its own session with output in the log file', async () => {
    const binary = await script('lasting', 'echo "detached output"; exec sleep 300');
    const stateDir = join(dir, 'state');
    const proc = managed({ name: 'lasting', binary, detached: true, stateDir });
    await proc.start();
    const pid = proc.pid!;
    const fields = fieldsAfterComm(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    expect(fields[6 - 3]).toBe(String(pid)); // session id == pid: a session leader
    for (let i = 0; i < 50 && !(await readFile(proc.logFile, 'utf8')).includes('detached output'); i++) await sleep(20);
    expect(await readFile(proc.logFile, 'utf8')).toContain('detached output');
    expect((await readPidfiles(stateDir))[0]?.detached).toBe(true);
    await proc.stop();
    expect(isPidRunning(pid)).toBe(false);
  });
});

describe('ManagedProcess stop during spawn', () => {
  it('does not leave a process running when stop() comes before the spawn', async () => {
    const proc = managed({ name: 'early', binary: '/bin/sleep', args: ['300'], readiness: async () => false, startTimeoutMs: 30_000 });
    const starting = proc.start();
    await proc.stop(); // the start is still checking the binary
    const error = await starting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InterruptedError);
    expect(proc.pid).toBeUndefined();
    expect(proc.state).toBe('stopped');
  });
});

/** Process group id of a running process: /proc/<pid>/stat field 5. */
function processGroupOf(pid: number): number {
  return Number(fieldsAfterComm(readFileSync(`/proc/${pid}/stat`, 'utf8'))[5 - 3]);
}
