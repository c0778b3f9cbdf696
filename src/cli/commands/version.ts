import { Option, type Command } from 'commander';
import type { Runner } from '../program.js';

interface VersionCommandOptions {
  verify: boolean;
}

export function registerVersion(program: Command, run: Runner): void {
  program
    .command('version')
    .description('print the CLI version and every bundled component with its version and digest')
    .addOption(
      // Default: off, because it reads every cached binary (hundreds of MB).
      new Option('--verify', 're-hash every extracted binary against the manifest, and check the archive of each one not extracted yet (the env variable turns it on when set to any value)')
        .env('PROVISIONER_VERIFY')
        .default(false),
    )
    .addHelpText(
      'after',
      '\nExit status: 0 when the CLI and its bundle are usable. When the bundle is missing or broken,\n' +
        'the CLI version is still printed, then the command exits 4 (environment) with how to build it.',
    )
    .action(
      run<VersionCommandOptions>(async (options, ctx) => {
        const { showVersion } = await import('../../services/version.js');
        await showVersion({ verify: options.verify }, ctx.sink);
      }),
    );
}
