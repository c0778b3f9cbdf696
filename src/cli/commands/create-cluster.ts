import { Option, type Command } from 'commander';
import { dirOption, listenAddressOption, noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';
import { formatDuration } from '../ui/plain.js';
import { rancherStrategyOption } from './register.js';
import { recordRelativePath } from '../../installdir/paths.js';

interface CreateClusterFlags {
  dir: string;
  managementKubeconfig?: string;
  pivotTo?: string;
  registerRancher?: string;
  rancherStrategy: 'v1' | 'v3';
  dryRun: boolean;
  noProgressTimeout?: number;
  listenAddress?: string;
}

export function registerCreateCluster(create: Command, run: Runner): void {
  create
    .command('cluster')
    .description('boot the local control plane, apply the manifests in stages with hooks, wait until the cluster is healthy, hand off')
    .addOption(dirOption())
    .addOption(
      new Option('--management-kubeconfig <path>', 'run against this existing management cluster (any conformant Kubernetes with the providers installed) instead of a local control plane')
        .env('PROVISIONER_MANAGEMENT_KUBECONFIG'),
    )
    // Default: none; the cluster stays with the control plane that created it.
    .addOption(
      new Option(
        '--pivot-to <kubeconfig|self>',
        'once the cluster is healthy, move its Cluster API objects into this lasting management cluster (e.g. one from `provisioner management start`) and stop the local control plane; ' +
          'self: install the providers into the new cluster and move them there, so it manages itself (as `provisioner pivot --to self`)',
      )
        .env('PROVISIONER_PIVOT_TO')
        .conflicts('managementKubeconfig'),
    )
    // Default: none; the cluster is not handed to Rancher.
    .addOption(
      new Option('--register-rancher <kubeconfig>', "once the cluster is handed off (and pivoted), register it with the Rancher whose local cluster this kubeconfig reaches, as `provisioner register rancher` does")
        .env('PROVISIONER_REGISTER_RANCHER'),
    )
    .addOption(rancherStrategyOption('--rancher-strategy'))
    .addOption(new Option('--dry-run', 'validate every manifest against the real CRDs and webhooks and stop; apply nothing').env('PROVISIONER_DRY_RUN').default(false))
    .addOption(noProgressTimeoutOption())
    .addOption(listenAddressOption())
    .addHelpText(
      'after',
      `\nRun it again after an interrupt or a failure: it resumes from ${recordRelativePath('journal')}.\n` +
        'Outputs: auth/kubeconfig (the new cluster, 0600), auth/management.kubeconfig (its local manager),\n' +
        `${recordRelativePath('clusterState')} (final state of every Cluster API object), logs/ (one log per process).\n` +
        '\nExamples:\n  provisioner create install-config --dir ./demo --name demo\n  provisioner create cluster --dir ./demo\n  kubectl --kubeconfig ./demo/auth/kubeconfig get nodes\n' +
        '\n  # create, then hand the cluster to a lasting management cluster:\n  provisioner management start --dir ./mgmt\n  provisioner create cluster --dir ./demo --pivot-to ./mgmt/auth/management.kubeconfig\n' +
        '\n  # create a cluster that manages itself (its providers run as pods in it; nothing keeps running here):\n  provisioner create cluster --dir ./demo --pivot-to self',
    )
    .action(
      run<CreateClusterFlags>(async (options, ctx) => {
        const { createCluster } = await import('../../services/create-cluster.js');
        const result = await createCluster({
          dir: options.dir,
          sink: ctx.sink,
          signal: ctx.signal,
          dryRun: options.dryRun,
          ...(options.managementKubeconfig ? { managementKubeconfig: options.managementKubeconfig } : {}),
          ...(options.pivotTo ? { pivotTo: options.pivotTo } : {}),
          ...(options.registerRancher ? { registerRancher: { kubeconfig: options.registerRancher, strategy: options.rancherStrategy } } : {}),
          ...(options.listenAddress ? { listenAddress: options.listenAddress } : {}),
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        if (options.dryRun) return;
        const summary = result.stages.map((s) => `  ${s.name.padEnd(22)} ${formatDuration(s.durationMs)}`).join('\n');
        ctx.sink.emit({ type: 'log', level: 'info', message: `Stages:\n${summary}` });
        ctx.sink.emit({
          type: 'result',
          kind: 'cluster',
          text: result.kubeconfig,
          data: result,
        });
        if (result.pivotedTo) {
          ctx.sink.emit({ type: 'log', level: 'info', message: `The cluster is managed by the cluster of ${result.pivotedTo} now; the local control plane is stopped (\`provisioner destroy bootstrap\` removes its data).` });
        } else if (result.controlPlaneRunning) {
          ctx.sink.emit({
            type: 'log',
            level: 'info',
            message: `The cluster is managed by the local control plane, which keeps running (kubeconfig ${result.managementKubeconfig}); \`provisioner destroy cluster\` removes both.`,
          });
        }
      }),
    );
}
