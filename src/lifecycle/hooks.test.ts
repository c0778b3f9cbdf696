import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HookError, InterruptedError } from '../errors.js';
import { expectGone } from '../../test/support/process-gone.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { runUserHooks, type HookContext } from './hooks.js';

describe('runUserHooks', () => {
  let dir: string;
  let sink: RecordingSink;
  let context: HookContext;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'hooks-'));
    sink = new RecordingSink();
    context = { stage: 'pre-provision', dir, kubeconfig: path.join(dir, 'auth', 'admin.kubeconfig'), events: sink };
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Writes an executable shell script into the install dir; returns its path relative to it. */
  async function script(name: string, body: string): Promise<string> {
    await writeFile(path.join(dir, name), `#!/bin/sh\n${body}\n`);
    await chmod(path.join(dir, name), 0o755);
    return name;
  }

  /** The HookError a run throws (fails the test if it resolves or throws anything else). */
  async function hookError(run: Promise<void>): Promise<HookError> {
    const error: unknown = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HookError);
    return error as HookError;
  }

  /** The InterruptedError a run throws: an interrupted hook is no hook failure (exit 130, not 7). */
  async function interruption(run: Promise<void>): Promise<InterruptedError> {
    const error: unknown = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InterruptedError);
    return error as InterruptedError;
  }

  it('runs hooks in order with their args from the install dir, logging each to a 0600 file', async () => {
    const first = await script('first.sh', 'echo "first $1 $2"; echo "to stderr" >&2; pwd');
    const second = await script('second.sh', 'echo second');
    await runUserHooks(
      [
        { path: first, args: ['a', 'b c'], timeoutMs: 10_000 },
        { path: second, args: [], timeoutMs: 10_000 },
      ],
      context,
    );
    const log1 = path.join(dir, 'logs', 'hooks', 'pre-provision-1.log');
    const log2 = path.join(dir, 'logs', 'hooks', 'pre-provision-2.log');
    // stdout and stderr are two pipes: their relative order is not guaranteed, each one's is.
    const lines = (await readFile(log1, 'utf8')).split('\n');
    expect(lines.filter((l) => l !== 'to stderr')).toEqual(['first a b c', await realpathOf(dir)]);
    expect(lines).toContain('to stderr');
    expect(await readFile(log2, 'utf8')).toBe('second');
    expect((await stat(log1)).mode & 0o777).toBe(0o600);
    const messages = sink.ofType('log').map((e) => e.message);
    expect(messages.filter((m) => m.includes('succeeded'))).toHaveLength(2);
  });

  it('fails with the exit code and the last lines of output, and runs no later hook', async () => {
    const failing = await script('fail.sh', 'for i in $(seq 1 30); do echo "line $i"; done; echo "boom" >&2; exit 3');
    const marker = path.join(dir, 'ran');
    const after = await script('after.sh', `touch "${marker}"`);
    const error = await hookError(
      runUserHooks(
        [
          { path: failing, args: [], timeoutMs: 10_000 },
          { path: after, args: [], timeoutMs: 10_000 },
        ],
        context,
      ),
    );
    expect(error.message).toBe('The pre-provision hook fail.sh exited with code 3');
    expect(error.details).toContain('| boom');
    expect(error.details).toContain('| line 30');
    // Only the tail: the first lines are in the log file, not the error.
    expect(error.details).not.toContain('| line 1');
    expect(error.details.at(-1)).toBe(`full output: ${path.join(dir, 'logs', 'hooks', 'pre-provision-1.log')}`);
    expect(error.hint).toMatch(/create cluster/);
    await expect(stat(marker)).rejects.toThrow(/ENOENT/);
  });

  /**
   * A hook that starts a child in the background and waits for it: the child traps and
   * ignores nothing and holds the hook's output pipe, so the stage ends only once it is gone.
   */
  async function forkingHook(): Promise<{ hook: string; grandchild: () => Promise<number> }> {
    const pidFile = path.join(dir, 'grandchild.pid');
    const hook = await script('forking.sh', `sleep 300 &\necho $! > "${pidFile}"\necho started\nwait`);
    return { hook, grandchild: async () => Number((await readFile(pidFile, 'utf8')).trim()) };
  }

  it("stops a hook that runs past its timeout, and the hook's children with it", async () => {
    const { hook, grandchild } = await forkingHook();
    const started = performance.now();
    const error = await hookError(runUserHooks([{ path: hook, args: [], timeoutMs: 300 }], context));
    const took = performance.now() - started;
    expect(error.message).toMatch(/^The pre-provision hook forking.sh did not finish within/);
    expect(error.details).toContain('| started');
    expect(took).toBeLessThan(4_000);
    await expectGone(await grandchild());
  });

  it("stops a hook and the hook's children at once when the run is interrupted", async () => {
    const { hook, grandchild } = await forkingHook();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const started = performance.now();
    const error = await interruption(runUserHooks([{ path: hook, args: [], timeoutMs: 60_000 }], { ...context, signal: controller.signal }));
    expect(error.message).toBe('The pre-provision hook forking.sh was interrupted');
    expect(error.details).toContain('| started');
    expect(performance.now() - started).toBeLessThan(4_000);
    await expectGone(await grandchild());
  });

  it('sends SIGTERM first so a hook can clean up, and SIGKILL to a child that ignores it', async () => {
    const cleaned = path.join(dir, 'cleaned');
    const stubbornPid = path.join(dir, 'stubborn.pid');
    // The hook cleans up on SIGTERM; its child ignores SIGTERM and holds the output pipe.
    const hook = await script(
      'cleanup.sh',
      `sh -c "trap '' TERM; echo \\$\\$ > '${stubbornPid}'; while true; do sleep 0.1; done" &\ntrap 'touch "${cleaned}"; exit 1' TERM\necho started\nwhile true; do sleep 0.1; done`,
    );
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 500);
    const started = performance.now();
    const error = await interruption(runUserHooks([{ path: hook, args: [], timeoutMs: 60_000 }], { ...context, signal: controller.signal }));
    const took = performance.now() - started;
    expect(error.message).toBe('The pre-provision hook cleanup.sh was interrupted');
    await expect(stat(cleaned)).resolves.toBeDefined();
    // The stubborn child kept the pipe open until the grace ended in SIGKILL.
    expect(took).toBeGreaterThan(4_500);
    expect(took).toBeLessThan(10_000);
    await expectGone(Number((await readFile(stubbornPid, 'utf8')).trim()));
  });

  it('gives the hook the stage, dir and kubeconfig path from an allow-list, not the parent environment', async () => {
    const envFile = path.join(dir, 'env.txt');
    const dump = await script('env.sh', `env > "${envFile}"`);
    process.env.PROVISIONER_TEST_SECRET = 'must-not-leak';
    try {
      await runUserHooks([{ path: dump, args: [], timeoutMs: 10_000 }], context);
    } finally {
      delete process.env.PROVISIONER_TEST_SECRET;
    }
    const env = Object.fromEntries(
      (await readFile(envFile, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    expect(env.PROVISIONER_STAGE).toBe('pre-provision');
    expect(env.PROVISIONER_DIR).toBe(dir);
    expect(env.KUBECONFIG).toBe(context.kubeconfig);
    expect(env.PROVISIONER_TEST_SECRET).toBeUndefined();
  });

  it('reports a hook that cannot be run', async () => {
    const error = await hookError(runUserHooks([{ path: 'missing.sh', args: [], timeoutMs: 10_000 }], context));
    expect(error.message).toMatch(/^The pre-provision hook missing.sh could not run/);
  });
});

async function realpathOf(p: string): Promise<string> {
  const { realpath } = await import('node:fs/promises');
  return realpath(p);
}
