import type { EventSink, LogLevel, ProvisionerEvent } from '../../events.js';
import { ProvisionerError, exitCodeOf, messageOf } from '../../errors.js';
import type { OutputMode } from '../context.js';
import { JsonRenderer } from './json.js';
import { PlainRenderer, type Writer } from './plain.js';

export interface Renderer extends EventSink {
  /** Prints a failure the way the output mode wants it. */
  renderError(error: unknown): void;
  /** Flushes and releases the terminal (ink unmounts here). */
  close(): Promise<void>;
}

export interface RendererOptions {
  output: OutputMode;
  logLevel: LogLevel;
  stdout: Writer & { isTTY?: boolean };
  stderr: Writer & { isTTY?: boolean };
}

/** Picks the renderer: JSON lines with `--output json`, plain lines otherwise. */
export function createRenderer(options: RendererOptions): Renderer {
  if (options.output === 'json') {
    const json = new JsonRenderer(options.stdout, options.logLevel);
    return {
      emit: (e: ProvisionerEvent) => json.emit(e),
      renderError: (error) => options.stdout.write(JSON.stringify({ time: new Date().toISOString(), ...describeError(error) }) + '\n'),
      close: async () => {},
    };
  }
  const plain = new PlainRenderer(options.stdout, options.stderr, options.logLevel);
  return {
    emit: (e: ProvisionerEvent) => plain.emit(e),
    renderError: (error) => options.stderr.write(formatError(error)),
    close: async () => {},
  };
}

export interface ErrorDescription {
  type: 'error';
  errorClass: string;
  exitCode: number;
  message: string;
  details: readonly string[];
  hint?: string;
}

export function describeError(error: unknown): ErrorDescription {
  const base = { type: 'error' as const, exitCode: exitCodeOf(error), message: messageOf(error) };
  if (error instanceof ProvisionerError) {
    return { ...base, errorClass: error.exitCode, details: error.details, ...(error.hint ? { hint: error.hint } : {}) };
  }
  return {
    ...base,
    errorClass: 'internal',
    details: error instanceof Error && error.stack ? error.stack.split('\n').slice(1, 6).map((l) => l.trim()) : [],
    hint: 'This is a bug in provisioner. Run `provisioner gather bootstrap` and report it with the bundle.',
  };
}

/** Human form of an error: message, one line per detail, then the next step. */
export function formatError(error: unknown): string {
  const d = describeError(error);
  const lines = [`Error: ${d.message}`];
  for (const detail of d.details) lines.push(`  - ${detail}`);
  if (d.hint) lines.push(`Next step: ${d.hint}`);
  return lines.join('\n') + '\n';
}
