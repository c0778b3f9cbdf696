import { Option, type Command } from 'commander';
import { dirOption, noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';

/**
 * `provisioner register <product>`: hands a cluster this install created to a product
 * that manages clusters. One subcommand per product, each declared by its own function
 * below (their services are imported inside their actions).
 */
export function registerRegister(program: Command, run: Runner): void {
  const register = program
    .command('register')
    .description('hand the cluster of an install directory to a product that manages clusters (Rancher, Fleet)')
    .addHelpText('after', '\nExamples:\n  provisioner register rancher --dir ./demo --kubeconfig ~/rancher.kubeconfig');
  registerRancherCommand(register, run);
}

/** `--strategy`: which Rancher object represents the cluster. Default `v3`: ADR 0008's management.cattle.io/v3 Cluster, found again by its owner labels. */
export function rancherStrategyOption(flag = '--strategy'): Option {
  return new Option(`${flag} <strategy>`, 'Rancher object for the cluster: v3 (management.cattle.io/v3 Cluster named c-xxxxx, found by its owner labels) or v1 (provisioning.cattle.io/v1 Cluster)')
    .choices(['v1', 'v3'])
    .env('PROVISIONER_RANCHER_STRATEGY')
    .default('v3');
}

interface RegisterRancherFlags {
  dir: string;
  kubeconfig: string;
  strategy: 'v1' | 'v3';
  noProgressTimeout?: number;
}

function registerRancherCommand(register: Command, run: Runner): void {
  register
    .command('rancher')
    .description(
      "import the install's cluster into Rancher the way Rancher Turtles does: when Rancher's cluster runs Turtles and manages the Cluster API Cluster, label it for auto-import; " +
        "otherwise create Rancher's cluster (labelled with the Cluster API cluster's name and namespace), fetch its registration manifest (verifying Rancher's CA), " +
        "create its objects in the workload cluster and wait until Rancher reports the cluster Ready. Running it again resumes; `destroy cluster` removes Rancher's cluster first.",
    )
    .addOption(dirOption())
    .addOption(new Option('--kubeconfig <file>', "kubeconfig of Rancher's own (local) cluster, where its management.cattle.io objects live (required)").env('PROVISIONER_RANCHER_KUBECONFIG').makeOptionMandatory())
    .addOption(rancherStrategyOption())
    .addOption(noProgressTimeoutOption())
    .addHelpText(
      'after',
      '\nExamples:\n  provisioner register rancher --dir ./demo --kubeconfig ~/rancher.kubeconfig\n' +
        '  provisioner register rancher --dir ./demo --kubeconfig ~/rancher.kubeconfig --strategy v1',
    )
    .action(
      run<RegisterRancherFlags>(async (options, ctx) => {
        const { registerRancher } = await import('../../services/rancher.js');
        const result = await registerRancher({
          dir: options.dir,
          rancherKubeconfig: options.kubeconfig,
          strategy: options.strategy,
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        ctx.sink.emit({ type: 'result', kind: 'rancher-cluster', text: result.summary, data: result });
      }),
    );
}
