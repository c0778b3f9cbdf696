import { Option, type Command } from 'commander';
import { dirOption } from '../options.js';
import type { Runner } from '../program.js';
import { UsageError } from '../../errors.js';
import { recordRelativePath } from '../../installdir/paths.js';

interface PivotOptions {
  dir: string;
  toKubeconfig?: string;
  to?: string;
  dryRun: boolean;
  rollback: boolean;
  cluster?: string;
  concurrency: string;
}

export function registerPivot(program: Command, run: Runner): void {
  program
    .command('pivot')
    .description(
      'move the Cluster API objects of the install from its local control plane into a lasting management cluster: ' +
        `preflight, pause, copy (owners first), verify, delete from the source, unpause. Journaled in ${recordRelativePath('pivot')}: ` +
        'running it again resumes an unfinished move; --rollback undoes one that has not deleted from the source yet.',
    )
    .addOption(dirOption())
    .addOption(new Option('--to-kubeconfig <file>', 'kubeconfig of the target management cluster (this or --to self)').env('PROVISIONER_TO_KUBECONFIG'))
    .addOption(new Option('--to <target>', 'self: the cluster manages itself (management install into it, then the move into it; the local control plane stops and its data is removed)').env('PROVISIONER_TO').choices(['self']))
    // Default false: the move runs.
    .addOption(new Option('--dry-run', 'print the plan (objects by kind, in order) and change nothing').env('PROVISIONER_DRY_RUN').default(false))
    // Default false.
    .addOption(new Option('--rollback', 'undo an unfinished move: delete the partial copies in the target and unpause the source').env('PROVISIONER_ROLLBACK').default(false))
    // Default: every Cluster of the local control plane.
    .addOption(new Option('--cluster <name>', 'move only this Cluster and its objects (default: every Cluster)').env('PROVISIONER_CLUSTER'))
    // Default 32: pivot/move.ts defaultConcurrency (the services load lazily, so the figure is repeated here).
    .addOption(new Option('--concurrency <n>', 'requests in flight at once against either cluster (creates, patches, deletes, lists)').env('PROVISIONER_CONCURRENCY').default('32'))
    .addHelpText(
      'after',
      '\nExamples:\n  provisioner pivot --dir ./demo --to-kubeconfig ~/mgmt.kubeconfig --dry-run\n' +
        '  provisioner pivot --dir ./demo --to-kubeconfig ~/mgmt.kubeconfig\n' +
        '  provisioner pivot --dir ./demo --to-kubeconfig ~/mgmt.kubeconfig --rollback   # after a failed move\n' +
        '  provisioner pivot --dir ./demo --to self   # the cluster of ./demo becomes its own management cluster\n' +
        '\n--to self installs the bundled providers into the cluster (`management install --kubeconfig\n' +
        'D/auth/kubeconfig --dir D`), then moves the objects there; the hosts\' agents follow to the\n' +
        'in-cluster agent manager through the cluster\'s own API endpoint, and the local control plane\n' +
        'stops and its data is removed. Hosts registered afterwards download their node files from the\n' +
        'cluster itself (the node-artifacts Service, through its API server). Run it again to resume.\n' +
        '`destroy cluster --dir D` of a self-managed cluster first moves it back into a temporary local\n' +
        'control plane, then deletes it there and resets its hosts.',
    )
    .action(
      run<PivotOptions>(async (options, ctx) => {
        const concurrency = Number(options.concurrency);
        if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency must be a positive integer, not ${options.concurrency}`, { hint: 'For example --concurrency 16.' });
        if (options.dryRun && options.rollback) throw new UsageError('--dry-run and --rollback cannot be combined', { hint: 'Run --dry-run to see the plan, or --rollback to undo a move.' });
        if ((options.toKubeconfig === undefined) === (options.to === undefined)) {
          throw new UsageError('Name the target: --to-kubeconfig K, or --to self', { hint: 'provisioner pivot --dir ./demo --to-kubeconfig ~/mgmt.kubeconfig, or --to self for the cluster to manage itself.' });
        }
        const { pivot, pivotToSelf } = await import('../../services/pivot.js');
        const result = await (options.to === 'self' ? pivotToSelf : pivot)({
          dir: options.dir,
          toKubeconfig: options.toKubeconfig ?? '',
          dryRun: options.dryRun,
          rollback: options.rollback,
          ...(options.cluster !== undefined ? { clusterName: options.cluster } : {}),
          concurrency,
          sink: ctx.sink,
          signal: ctx.signal,
        });
        const kinds = result.kinds.map((k) => `${k.count} ${k.kind}`).join(', ');
        ctx.sink.emit({ type: 'result', kind: `pivot-${result.action}`, text: [...result.lines, ...(kinds ? [`objects: ${kinds}`] : [])].join('\n'), data: result });
      }),
    );
}
