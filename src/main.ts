/**
 * Entry point. The one place that maps errors to exit codes and calls process.exit,
 * and the one place that owns signals: the first SIGINT/SIGTERM aborts the running
 * service (which stops its children in order and leaves state resumable), a second
 * one exits at once.
 */
import { CommanderError } from 'commander';
import { ExitCode, UsageError, exitCodeOf } from './errors.js';
import { buildProgram } from './cli/program.js';
import { createRenderer, type Renderer } from './cli/ui/index.js';

async function main(argv: string[]): Promise<number> {
  const abort = new AbortController();
  let signals = 0;
  const onSignal = (name: NodeJS.Signals) => {
    signals += 1;
    if (signals === 1) {
      process.stderr.write(`\n${name} received: stopping cleanly (press Ctrl-C again to exit at once)\n`);
      abort.abort(new Error(`interrupted by ${name}`));
    } else {
      process.exit(ExitCode.interrupted);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let renderer: Renderer | undefined;
  const program = buildProgram({
    stdout: process.stdout,
    stderr: process.stderr,
    signal: abort.signal,
    onRenderer: (r) => (renderer = r),
  });
  program.exitOverride();
  try {
    await program.parseAsync(argv);
    return abort.signal.aborted ? ExitCode.interrupted : ExitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version exit through here with code 0; usage errors were already printed.
      return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    }
    const r = renderer ?? createRenderer({ output: 'text', logLevel: 'info', stdout: process.stdout, stderr: process.stderr });
    r.renderError(error instanceof Error || error instanceof UsageError ? error : new Error(String(error)));
    return exitCodeOf(error);
  }
}

process.exitCode = await main(process.argv);
