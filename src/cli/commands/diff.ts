import type { Command } from 'commander';
import type { Runner } from '../program.js';
import { dirOption } from '../options.js';

interface DiffFlags {
  dir: string;
}

export function registerDiff(program: Command, run: Runner): void {
  program
    .command('diff')
    .description('show how the manifests on disk differ from what install-config.yaml generates now, object by object')
    .addOption(dirOption())
    .action(
      run<DiffFlags>(async (flags, ctx) => {
        // Live comparison needs a connection to a running control plane; none is wired in yet, and the report says so.
        const { diffManifests } = await import('../../services/diff.js');
        await diffManifests({ dir: flags.dir, sink: ctx.sink, signal: ctx.signal });
      }),
    );
}
