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

/**
 * Picks the renderer: JSON lines with `--output json`; a live ink view on stderr when
 * it is a terminal (see `wantsLiveView`); plain lines otherwise. Ink and react are
 * imported only for the live view: loading them costs most of a second.
 */
export async function createRenderer(options: RendererOptions, env: NodeJS.ProcessEnv = process.env): Promise<Renderer> {
  if (options.output === 'json') {
    const json = new JsonRenderer(options.stdout, options.logLevel);
    return {
      emit: (e: ProvisionerEvent) => json.emit(e),
      renderError: (error) => options.stdout.write(JSON.stringify({ time: new Date().toISOString(), ...describeError(error) }) + '\n'),
      close: async () => {},
    };
  }
  if (wantsLiveView(options, env)) {
    // isTTY is only ever true on a tty.WriteStream, which is what ink draws on.
    const terminal = options.stderr as NodeJS.WriteStream;
    const { InkRenderer, terminalMount } = await import('./ink/renderer.js');
    const ink = new InkRenderer({
      stdout: options.stdout,
      stderr: options.stderr,
      logLevel: options.logLevel,
      mount: terminalMount(terminal),
      rows: () => terminal.rows || 24,
    });
    return {
      emit: (e: ProvisionerEvent) => ink.emit(e),
      renderError: (error) => {
        ink.stop();
        options.stderr.write(formatError(error));
      },
      close: () => ink.close(),
    };
  }
  const plain = new PlainRenderer(options.stdout, options.stderr, options.logLevel);
  return {
    emit: (e: ProvisionerEvent) => plain.emit(e),
    renderError: (error) => options.stderr.write(formatError(error)),
    close: async () => {},
  };
}

/**
 * The live view needs a terminal that can redraw: text output, stderr a TTY, TERM not
 * `dumb`, and not CI. CI is judged as ink judges it (CI or CONTINUOUS_INTEGRATION set
 * and not `0`/`false`), since ink there would only draw the last frame.
 */
export function wantsLiveView(options: Pick<RendererOptions, 'output' | 'stderr'>, env: NodeJS.ProcessEnv): boolean {
  const set = (key: string) => env[key] !== undefined && env[key] !== '0' && env[key] !== 'false';
  return options.output === 'text' && options.stderr.isTTY === true && env.TERM !== 'dumb' && !set('CI') && !set('CONTINUOUS_INTEGRATION');
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
function formatError(error: unknown): string {
  const d = describeError(error);
  const lines = [`Error: ${d.message}`];
  for (const detail of d.details) lines.push(`  - ${detail}`);
  if (d.hint) lines.push(`Next step: ${d.hint}`);
  return lines.join('\n') + '\n';
}
