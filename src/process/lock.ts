/**
 * Lock files, and the install-dir lock built on them: one provisioner command at a time per
 * install directory (`acquireDirLock`); the extraction cache locks each entry with the same
 * `tryLockFile`.
 *
 * A lock file (`<dir>/.provisioner.lock` for the install dir) holds the holder's pid, process start time, hostname, command
 * and start date. It is created atomically with its content: written to a temp file, then
 * hard-linked to the lock name (link fails if the name exists, like O_EXCL, and no reader
 * ever sees an empty lock). On filesystems without hard links it falls back to an O_EXCL
 * (`wx`) create. A lock whose holder is gone, or whose pid now belongs to another process
 * (start time differs), is stale and taken over with a warning. A lock taken with
 * `staleAfterMs` is also kept fresh (its mtime touched) while held, and is stale to anyone
 * once untouched that long, even one held on another host.
 */
import { randomBytes } from 'node:crypto';
import { hostname as osHostname } from 'node:os';
import { link, mkdir, open, rename, rm, stat, unlink, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { EnvironmentError, UsageError } from '../errors.js';
import { log, nullSink, type EventSink } from '../events.js';
import { sleep } from '../concurrency.js';
import { readIfExists } from '../files.js';
import { isErrno } from './fs.js';
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

export interface LockFileOptions extends AcquireDirLockOptions {
  /** What the lock guards, for messages (the install dir, a cache entry). Default: the lock file's path. */
  guards?: string;
  /**
   * Keep the lock fresh while held (its mtime is touched every twelfth of this), and treat one
   * untouched this long as stale whoever holds it, on any host. Default: none, so a lock held
   * on another host is never taken over.
   */
  staleAfterMs?: number;
}

/** The lock, or the live holder that has it. */
export type LockAttempt = { lock: DirLock } | { heldBy: LockHolder };

/** Attempts before giving up when other processes keep racing for a stale lock. */
const maxAttempts = 5;
/** Wait before treating an unreadable lock file as stale. */
const unreadableGraceMs = 200;

/** What `acquireDirLock` does about a directory that does not exist. */
export interface InstallDirLockOptions extends AcquireDirLockOptions {
  /**
   * Create `dir` when it does not exist: for the commands that start a new install directory
   * (`management start`). Default false: a missing directory is a UsageError naming it, so a
   * mistyped `--dir` leaves nothing behind.
   */
  createDir?: boolean;
}

/**
 * Takes `<dir>/.provisioner.lock`. Throws UsageError when `dir` does not exist (unless
 * `createDir`), and EnvironmentError naming the holder when another live process holds it.
 */
export async function acquireDirLock(dir: string, options: InstallDirLockOptions): Promise<DirLock> {
  const path = join(dir, lockFileName);
  if (options.createDir) await mkdir(dir, { recursive: true });
  else await requireInstallDir(dir, options.command);
  const attempt = await tryLockFile(path, { ...options, guards: dir });
  if ('heldBy' in attempt) throw heldError(dir, path, attempt.heldBy);
  return attempt.lock;
}

/** Refuses an install directory that does not exist, or a path that is not a directory. */
async function requireInstallDir(dir: string, command: string): Promise<void> {
  const info = await stat(dir).catch((error: unknown) => {
    if (isErrno(error, 'ENOENT')) return undefined;
    throw error;
  });
  if (info?.isDirectory()) return;
  throw new UsageError(info ? `${dir} is not a directory: ${command} needs an install directory` : `No install directory at ${dir}: ${command} needs one`, {
    hint: 'Check --dir (the directory `provisioner create install-config --dir <dir>` wrote, or `management start` made); nothing was written.',
  });
}

/**
 * Takes the lock file at `path` (its directory must exist), taking over a stale one; answers
 * the holder instead when another live process has it. Never waits for a live holder.
 */
export async function tryLockFile(path: string, options: LockFileOptions): Promise<LockAttempt> {
  const events = options.events ?? nullSink;
  const guards = options.guards ?? path;
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
    if (await createExclusive(path, content)) return { lock: makeLock(path, holder, options.staleAfterMs) };
    let text = await readIfExists(path);
    if (text === undefined) continue; // released between our create and read: try again
    if (parseHolder(text) === undefined) {
      // Only the O_EXCL fallback shows a lock before its content: give its writer a moment.
      await sleep(unreadableGraceMs);
      text = await readIfExists(path);
      if (text === undefined) continue;
    }
    const current = parseHolder(text);
    if (current !== undefined && !(await isStale(path, current, options.staleAfterMs))) return { heldBy: current };
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
        : `Took over a stale lock on ${guards} from pid ${current.pid} (${current.command}, since ${current.startedAt}), which is no longer running`,
      current === undefined ? { path } : { path, pid: current.pid, command: current.command, since: current.startedAt },
    );
  }
  throw new EnvironmentError(`Could not take the lock on ${guards}: other processes keep taking it`, {
    hint: `Make sure no other provisioner command runs on ${guards}, then retry.`,
  });
}

function makeLock(path: string, holder: LockHolder, staleAfterMs: number | undefined): DirLock {
  let released = false;
  const heartbeat =
    staleAfterMs === undefined
      ? undefined
      : setInterval(() => {
          const now = new Date();
          utimes(path, now, now).catch(() => undefined);
        }, staleAfterMs / 12);
  heartbeat?.unref();
  return {
    path,
    holder,
    async release() {
      if (released) return;
      released = true;
      clearInterval(heartbeat);
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

/**
 * A holder on this host that is no longer running (pid gone or reused), or, with
 * `staleAfterMs`, a lock untouched that long. Otherwise locks from other hosts are never stale.
 */
async function isStale(path: string, holder: LockHolder, staleAfterMs: number | undefined): Promise<boolean> {
  if (staleAfterMs !== undefined) {
    const touched = await stat(path).then((st) => st.mtimeMs).catch(() => Date.now());
    if (Date.now() - touched > staleAfterMs) return true;
  }
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
