import { Option, type Command } from 'commander';
import { noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';
import { rancherStrategyOption } from './register.js';

interface ImportFlags {
  kubeconfig: string;
  to: 'rancher';
  strategy: 'v1' | 'v3';
  name?: string;
  noProgressTimeout?: number;
}

/** `provisioner import --kubeconfig K --to rancher R`: hand a cluster provisioner did not create to a product. */
export function registerImport(program: Command, run: Runner): void {
  program
    .command('import')
    .description(
      "hand a cluster provisioner did not create to Rancher as an imported cluster (no Cluster API objects): create Rancher's cluster, labelled with the cluster's kube-system UID, " +
        "fetch its registration manifest (verifying Rancher's CA), create its objects in the cluster and wait until Rancher reports it Ready. Running it again resumes.",
    )
    .argument('<product-kubeconfig>', "kubeconfig of the product's cluster (Rancher's local cluster)")
    .addOption(new Option('--kubeconfig <file>', 'kubeconfig of the cluster to import (required)').env('PROVISIONER_KUBECONFIG').makeOptionMandatory())
    .addOption(new Option('--to <product>', 'the product to hand the cluster to (required)').choices(['rancher']).env('PROVISIONER_TO').makeOptionMandatory())
    .addOption(rancherStrategyOption())
    // Default: the name of the kubeconfig's current cluster, as a DNS label.
    .addOption(new Option('--name <name>', "the name Rancher shows for the cluster (default: the kubeconfig's current cluster name)").env('PROVISIONER_NAME'))
    .addOption(noProgressTimeoutOption())
    .addHelpText('after', '\nExamples:\n  provisioner import --kubeconfig ~/edge.kubeconfig --to rancher ~/rancher.kubeconfig --name edge')
    .action((productKubeconfig: string, flags: ImportFlags, command: Command) =>
      run<ImportFlags>(async (options, ctx) => {
        const { importToRancher } = await import('../../services/rancher.js');
        const result = await importToRancher({
          kubeconfig: options.kubeconfig,
          rancherKubeconfig: productKubeconfig,
          strategy: options.strategy,
          ...(options.name ? { name: options.name } : {}),
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        ctx.sink.emit({ type: 'result', kind: 'rancher-cluster', text: result.summary, data: result });
      })(flags, command),
    );
}
