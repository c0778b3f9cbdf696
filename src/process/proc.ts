/**
 * Identity of a running process: a pid plus its start time, so a pid the kernel recycled for
 * another program is never mistaken for ours. Linux reads /proc; elsewhere the start time is
 * unknown (null) and only "a process with this pid exists" can be checked.
 */
import { readFileSync } from 'node:fs';

/**
 * Start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat), as a string;
 * undefined when the process does not exist or is a zombie; null when /proc is unavailable.
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
  // Field 2 (comm) is in parentheses and may itself hold spaces or ')'; fields 3.. follow the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = rest[0]; // field 3
  if (state === 'Z' || state === 'X') return undefined;
  return rest[22 - 3];
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
