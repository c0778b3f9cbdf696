import { Command } from 'commander';
import type { LogLevel } from '../events.js';
import type { CommandContext, OutputMode } from './context.js';
import { logLevelOption, outputOption } from './options.js';
import { createRenderer, type Renderer } from './ui/index.js';
import { openDebugLog, withDebugLog } from './ui/debug-log.js';
import { registerCommands } from './commands/index.js';
import { sinkWithFlagNames, withFlagNames } from './request-fields.js';
import { cliVersion } from '../version.js';

/** Runs one command handler with a renderer chosen from the global options. */
export type Runner = <O>(handler: (options: O, ctx: CommandContext) => Promise<void>) => (options: O, command: Command) => Promise<void>;

export interface ProgramIo {
  stdout: NodeJS.WriteStream | { write(chunk: string): unknown; isTTY?: boolean };
  stderr: NodeJS.WriteStream | { write(chunk: string): unknown; isTTY?: boolean };
  signal: AbortSignal;
  /** Receives the renderer in use, so main.ts can print a failure with it. */
  onRenderer(renderer: Renderer): void;
}

export function buildProgram(io: ProgramIo): Command {
  const program = new Command('provisioner')
    // One line per paragraph: commander wraps each line to the terminal and keeps the line
    // breaks written here, so a break inside a sentence would show up mid-line.
    .description(
      'Create Kubernetes clusters through Cluster API with no management cluster and no container runtime.\n\n' +
        'provisioner boots real etcd, kube-apiserver and CAPI controllers on loopback, applies the ' +
        'manifests generated from install-config.yaml, waits for the cluster, then pivots or tears down.',
    )
    .version(cliVersion, '-v, --version', 'print the CLI version (see `provisioner version` for components)')
    .addOption(outputOption())
    .addOption(logLevelOption())
    .showHelpAfterError('(run with --help for usage)')
    .configureHelp({ sortSubcommands: false, showGlobalOptions: true })
    // Before any subcommand is added: commander copies these settings into a subcommand when
    // it is created, so a usage error in `destroy cluster --bogus` throws to main.ts (exit 2)
    // instead of exiting 1 from inside commander.
    .exitOverride();

  const run: Runner = (handler) => async (options, command) => {
    const globals = command.optsWithGlobals() as { output: OutputMode; logLevel: LogLevel };
    // Every event also goes to the debug log of the command's install directory, whatever the log level shows.
    const debugLog = openDebugLog(options, command);
    const renderer = withDebugLog(await createRenderer({ output: globals.output, logLevel: globals.logLevel, stdout: io.stdout, stderr: io.stderr }), debugLog);
    io.onRenderer(renderer);
    try {
      await handler(options, { sink: sinkWithFlagNames(renderer), signal: io.signal, output: globals.output });
    } catch (error) {
      // Services name request fields; the user reads the flags they typed.
      withFlagNames(error);
      debugLog?.failed(error);
      throw error;
    } finally {
      await renderer.close();
    }
  };

  registerCommands(program, run);
  return program;
}
