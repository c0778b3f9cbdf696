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
    .addHelpText('after', '\nExamples:\n  provisioner register rancher --dir ./demo --kubeconfig ~/rancher.kubeconfig\n  provisioner register fleet --dir ./demo --kubeconfig ~/fleet.kubeconfig');
  registerRancherCommand(register, run);
  registerFleetCommand(register, run);
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

interface RegisterFleetFlags {
  dir: string;
  kubeconfig: string;
  namespace: string;
  mode: 'manager' | 'agent';
  apiServerUrl?: string;
  noProgressTimeout?: number;
}

function registerFleetCommand(register: Command, run: Runner): void {
  register
    .command('fleet')
    .description(
      "register the install's cluster with a Fleet manager and wait until Fleet's agent has checked in. " +
        "--mode manager: a Fleet Cluster whose Secret holds auth/kubeconfig, so Fleet's controller reaches the cluster and deploys its agent; " +
        "--mode agent, for a cluster the manager cannot reach: a ClusterRegistrationToken, and on the cluster the fleet-agent-bootstrap Secret (the token, the manager's API server URL and CA) that Fleet's agent there registers with. " +
        'Objects are labelled with the install\'s cluster and found by those labels; running it again resumes; `destroy cluster` removes them.',
    )
    .addOption(dirOption())
    .addOption(new Option('--kubeconfig <file>', "kubeconfig of the Fleet manager (the cluster fleet-controller runs in) (required)").env('PROVISIONER_FLEET_KUBECONFIG').makeOptionMandatory())
    .addOption(new Option('--namespace <name>', "namespace of the Fleet Cluster on the manager (Fleet's namespace for downstream clusters)").env('PROVISIONER_FLEET_NAMESPACE').default('fleet-default'))
    .addOption(
      new Option('--mode <mode>', 'manager (Fleet reaches the cluster with its kubeconfig) or agent (the cluster\'s agent registers with a token; for a cluster the manager cannot reach)')
        .choices(['manager', 'agent'])
        .env('PROVISIONER_FLEET_MODE')
        .default('manager'),
    )
    .addOption(
      new Option('--api-server-url <url>', "--mode agent: the manager's API server URL as the agent reaches it, when Fleet's own configuration has none (default: the server of --kubeconfig)").env(
        'PROVISIONER_FLEET_API_SERVER_URL',
      ),
    )
    .addOption(noProgressTimeoutOption())
    .addHelpText(
      'after',
      '\nExamples:\n  provisioner register fleet --dir ./demo --kubeconfig ~/fleet.kubeconfig\n' +
        '  provisioner register fleet --dir ./demo --kubeconfig ~/fleet.kubeconfig --mode agent --api-server-url https://fleet.example.com:6443',
    )
    .action(
      run<RegisterFleetFlags>(async (options, ctx) => {
        const { registerFleet } = await import('../../services/fleet.js');
        const result = await registerFleet({
          dir: options.dir,
          fleetKubeconfig: options.kubeconfig,
          namespace: options.namespace,
          mode: options.mode,
          ...(options.apiServerUrl ? { apiServerUrl: options.apiServerUrl } : {}),
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        ctx.sink.emit({ type: 'result', kind: 'fleet-cluster', text: result.summary, data: result });
      }),
    );
}
