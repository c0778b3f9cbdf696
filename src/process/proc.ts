/**
 * Identity of a running process: a pid plus its start time, so a pid the kernel recycled for
 * another program is never mistaken for ours. Linux reads /proc; elsewhere the start time is
 * unknown (null) and only "a process with this pid exists" can be checked.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';

/**
 * Start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat), as a string;
 * undefined when the process does not exist or is a zombie; null when /proc is unavailable.
 * A zombie leader whose other threads still run is alive: a SIGKILLed process shows its
 * leader as `Z` while the rest of its threads exit, and until the last one has, its files
 * (a listening socket among them) are still open.
 */
export function processStartTime(pid: number): string | null | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if ((code === 'ENOENT' || code === 'ESRCH') && procAvailable()) return undefined;
    // No /proc, or not readable (e.g. EACCES): the start time is unknown.
    return isPidRunning(pid) ? null : undefined;
  }
  const rest = fieldsAfterComm(stat);
  const state = rest[0]; // field 3
  if (state === 'X' || (state === 'Z' && !hasLiveThread(pid))) return undefined;
  return rest[22 - 3];
}

/** Fields 3 onwards of a /proc stat line: field 2 (comm) is in parentheses and may itself hold spaces or ')'. */
export function fieldsAfterComm(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Whether a thread of `pid` other than its leader is neither a zombie nor dead. */
function hasLiveThread(pid: number): boolean {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tids.some((tid) => {
    if (tid === String(pid)) return false;
    try {
      const state = fieldsAfterComm(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'))[0];
      return state !== 'Z' && state !== 'X';
    } catch {
      return false; // exited while we read
    }
  });
}

/** True when `pid` is the same process that had `startTime` (null: unknown, so any live pid matches). */
export function isSameProcess(pid: number, startTime: string | null): boolean {
  const current = processStartTime(pid);
  if (current === undefined) return false;
  if (current === null || startTime === null) return isPidRunning(pid);
  return current === startTime;
}

/** kill(pid, 0): a process with this pid exists (EPERM means it exists but is not ours to signal). */
export function isPidRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let procChecked: boolean | undefined;
function procAvailable(): boolean {
  if (procChecked === undefined) {
    try {
      readFileSync('/proc/self/stat');
      procChecked = true;
    } catch {
      procChecked = false;
    }
  }
  return procChecked;
}

/** A live process found by `processesWithEnv`. */
export interface FoundProcess {
  pid: number;
  startTime: string;
  /** Its command name (/proc/<pid>/comm: the executable's name, at most 15 characters). */
  command: string;
  /** Its executable, or '' when it cannot be read. */
  exe: string;
}

/**
 * Live processes other than this one whose environment holds `name=value` exactly. Reads
 * /proc/<pid>/environ, which the kernel shows only for one's own processes (others are
 * skipped); none where /proc is unavailable.
 */
export async function processesWithEnv(name: string, value: string): Promise<FoundProcess[]> {
  const entry = Buffer.from(`${name}=${value}\0`);
  let pids: number[];
  try {
    pids = (await readdir('/proc')).filter((n) => /^\d+$/.test(n)).map(Number).filter((pid) => pid !== process.pid);
  } catch {
    return [];
  }
  const found: FoundProcess[] = [];
  for (const pid of pids) {
    const environ = await readFile(`/proc/${pid}/environ`).catch(() => undefined);
    if (!environ || !holdsEntry(environ, entry)) continue;
    const startTime = processStartTime(pid);
    if (!startTime) continue; // gone, or a zombie with no live thread
    const command = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
    found.push({ pid, startTime, command, exe: await readlink(`/proc/${pid}/exe`).catch(() => '') });
  }
  return found;
}

/** Whether a NUL-separated environment holds `entry` (`name=value\0`) as a whole entry. */
function holdsEntry(environ: Buffer, entry: Buffer): boolean {
  for (let at = environ.indexOf(entry); at !== -1; at = environ.indexOf(entry, at + 1)) {
    if (at === 0 || environ[at - 1] === 0) return true;
  }
  return false;
}
