import { Option, type Command } from 'commander';
import type { Runner } from '../program.js';
import { showVersion } from '../../services/version.js';

interface VersionCommandOptions {
  verify: boolean;
}

export function registerVersion(program: Command, run: Runner): void {
  program
    .command('version')
    .description(
      'print the CLI version and every bundled component with its version and digest\n' +
        'Exits 0 when the CLI and its bundle are usable; when the bundle is missing or broken it\n' +
        'still prints the CLI version, then exits 4 (environment) with how to build the bundle.',
    )
    .addOption(
      // Default: off, because it reads every cached binary (hundreds of MB).
      new Option('--verify', 're-hash every cached binary against the bundle manifest (default: off; PROVISIONER_VERIFY set to anything turns it on)')
        .env('PROVISIONER_VERIFY')
        .default(false),
    )
    .action(
      run<VersionCommandOptions>(async (options, ctx) => {
        await showVersion({ verify: options.verify }, ctx.sink);
      }),
    );
}
