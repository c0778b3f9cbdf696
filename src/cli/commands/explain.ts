import { Option, type Command } from 'commander';
import type { Runner } from '../program.js';

interface ExplainFlags {
  recursive: boolean;
}

export function registerExplain(program: Command, run: Runner): void {
  program
    .command('explain')
    .description('document install-config.yaml or one of its fields, e.g. `provisioner explain install-config.machinePools.roles`')
    .argument('<field>', 'install-config, or install-config.<field>[.<field>...]')
    /** `--recursive`: default false; list nested fields too. */
    .addOption(new Option('--recursive', 'list every nested field').env('PROVISIONER_RECURSIVE').default(false))
    .action((field: string, options: ExplainFlags, command: Command) =>
      run<ExplainFlags>(async (flags, ctx) => {
        const { explain } = await import('../../services/explain.js');
        explain({ target: field, recursive: flags.recursive, sink: ctx.sink });
      })(options, command),
    );
}
