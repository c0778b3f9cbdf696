import { Option, type Command } from 'commander';
import { dirOption } from '../options.js';
import type { Runner } from '../program.js';

interface GatherBootstrapOptions {
  dir: string;
  outputFile?: string;
}

export function registerGather(program: Command, run: Runner): void {
  const gather = program.command('gather').description('collect what is needed to diagnose an install into one archive');

  gather
    .command('bootstrap')
    .description(
      'write a log bundle (tar.gz, 0600) of an install dir: every process log, the journal and pidfiles, and, when the local ' +
        'control plane runs or can be started, every Cluster API object with its conditions, Events and machine addresses. ' +
        'Private keys, tokens and Secret data are redacted, and the archive is checked for them before it is kept.',
    )
    .addOption(dirOption())
    .addOption(
      // Not `--output`: that global option picks the output format (text|json).
      // Default: <dir>/log-bundle-<UTC time>.tar.gz (chosen by the service, as the time is part of it).
      new Option('--output-file <file>', 'where to write the bundle; a directory gets the default name inside (default: <dir>/log-bundle-<UTC time>.tar.gz)')
        .env('PROVISIONER_OUTPUT_FILE'),
    )
    .addHelpText(
      'after',
      '\nExamples:\n  provisioner gather bootstrap --dir ./demo                  # prints the bundle path\n' +
        '  provisioner gather bootstrap --dir ./demo --output-file /tmp/demo-logs.tar.gz\n' +
        '  tar -tzf ./demo/log-bundle-*.tar.gz                         # README.txt inside explains the layout',
    )
    .action(
      run<GatherBootstrapOptions>(async (options, ctx) => {
        const { gatherBootstrap } = await import('../../services/gather.js');
        const result = await gatherBootstrap({
          dir: options.dir,
          ...(options.outputFile !== undefined ? { output: options.outputFile } : {}),
          sink: ctx.sink,
          signal: ctx.signal,
        });
        ctx.sink.emit({
          type: 'result',
          kind: 'log-bundle',
          text: result.path,
          data: {
            path: result.path,
            bytes: result.bytes,
            files: result.files,
            objects: result.objects,
            redactions: result.redactions,
            objectSource: result.objectSource,
            problems: result.problems,
          },
        });
      }),
    );
}
