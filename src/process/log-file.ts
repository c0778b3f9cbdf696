/**
 * One log file per process: stdout and stderr appended to `<logDir>/<name>.log`, capped in
 * size by rotating once to `<name>.log.1` (the previous `.1` is replaced), so a chatty
 * process keeps at most twice the cap on disk.
 */
import { closeSync, openSync, renameSync, statSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';

/** Default size cap of a process log: 20 MiB. */
export const defaultLogMaxBytes = 20 * 1024 * 1024;
/** Default number of lines in a log tail (error messages, process events). */
const defaultTailLines = 20;

/** The rotated file of `path`. */
export function rotatedPath(path: string): string {
  return `${path}.1`;
}

/** Renames `path` to `path.1` when it is larger than `maxBytes`; returns whether it did. */
export function rotateIfOver(path: string, maxBytes: number): boolean {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return false;
  }
  if (size <= maxBytes) return false;
  renameSync(path, rotatedPath(path));
  return true;
}

/**
 * An appending writer with the size cap. Writes are synchronous so the file is complete the
 * moment a child's exit is handled (its tail goes into errors and events) and ordering across
 * stdout and stderr is kept. The file never passes the cap: a write that does not fit fills
 * the file up to its last whole line that fits, the file rotates, and the rest goes on in
 * the fresh file (a line longer than the cap is split).
 */
export class RotatingLogFile {
  private fd: number | undefined;
  private size = 0;

  constructor(
    readonly path: string,
    /** Default 20 MiB (`defaultLogMaxBytes`). */
    readonly maxBytes: number = defaultLogMaxBytes,
  ) {
    if (!(maxBytes >= 1)) throw new RangeError(`log size cap must be at least 1 byte, got ${maxBytes}`);
  }

  /** Opens for append (rotating first if the existing file is over the cap). Idempotent. */
  open(): void {
    if (this.fd !== undefined) return;
    rotateIfOver(this.path, this.maxBytes);
    this.fd = openSync(this.path, 'a', 0o644);
    this.size = statSync(this.path).size;
  }

  write(chunk: string | Uint8Array): void {
    if (this.fd === undefined) return;
    let bytes = Buffer.from(chunk);
    while (bytes.length > 0) {
      const room = this.maxBytes - this.size;
      if (bytes.length <= room) {
        this.append(bytes);
        return;
      }
      // Fill the file up to a line end that fits (any byte if the file is empty and no line fits), then rotate.
      let cut = room > 0 ? bytes.lastIndexOf(0x0a, room - 1) + 1 : 0;
      if (cut === 0 && this.size === 0) cut = room;
      if (cut > 0) {
        this.append(bytes.subarray(0, cut));
        bytes = bytes.subarray(cut);
      }
      this.rotate();
    }
  }

  private append(bytes: Uint8Array): void {
    if (this.fd === undefined) return;
    writeSync(this.fd, bytes);
    this.size += bytes.length;
  }

  private rotate(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    renameSync(this.path, rotatedPath(this.path));
    this.fd = openSync(this.path, 'a', 0o644);
    this.size = 0;
  }

  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Bytes read from the end of a file when looking for its last lines. */
const tailWindowBytes = 64 * 1024;

/**
 * The last `lines` lines (default 20) of `path`, continuing into `path.1` when the current
 * file holds fewer. Missing files give no lines. Reads at most 64 KiB of each file.
 */
export async function readLogTail(path: string, lines: number = defaultTailLines): Promise<string[]> {
  const current = await tailOf(path);
  if (current.length >= lines) return current.slice(-lines);
  const older = await tailOf(rotatedPath(path));
  return [...older, ...current].slice(-lines);
}

async function tailOf(path: string): Promise<string[]> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch {
    return [];
  }
  try {
    const { size } = await handle.stat();
    const length = Math.min(size, tailWindowBytes);
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    const lines = buffer.toString('utf8').split('\n');
    if (size > length) lines.shift(); // a partial first line
    if (lines.at(-1) === '') lines.pop();
    return lines;
  } finally {
    await handle.close();
  }
}
