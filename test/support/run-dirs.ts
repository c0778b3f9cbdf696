/**
 * Temp directories a test run owns, named with the pid of the process that made them
 * (`provisioner-run-<pid>-<name>-XXXXXX`), and the sweep of those whose process is gone: a
 * run killed before its afterAll (SIGKILL, a CI timeout) leaves its install dirs and, in them,
 * the detached control planes they record (etcd, kube-apiserver, the managers, which also hold
 * the in-memory provider's listener port every later in-memory test waits for). Every
 * integration and e2e run sweeps first (vitest.config.ts: globalSetup), so a file creates and
 * removes what it needs also when an earlier run of it was killed.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { isAlive, readPidfiles } from '../../src/process/pidfile.js';

const runDirPattern = /^provisioner-run-(\d+)-/;

/** A fresh directory under the OS temp dir, owned by this process (swept once it is gone). */
export function runTempDir(name: string): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `provisioner-run-${process.pid}-${name}-`));
}

/** SIGKILLs every process an install dir's pidfiles record that still runs (its group too: detached ones lead one). */
async function killRecordedIn(installDir: string): Promise<void> {
  for (const entry of (await readPidfiles(controlPlaneLayout(installDir).stateDir).catch(() => [])).filter((e) => isAlive(e))) {
    for (const target of [-entry.pid, entry.pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Already gone, or not a group leader.
      }
    }
  }
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `dir` and the directories below it, two levels deep, that hold an install's local state. */
async function installDirsIn(dir: string, depth = 2): Promise<string[]> {
  const found = (await stat(path.join(dir, '.provisioner')).then(() => true, () => false)) ? [dir] : [];
  if (depth === 0) return found;
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.isDirectory() && entry.name !== '.provisioner') found.push(...(await installDirsIn(path.join(dir, entry.name), depth - 1)));
  }
  return found;
}

/**
 * Kills every process the install dirs of a gone run's temp directories record, then removes
 * those directories. Returns the directories removed.
 */
export async function sweepStaleRunDirs(): Promise<string[]> {
  const swept: string[] = [];
  for (const name of await readdir(os.tmpdir())) {
    const pid = Number(runDirPattern.exec(name)?.[1] ?? 0);
    if (!pid || processRuns(pid)) continue;
    const dir = path.join(os.tmpdir(), name);
    for (const install of await installDirsIn(dir)) await killRecordedIn(install);
    await rm(dir, { recursive: true, force: true });
    swept.push(dir);
  }
  return swept;
}

/** vitest globalSetup: the sweep, once before a run's files. */
export async function setup(): Promise<void> {
  const swept = await sweepStaleRunDirs();
  if (swept.length > 0) process.stderr.write(`tests: removed ${swept.length} temp dir(s) of runs that are gone (a killed run's, or a finished one's kubectl cache), and the processes they recorded: ${swept.join(', ')}\n`);
}
