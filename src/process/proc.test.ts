import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { sleep } from '../concurrency.js';
import { fieldsAfterComm, isSameProcess, processStartTime } from './proc.js';

/** The exit(2) system call, which ends one thread (exit_group(2) ends them all). */
const sysExit: Partial<Record<NodeJS.Architecture, number>> = { x64: 60, arm64: 93 };

function leaderState(pid: number): string | undefined {
  try {
    return fieldsAfterComm(readFileSync(`/proc/${pid}/stat`, 'utf8'))[0];
  } catch {
    return undefined;
  }
}

describe('processStartTime', () => {
  it('counts a zombie leader whose other thread still runs as alive, and as gone once that thread exits', async () => {
    const exitCall = sysExit[process.arch];
    if (exitCall === undefined) throw new Error(`no exit(2) number for ${process.arch}: add it to sysExit`);
    // Perl with its threads module (Debian's perl; .ci/run installs it) and a thread that lives 1.5 s; the leader ends only itself.
    const child = spawn('perl', ['-Mthreads', '-e', `threads->create(sub { sleep 1.5 })->detach; select(undef, undef, undef, 0.2); syscall(${exitCall}, 0);`], { stdio: 'ignore' });
    const exited = once(child, 'exit');
    const pid = child.pid!;
    let started: string | null | undefined;
    for (let i = 0; i < 50 && started === undefined; i++) {
      started = processStartTime(pid);
      if (started === undefined) await sleep(10);
    }
    expect(started, 'the perl process never appeared').toEqual(expect.any(String));

    for (let i = 0; i < 100 && leaderState(pid) !== 'Z'; i++) await sleep(10);
    expect(leaderState(pid), 'its leader thread never exited').toBe('Z');
    expect(processStartTime(pid)).toBe(started);
    expect(isSameProcess(pid, started!)).toBe(true);

    await exited; // the thread has exited and Node reaped the process
    expect(processStartTime(pid)).toBeUndefined();
    expect(isSameProcess(pid, started!)).toBe(false);
  });
});
