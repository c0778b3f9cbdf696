/**
 * The debug log: every event of every command that has an install directory, whatever
 * `--log-level` shows on the terminal, appended to `<dir>/logs/provisioner.log` as one
 * JSON object per line (time, pid, the event), with the command that ran and how it
 * failed. It is capped and rotated like the process logs beside it (RotatingLogFile:
 * 20 MiB, one `.1`), and `gather bootstrap` bundles it through the same redaction.
 *
 * Written only into an install directory that exists: a diagnostic must not create the
 * directory a command is about to refuse or create itself.
 */
import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { ProvisionerEvent } from '../../events.js';
import { RotatingLogFile } from '../../process/log-file.js';
import { describeError, type Renderer } from './index.js';

/** File name of the debug log inside `<dir>/logs/`, where the local control plane's process logs are. */
const debugLogFileName = 'provisioner.log';

export function debugLogPath(dir: string): string {
  return path.join(path.resolve(dir), 'logs', debugLogFileName);
}

export class DebugLog {
  private broken = false;

  private constructor(
    private readonly file: RotatingLogFile,
    private readonly now: () => Date,
  ) {}

  /**
   * Opens the debug log of `dir` for appending and records the command starting. Undefined
   * when `dir` is not an existing directory (the command reports that itself) or the log
   * cannot be opened: the command runs all the same.
   */
  static open(dir: string, command: string, now: () => Date = () => new Date()): DebugLog | undefined {
    try {
      if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return undefined;
      const logFile = debugLogPath(dir);
      // 0700 as the local control plane makes it (src/controlplane): whoever creates logs/ first decides its mode.
      mkdirSync(path.dirname(logFile), { recursive: true, mode: 0o700 });
      const file = new RotatingLogFile(logFile);
      file.open();
      const log = new DebugLog(file, now);
      log.emit({ type: 'log', level: 'debug', message: `provisioner ${command} started`, fields: { cwd: process.cwd() } });
      return log;
    } catch {
      return undefined;
    }
  }

  emit(event: ProvisionerEvent): void {
    // A result that carries a credential is for the user's terminal only.
    this.write(event.type === 'result' && event.secret ? { type: 'result', kind: event.kind, secret: true, text: '(withheld: it carries a credential)' } : event);
  }

  /** Records how the command failed: the error as the terminal shows it, and its stack. */
  failed(error: unknown): void {
    this.write({ ...describeError(error), ...(error instanceof Error && error.stack ? { stack: error.stack } : {}) });
  }

  close(): void {
    this.file.close();
  }

  private write(record: object): void {
    if (this.broken) return;
    try {
      this.file.write(`${JSON.stringify({ time: this.now().toISOString(), pid: process.pid, ...record })}\n`);
    } catch {
      // A full disk or a removed directory: the debug log stops, the command goes on.
      this.broken = true;
    }
  }
}

/** The debug log of the command about to run: in its `--dir`, if it has one. */
export function openDebugLog(options: unknown, command: Command): DebugLog | undefined {
  const dir = (options as { dir?: unknown } | undefined)?.dir;
  if (typeof dir !== 'string') return undefined;
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return DebugLog.open(dir, names.join(' '));
}

/** The renderer, with every event also written to the debug log (when there is one). */
export function withDebugLog(renderer: Renderer, log: DebugLog | undefined): Renderer {
  if (!log) return renderer;
  return {
    emit(event) {
      log.emit(event);
      renderer.emit(event);
    },
    renderError: (error) => renderer.renderError(error),
    async close() {
      try {
        await renderer.close();
      } finally {
        log.close();
      }
    },
  };
}
