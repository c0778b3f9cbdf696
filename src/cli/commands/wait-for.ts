import type { Command } from 'commander';
import { dirOption, noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';

export function registerWaitFor(program: Command, run: Runner): void {
  const waitFor = program.command('wait-for').description('wait for a stage of an install');
  waitFor
    .command('install-complete')
    .description("wait until the cluster is healthy (control plane available, every node Ready in the workload cluster's own API), asking the management cluster the install records, then write auth/kubeconfig")
    .addOption(dirOption())
    .addOption(noProgressTimeoutOption())
    .action(
      run<{ dir: string; noProgressTimeout?: number }>(async (options, ctx) => {
        const { waitForInstallComplete } = await import('../../services/wait-for.js');
        const result = await waitForInstallComplete({
          dir: options.dir,
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        ctx.sink.emit({ type: 'result', kind: 'kubeconfig', text: result.kubeconfig, data: result });
      }),
    );
}
