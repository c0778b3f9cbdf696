/**
 * The pidfile registry: `<stateDir>/pids/<name>.json`, one per running child, so the next run
 * (or `management stop`) can find and stop what an earlier run left behind, even one that was
 * SIGKILLed. Each entry holds the pid *and* the process start time (/proc/<pid>/stat field 22),
 * so a pid the kernel has since given to an unrelated process is never taken for ours.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { log, nullSink, type EventSink } from '../events.js';
import { polling, until, type Observation } from '../progress/until.js';
import { readIfExists, writeFileAtomic } from '../files.js';
import { isErrno } from './fs.js';
import { isSameProcess, processesWithEnv } from './proc.js';

/**
 * Set to the state dir in the environment of every child that records a pidfile there
 * (ManagedProcess), so `findStale` also finds one whose command was killed between spawning it
 * and writing its pidfile: a detached child would otherwise run on unrecorded.
 */
export const stateDirEnv = 'PROVISIONER_STATE_DIR';

export interface PidfileEntry {
  /** Component name; also the file name. */
  name: string;
  pid: number;
  /** Start time in clock ticks since boot; null where /proc is unavailable. */
  startTime: string | null;
  binary: string;
  /** `hashArgs(binary, args)`. */
  argsHash: string;
  /** Ports it listens on, by role. */
  ports: Record<string, number>;
  logFile: string;
  /** True for a process meant to outlive the CLI (a lasting management cluster). */
  detached: boolean;
  /** The CLI process that started it. */
  ownerPid: number;
  /** ISO time it was started. */
  startedAt: string;
}

export function pidsDir(stateDir: string): string {
  return join(stateDir, 'pids');
}

export function pidfilePath(stateDir: string, name: string): string {
  return join(pidsDir(stateDir), `${name}.json`);
}

export async function writePidfile(stateDir: string, entry: PidfileEntry): Promise<void> {
  await mkdir(pidsDir(stateDir), { recursive: true, mode: 0o700 });
  await writeFileAtomic(pidfilePath(stateDir, entry.name), `${JSON.stringify(entry, null, 2)}\n`);
}

/** Removes `<name>.json`; with `pid`, only when the file still records that pid (a newer run's entry is kept). */
export async function removePidfile(stateDir: string, name: string, pid?: number): Promise<void> {
  const path = pidfilePath(stateDir, name);
  if (pid !== undefined) {
    const entry = parseEntry(await readIfExists(path));
    if (entry !== undefined && entry.pid !== pid) return;
  }
  await rm(path, { force: true });
}

/** Every readable entry (files that do not parse are removed: nothing can be done with them). */
export async function readPidfiles(stateDir: string): Promise<PidfileEntry[]> {
  let names: string[];
  try {
    names = await readdir(pidsDir(stateDir));
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return [];
    throw error;
  }
  const entries: PidfileEntry[] = [];
  for (const file of names.filter((n) => n.endsWith('.json')).sort()) {
    const path = join(pidsDir(stateDir), file);
    const entry = parseEntry(await readIfExists(path));
    if (entry === undefined) await rm(path, { force: true });
    else entries.push(entry);
  }
  return entries;
}

/** The recorded process is still running: same pid and same start time. */
export function isAlive(entry: Pick<PidfileEntry, 'pid' | 'startTime'>): boolean {
  return isSameProcess(entry.pid, entry.startTime);
}

/**
 * Entries whose process still runs (same pid and start time). Entries whose process is gone
 * are removed. Includes detached processes (`entry.detached`), which are meant to outlive
 * their CLI; filter them out when only a killed run's leftovers should go. Also includes, as
 * detached entries named by their command, live processes started for this state dir that no
 * pidfile records (`stateDirEnv`): a command killed before it recorded one.
 */
export async function findStale(stateDir: string): Promise<PidfileEntry[]> {
  const alive: PidfileEntry[] = [];
  for (const entry of await readPidfiles(stateDir)) {
    if (isAlive(entry)) alive.push(entry);
    else await removePidfile(stateDir, entry.name, entry.pid);
  }
  const recorded = new Set(alive.map((e) => e.pid));
  for (const found of await processesWithEnv(stateDirEnv, stateDir)) {
    if (recorded.has(found.pid)) continue;
    alive.push({ name: found.command, pid: found.pid, startTime: found.startTime, binary: found.exe, argsHash: '', ports: {}, logFile: '', detached: true, ownerPid: 0, startedAt: '' });
  }
  return alive;
}

export interface StopStaleOptions {
  /** Which running entries to stop. Default: all. */
  filter?: (entry: PidfileEntry) => boolean;
  /** Wait after SIGTERM before SIGKILL. Default 10 s. */
  graceMs?: number;
  /** Receives a warn log per process stopped. Default: dropped. */
  events?: EventSink;
}

/** Default grace between SIGTERM and SIGKILL for a stale process: 10 s. */
const defaultStaleGraceMs = 10_000;

/** Stops (SIGTERM, grace, SIGKILL) the stale processes `findStale` reports and removes their files; returns them. */
export async function stopStale(stateDir: string, options: StopStaleOptions = {}): Promise<PidfileEntry[]> {
  return stopFound(stateDir, await findStale(stateDir), options);
}

/** `stopStale` for entries `findStale` already returned, so a caller stopping them in groups searches once. */
export async function stopFound(stateDir: string, found: readonly PidfileEntry[], options: StopStaleOptions = {}): Promise<PidfileEntry[]> {
  const events = options.events ?? nullSink;
  const targets = found.filter(options.filter ?? (() => true));
  await Promise.all(
    targets.map(async (entry) => {
      log(events, 'warn', `Stopping ${entry.name} (pid ${entry.pid}) left running by an earlier run`, {
        pid: entry.pid,
        binary: entry.binary,
        startedAt: entry.startedAt,
      });
      const graceMs = options.graceMs ?? defaultStaleGraceMs;
      if ((await terminateRecorded(entry, graceMs)) === 'killed' && graceMs > 0) {
        log(events, 'warn', `${entry.name} (pid ${entry.pid}) did not exit within ${graceMs / 1000} s of SIGTERM: killed with SIGKILL`, { pid: entry.pid });
      }
      await removePidfile(stateDir, entry.name, entry.pid);
    }),
  );
  return targets;
}

/** Pause between looks while waiting for a process that is not our child (no exit event for those). */
const exitPollMs = 50;
/** How long to wait after SIGKILL before giving up. */
const killWaitMs = 5_000;

/**
 * SIGTERM to a recorded process and its whole process group (every child leads its own, see
 * ManagedProcess), wait up to `graceMs`, then SIGKILL. Signals are sent only while the pid
 * still has the recorded start time, and while it lives no other process can lead a group of
 * that id. Resolves how it ended: `terminated` (gone within the grace), `killed` (gone after
 * SIGKILL) or `survived` (still there after SIGKILL too).
 */
async function terminateRecorded(entry: Pick<PidfileEntry, 'pid' | 'startTime'>, graceMs: number): Promise<'terminated' | 'killed' | 'survived'> {
  const signal = (sig: NodeJS.Signals) => {
    if (!isAlive(entry)) return;
    try {
      process.kill(-entry.pid, sig);
    } catch (error) {
      // Not a group leader (recorded by an older provisioner, which did not start a group per child): the pid alone.
      if (!isErrno(error, 'ESRCH')) throw error;
      try {
        process.kill(entry.pid, sig);
      } catch (inner) {
        if (!isErrno(inner, 'ESRCH')) throw inner;
      }
    }
  };
  // Running or gone is all there is to see, so "no progress for `ms`" is "still running after `ms`".
  const waitGone = (ms: number): Promise<boolean> => {
    const stillRunning = new Error(`pid ${entry.pid} still runs`);
    const look = (): Observation<boolean> => (isAlive(entry) ? { state: 'waiting', value: false, progress: 'running' } : { state: 'done', value: true, progress: 'gone' });
    return until(polling(look, exitPollMs), { what: `pid ${entry.pid} to exit`, noProgressTimeoutMs: ms, onStall: () => stillRunning }).catch((error: unknown) => {
      if (error === stillRunning) return false;
      throw error;
    });
  };
  signal('SIGTERM');
  if (await waitGone(graceMs)) return 'terminated';
  signal('SIGKILL');
  return (await waitGone(killWaitMs)) ? 'killed' : 'survived';
}

function parseEntry(text: string | undefined): PidfileEntry | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<PidfileEntry>;
    if (typeof value.name !== 'string' || typeof value.pid !== 'number' || !Number.isInteger(value.pid) || value.pid <= 1) return undefined;
    if (value.startTime !== null && typeof value.startTime !== 'string') return undefined;
    return {
      name: value.name,
      pid: value.pid,
      startTime: value.startTime,
      binary: String(value.binary ?? ''),
      argsHash: String(value.argsHash ?? ''),
      ports: value.ports ?? {},
      logFile: String(value.logFile ?? ''),
      detached: value.detached === true,
      ownerPid: Number(value.ownerPid ?? 0),
      startedAt: String(value.startedAt ?? ''),
    };
  } catch {
    return undefined;
  }
}
