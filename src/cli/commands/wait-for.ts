import type { Command } from 'commander';
import { dirOption } from '../options.js';
import type { Runner } from '../program.js';

export function registerWaitFor(program: Command, run: Runner): void {
  const waitFor = program.command('wait-for').description('wait for a stage of an install');
  waitFor
    .command('install-complete')
    .description('wait until the cluster is healthy (control plane available, every node Ready), then write auth/kubeconfig')
    .addOption(dirOption())
    .action(
      run<{ dir: string }>(async (options, ctx) => {
        const { waitForInstallComplete } = await import('../../services/wait-for.js');
        const result = await waitForInstallComplete({ dir: options.dir, sink: ctx.sink, signal: ctx.signal });
        ctx.sink.emit({ type: 'result', kind: 'kubeconfig', text: result.kubeconfig, data: result });
      }),
    );
}
