import { Option, type Command } from 'commander';
import { dirOption, noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';

export function registerDestroy(program: Command, run: Runner): void {
  const destroy = program.command('destroy').description('delete the cluster, or only what exists for bootstrapping');

  destroy
    .command('cluster')
    .description('delete the cluster and every Cluster API object of it, then stop the local control plane and remove local state (works after a failed or interrupted create)')
    .addHelpText(
      'after',
      '\nA cluster that manages itself (created with --pivot-to self) cannot delete itself from\n' +
        'inside: destroy cluster first starts a temporary local control plane (as create cluster\n' +
        'runs it, where the hosts reach it), moves the cluster back into it with the journaled\n' +
        'move of `provisioner pivot` (the hosts\' agents follow back), then deletes it there and\n' +
        'resets its hosts, and removes the temporary control plane. Killed at any point, run it\n' +
        'again: it resumes the move from its pivot journal. While such a cluster manages another\n' +
        'install\'s cluster (created with --management-kubeconfig its kubeconfig), it is refused\n' +
        '(exit 4), naming that Cluster: destroy that one first, from its own install directory.\n' +
        '\nExamples:\n  provisioner destroy cluster --dir ./demo\n  provisioner destroy cluster --dir ./demo --no-progress-timeout 20',
    )
    .addOption(dirOption())
    .addOption(noProgressTimeoutOption())
    .action(
      run<{ dir: string; noProgressTimeout?: number }>(async (options, ctx) => {
        const { destroyCluster } = await import('../../services/destroy.js');
        const result = await destroyCluster({
          dir: options.dir,
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        ctx.sink.emit({
          type: 'result',
          kind: 'destroyed',
          text: result.deleted.length ? `destroyed ${result.deleted.join(', ')}` : 'nothing to destroy',
          data: result,
        });
      }),
    );

  destroy
    .command('bootstrap')
    .description('stop and remove the local control plane and its data; refuses while it still manages a cluster')
    .addOption(dirOption())
    .addOption(new Option('--force', 'remove it even though it manages a cluster (the cluster loses its management)').env('PROVISIONER_FORCE').default(false))
    .action(
      run<{ dir: string; force: boolean }>(async (options, ctx) => {
        const { destroyBootstrap } = await import('../../services/destroy.js');
        const result = await destroyBootstrap({ dir: options.dir, sink: ctx.sink, signal: ctx.signal, force: options.force });
        ctx.sink.emit({ type: 'result', kind: 'destroyed', text: result.removed ? 'removed the local control plane' : 'nothing to remove', data: result });
      }),
    );
}
