/**
 * The install-dir lock: one provisioner command at a time per install directory.
 *
 * `<dir>/.provisioner.lock` holds the holder's pid, process start time, hostname, command
 * and start date. It is created atomically with its content: written to a temp file, then
 * hard-linked to the lock name (link fails if the name exists, like O_EXCL, and no reader
 * ever sees an empty lock). On filesystems without hard links it falls back to an O_EXCL
 * (`wx`) create. A lock whose holder is gone, or whose pid now belongs to another process
 * (start time differs), is stale and taken over with a warning.
 */
import { randomBytes } from 'node:crypto';
import { hostname as osHostname } from 'node:os';
import { link, mkdir, open, rename, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { EnvironmentError } from '../errors.js';
import { log, nullSink, type EventSink } from '../events.js';
import { isErrno, readIfExists, sleep } from './fs.js';
import { isSameProcess, processStartTime } from './proc.js';

export const lockFileName = '.provisioner.lock';

export interface LockHolder {
  pid: number;
  /** Clock ticks since boot (/proc/<pid>/stat field 22); null where /proc is unavailable. */
  startTime: string | null;
  hostname: string;
  /** The command that holds it, e.g. `create cluster`. */
  command: string;
  /** ISO time the lock was taken. */
  startedAt: string;
  /** Random per acquisition, so release never removes a lock taken over by someone else. */
  token: string;
}

export interface DirLock {
  path: string;
  holder: LockHolder;
  /** Removes the lock if it is still ours (same token). Idempotent. */
  release(): Promise<void>;
}

export interface AcquireDirLockOptions {
  /** The command taking the lock, shown to anyone refused. */
  command: string;
  /** Receives the warning when a stale lock is taken over. Default: dropped. */
  events?: EventSink;
}

/** Attempts before giving up when other processes keep racing for a stale lock. */
const maxAttempts = 5;
/** Wait before treating an unreadable lock file as stale. */
const unreadableGraceMs = 200;

/**
 * Takes `<dir>/.provisioner.lock` (creating `dir` if needed). Throws EnvironmentError naming
 * the holder when another live process holds it.
 */
export async function acquireDirLock(dir: string, options: AcquireDirLockOptions): Promise<DirLock> {
  const events = options.events ?? nullSink;
  const path = join(dir, lockFileName);
  await mkdir(dir, { recursive: true });
  const startTime = processStartTime(process.pid);
  const holder: LockHolder = {
    pid: process.pid,
    startTime: startTime ?? null,
    hostname: osHostname(),
    command: options.command,
    startedAt: new Date().toISOString(),
    token: randomBytes(12).toString('hex'),
  };
  const content = `${JSON.stringify(holder, null, 2)}\n`;

  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    if (await createExclusive(path, content)) return makeLock(path, holder);
    let text = await readIfExists(path);
    if (text === undefined) continue; // released between our create and read: try again
    if (parseHolder(text) === undefined) {
      // Only the O_EXCL fallback shows a lock before its content: give its writer a moment.
      await sleep(unreadableGraceMs);
      text = await readIfExists(path);
      if (text === undefined) continue;
    }
    const current = parseHolder(text);
    if (current !== undefined && !isStale(current)) throw heldError(dir, path, current);
    // Stale (or unreadable): move it aside atomically, then check that what we moved is what we judged.
    const aside = `${path}.stale-${holder.token}`;
    try {
      await rename(path, aside);
    } catch (error) {
      if (isErrno(error, 'ENOENT')) continue; // someone else moved it first
      throw error;
    }
    const moved = await readIfExists(aside);
    if (moved !== text) {
      // We raced with a process that took the lock after our read: put its lock back.
      if (moved !== undefined) await link(aside, path).catch(() => undefined);
      await rm(aside, { force: true });
      continue;
    }
    await rm(aside, { force: true });
    log(
      events,
      'warn',
      current === undefined
        ? `Replaced an unreadable lock file ${path}`
        : `Took over a stale lock on ${dir} from pid ${current.pid} (${current.command}, since ${current.startedAt}), which is no longer running`,
      current === undefined ? { path } : { path, pid: current.pid, command: current.command, since: current.startedAt },
    );
  }
  throw new EnvironmentError(`Could not take the lock on ${dir}: other processes keep taking it`, {
    hint: `Make sure no other provisioner command runs on ${dir}, then retry.`,
  });
}

function makeLock(path: string, holder: LockHolder): DirLock {
  let released = false;
  return {
    path,
    holder,
    async release() {
      if (released) return;
      released = true;
      const current = parseHolder((await readIfExists(path)) ?? '');
      if (current?.token !== holder.token) return;
      await unlink(path).catch((error: unknown) => {
        if (!isErrno(error, 'ENOENT')) throw error;
      });
    },
  };
}

/** Creates `path` with `content` only if it does not exist; false when it exists. */
async function createExclusive(path: string, content: string): Promise<boolean> {
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(temp, 'wx', 0o644);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temp, path);
    return true;
  } catch (error) {
    if (isErrno(error, 'EEXIST')) return false;
    if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS'].some((code) => isErrno(error, code))) throw error;
    return createWithOExcl(path, content); // no hard links on this filesystem
  } finally {
    await rm(temp, { force: true });
  }
}

async function createWithOExcl(path: string, content: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'wx', 0o644);
  } catch (error) {
    if (isErrno(error, 'EEXIST')) return false;
    throw error;
  }
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/** A holder on this host that is no longer running (pid gone or reused). Locks from other hosts are never stale. */
function isStale(holder: LockHolder): boolean {
  if (holder.hostname !== osHostname()) return false;
  return !isSameProcess(holder.pid, holder.startTime);
}

function heldError(dir: string, path: string, holder: LockHolder): EnvironmentError {
  const here = holder.hostname === osHostname();
  return new EnvironmentError(
    `${dir} is in use by another provisioner command: "${holder.command}" (pid ${holder.pid}${here ? '' : ` on ${holder.hostname}`}, since ${holder.startedAt})`,
    {
      hint: here
        ? `Wait for it to finish or stop it (kill ${holder.pid}), then retry.`
        : `Wait for it to finish on ${holder.hostname}; if it is no longer running there, delete ${path} and retry.`,
    },
  );
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockHolder>;
    if (typeof value.pid !== 'number' || typeof value.hostname !== 'string' || typeof value.token !== 'string') return undefined;
    return {
      pid: value.pid,
      startTime: typeof value.startTime === 'string' ? value.startTime : null,
      hostname: value.hostname,
      command: String(value.command ?? 'unknown'),
      startedAt: String(value.startedAt ?? 'unknown'),
      token: value.token,
    };
  } catch {
    return undefined;
  }
}
