import type { Command } from 'commander';
import type { Runner } from '../program.js';
import { cliVersion } from '../../version.js';

export function registerVersion(program: Command, run: Runner): void {
  program
    .command('version')
    .description('print the CLI version and every bundled component with its version and digest')
    .action(
      run<Record<string, never>>(async (_options, ctx) => {
        ctx.sink.emit({ type: 'result', kind: 'version', text: `provisioner ${cliVersion}`, data: { cli: cliVersion } });
      }),
    );
}
