/**
 * Helpers shared by the control-plane integration tests: temp install dirs, the pidfiles a
 * control plane records, who listens where (read from /proc, so no `ss` is needed), and a
 * cleanup that kills whatever a failed test left running.
 */
import { readdir, readFile, readlink, rm } from 'node:fs/promises';
import path from 'node:path';
import { controlPlaneLayout } from '../../../src/controlplane/layout.js';
import { loadCatalog } from '../../../src/embedded/catalog.js';
import { findStale, isAlive, readPidfiles, type PidfileEntry } from '../../../src/process/pidfile.js';
import { runTempDir } from '../../support/run-dirs.js';

export const loopbackAddress = '127.0.0.1';

/**
 * The processes of a full local control plane (management start, or a start with no
 * platform's selection): etcd, kube-apiserver and one manager per bundled controller binary.
 */
export async function expectedProcessCount(): Promise<number> {
  const { components } = await loadCatalog();
  // One process per binary: capi-manager serves several providers.
  return 2 + new Set(components.flatMap((c) => (c.binary ? [c.binary] : []))).size;
}

/** A fresh install directory under the OS temp dir. */
export function tempInstallDir(prefix: string): Promise<string> {
  return runTempDir(`it-${prefix}`);
}

export function stateDirOf(dir: string): string {
  return controlPlaneLayout(dir).stateDir;
}

export function recordedProcesses(dir: string): Promise<PidfileEntry[]> {
  return readPidfiles(stateDirOf(dir));
}

/** Recorded entries whose process still runs (same pid and start time; zombies count as gone). */
export async function aliveRecorded(dir: string): Promise<PidfileEntry[]> {
  return (await recordedProcesses(dir)).filter((e) => isAlive(e));
}

/** Thrown by a `waitFor` check to stop waiting at once (e.g. the process it waits on exited). */
export class GiveUp extends Error {}

/**
 * Polls `check` every 100 ms until it returns a value other than undefined/false, or throws after
 * `timeoutMs`. A check that throws is retried (the last error is reported on timeout), except GiveUp.
 */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      if (error instanceof GiveUp) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Whether every given entry's process is gone within `timeoutMs`; returns the ones still alive. */
export async function stillAliveAfter(entries: readonly PidfileEntry[], timeoutMs: number): Promise<PidfileEntry[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive = entries.filter((e) => isAlive(e));
    if (alive.length === 0 || Date.now() >= deadline) return alive;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** SIGKILLs every recorded process still alive, and its process group (each child leads one). For cleanup after a failed test. */
export async function killRecorded(dir: string): Promise<void> {
  // findStale: the recorded ones, and any started for this dir by a command killed before it recorded it.
  const left = await findStale(stateDirOf(dir));
  for (const entry of left) {
    for (const target of [-entry.pid, entry.pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Already gone, or not a group leader.
      }
    }
  }
  await stillAliveAfter(left, 5_000);
}

/** Kills leftovers and removes the directory. */
export async function removeInstallDir(dir: string | undefined): Promise<void> {
  if (!dir) return;
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

/** A listening TCP socket. */
export interface Listener {
  address: string;
  port: number;
}

/**
 * The TCP sockets `pid` listens on, IPv4 and IPv6: its socket inodes from /proc/<pid>/fd,
 * matched against /proc/<pid>/net/tcp{,6} entries in state LISTEN (0A).
 */
export async function listenersOf(pid: number): Promise<Listener[]> {
  const inodes = new Set<string>();
  const fdDir = `/proc/${pid}/fd`;
  for (const fd of await readdir(fdDir)) {
    const target = await readlink(path.join(fdDir, fd)).catch(() => '');
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match?.[1]) inodes.add(match[1]);
  }
  const listeners: Listener[] = [];
  for (const table of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${table}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [local, state, inode] = [fields[1], fields[3], fields[9]];
      if (!local || state !== '0A' || !inode || !inodes.has(inode)) continue;
      const [hexAddress = '', hexPort = ''] = local.split(':');
      listeners.push({ address: decodeProcAddress(hexAddress), port: Number.parseInt(hexPort, 16) });
    }
  }
  return listeners;
}

/** /proc/net/tcp addresses are 32-bit words in host (little-endian) byte order. IPv6 comes out uncompressed, but `::` and `::1` by name. */
function decodeProcAddress(hex: string): string {
  const bytes = (hex.match(/.{8}/g) ?? []).flatMap((word) => (word.match(/../g) ?? []).reverse().map((b) => Number.parseInt(b, 16)));
  if (bytes.length === 4) return bytes.join('.');
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return `::ffff:${bytes.slice(12).join('.')}`;
  if (bytes.slice(0, 15).every((b) => b === 0)) return bytes[15] === 0 ? '::' : bytes[15] === 1 ? '::1' : `::${bytes[15]}`;
  const groups: string[] = [];
  for (let i = 0; i < bytes.length; i += 2) groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16));
  return groups.join(':');
}
