/**
 * Children never outlive the CLI: a real node parent (run with tsx) starts `sleep 300`
 * through ManagedProcess, is SIGKILLed, and the child must die with it. Without the death
 * signal (plain spawn) or by design (detached), the child survives and the pidfile lets the
 * next run stop it.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findStale, isAlive, readPidfiles, stopStale, type PidfileEntry } from './pidfile.js';
import { sleep } from '../concurrency.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const managedProcessModule = new URL('./managed-process.ts', import.meta.url).href;

let dir: string;
const leftovers: PidfileEntry[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proc-orphan-'));
});
afterEach(async () => {
  for (const entry of leftovers.splice(0)) if (isAlive(entry)) process.kill(entry.pid, 'SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

async function waitFor<T>(read: () => Promise<T | undefined> | T | undefined, ms: number, what: () => string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await sleep(50);
  }
}

/** Starts the parent fixture, waits for its child's pidfile, SIGKILLs the parent; returns the child's entry. */
async function killParentOfSleeper(mode: 'attached' | 'plain' | 'detached'): Promise<PidfileEntry> {
  const fixture = join(dir, 'parent.mts'); // .mts: ESM (top-level await) outside any package.json
  await writeFile(
    fixture,
    `import { ManagedProcess } from ${JSON.stringify(managedProcessModule)};
const [stateDir, logDir, mode] = process.argv.slice(2);
const child = new ManagedProcess({
  name: 'sleeper', binary: '/bin/sleep', args: ['300'], logDir, stateDir,
  detached: mode === 'detached', pdeathsigWrapper: mode === 'plain' ? null : undefined,
});
await child.start();
setInterval(() => {}, 60_000);
`,
  );
  const stateDir = join(dir, 'state');
  const parent = spawn(process.execPath, ['--import', 'tsx', fixture, stateDir, join(dir, 'logs'), mode], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  parent.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const parentExit = new Promise<NodeJS.Signals | null>((resolve) => parent.once('exit', (_code, signal) => resolve(signal)));
  try {
    const entry = await waitFor(async () => (await readPidfiles(stateDir))[0], 15_000, () => `the sleeper's pidfile (parent stderr: ${stderr})`);
    leftovers.push(entry);
    expect(entry.ownerPid).toBe(parent.pid);
    expect(isAlive(entry)).toBe(true);
    parent.kill('SIGKILL');
    expect(await parentExit).toBe('SIGKILL');
    return entry;
  } finally {
    parent.kill('SIGKILL');
  }
}

describe('children of a SIGKILLed CLI', () => {
  it('die with it (setpriv --pdeathsig KILL)', async () => {
    const entry = await killParentOfSleeper('attached');
    await waitFor(() => (isAlive(entry) ? undefined : true), 5_000, () => `pid ${entry.pid} to die`);
    expect(isAlive(entry)).toBe(false);
    expect(await findStale(join(dir, 'state'))).toEqual([]); // the next run drops the dead entry
  }, 30_000);

  it('survive a plain spawn, and the next run stops them from the pidfile', async () => {
    const entry = await killParentOfSleeper('plain');
    await sleep(500);
    expect(isAlive(entry)).toBe(true);
    const stopped = await stopStale(join(dir, 'state'), { graceMs: 2_000 });
    expect(stopped.map((e) => e.pid)).toEqual([entry.pid]);
    expect(isAlive(entry)).toBe(false);
  }, 30_000);

  it('survive by design when detached, and can be found and stopped later', async () => {
    const entry = await killParentOfSleeper('detached');
    await sleep(500);
    expect(isAlive(entry)).toBe(true);
    const [stale] = await findStale(join(dir, 'state'));
    expect(stale).toMatchObject({ pid: entry.pid, detached: true, name: 'sleeper' });
    await stopStale(join(dir, 'state'), { graceMs: 2_000 });
    expect(isAlive(entry)).toBe(false);
  }, 30_000);
});
