/**
 * Entry point. The one place that maps errors to exit codes and calls process.exit,
 * and the one place that owns signals: the first SIGINT/SIGTERM aborts the running
 * service (which stops its children in order and leaves state resumable), a second
 * one exits at once.
 */
import { CommanderError } from 'commander';
import { ExitCode, InterruptedError, ProvisionerError, exitCodeOf } from './errors.js';
import { buildProgram } from './cli/program.js';
import { createRenderer, type Renderer } from './cli/ui/index.js';

function interrupted(signal: NodeJS.Signals): InterruptedError {
  return new InterruptedError(`Interrupted by ${signal}`, {
    hint: 'Run the same command again to resume; `provisioner gather bootstrap` collects the logs.',
  });
}

async function main(argv: string[]): Promise<number> {
  const abort = new AbortController();
  let signals = 0;
  const onSignal = (name: NodeJS.Signals) => {
    signals += 1;
    if (signals === 1) {
      process.stderr.write(`\n${name} received: stopping cleanly (press Ctrl-C again to exit at once)\n`);
      abort.abort(interrupted(name));
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
  try {
    await program.parseAsync(argv);
    return abort.signal.aborted ? ExitCode.interrupted : ExitCode.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version exit through here with code 0; usage errors were already printed.
      return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    }
    // Whatever an interrupted operation threw (an aborted request, a closed stream), the
    // run was interrupted: say so, with the way back, unless a typed failure came first.
    const failure =
      abort.signal.aborted && !(error instanceof ProvisionerError && error.exitCode !== 'internal') ? (abort.signal.reason as InterruptedError) : error;
    const r = renderer ?? (await createRenderer({ output: 'text', logLevel: 'info', stdout: process.stdout, stderr: process.stderr }));
    r.renderError(failure instanceof Error ? failure : new Error(String(failure)));
    return exitCodeOf(failure);
  }
}

const code = await main(process.argv);
process.exitCode = code;
// Everything we own is closed by now; a handle some library left open (an idle socket)
// must not keep a finished command alive. Unref'd: it never delays a clean exit.
setTimeout(() => process.exit(code), 2_000).unref();
