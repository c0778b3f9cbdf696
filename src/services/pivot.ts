/**
 * `provisioner pivot`: moves the Cluster API objects of an install from its local control
 * plane into a lasting management cluster, journaled in `<dir>/.provisioner/pivot.json`.
 *
 * - A journal with unfinished work is resumed from its phase (same target only).
 * - `--rollback` undoes an unfinished move that has not yet deleted from the source.
 * - `--dry-run` prints the plan (objects by kind, in creation order) and changes nothing.
 *
 * The source is the local control plane of the dir: adopted when running, else started
 * from its data with the platform's controllers (detached when the platform's machines live
 * in its controllers). After a move on such a platform the source is stopped once it holds
 * no Cluster; its data stays (`destroy bootstrap` removes it), except after `--to self`.
 */
import path from 'node:path';
import { exists } from '../files.js';
import { readInstallConfigOrProblem, type InstallConfigRead } from '../assets/index.js';
import type { InstallConfig } from '../config/index.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { UsageError, messageOf, requestField } from '../errors.js';
import { log } from '../events.js';
import { checkKubeconfigFile } from '../kube/kubeconfig-file.js';
import { recordExternalManagement, recordedExternalManagement } from '../installdir/management.js';
import { readPivotJournal } from '../pivot/journal.js';
import { installSelfManagement } from '../pivot/self.js';
import { pivotTargetKubeconfig, selfTarget } from '../pivot/target.js';
import { removeRecordedControlPlane } from '../controlplane/local-controlplane.js';
import { platformFor, platformOfDocument, type Platform } from '../platforms/index.js';
import { acquireDirLock } from '../process/lock.js';
import { attachManagement, type AttachedControlPlane } from '../management/attach.js';
import { openPivotJournal, pivotFrom, type PivotRequest, type PivotResult } from '../pivot/from.js';

export type { PivotRequest, PivotResult } from '../pivot/from.js';

/**
 * What pivot takes from the install config, read once: the platform it names, even when the
 * config no longer validates (edited since the cluster was made), and the config the source
 * starts with when it has to start a stopped control plane again (a resume after a kill) — the
 * cloud controller with its credentials, the forwarder where the hosts' agents reach it. One
 * that no longer validates gives no config, with a warning: the platform's controllers only.
 */
function sourceOf(read: InstallConfigRead): { platform: Platform | undefined; config: InstallConfig | undefined; warning?: string } {
  if ('config' in read) return { platform: platformFor(read.config), config: read.config };
  // No YAML at all: the platform cannot be told, and guessing it would run the wrong controllers.
  if (read.unparsable) throw read.problem;
  return {
    platform: platformOfDocument(read.document),
    config: undefined,
    warning: `install-config.yaml cannot be read (${messageOf(read.problem)}): a stopped local control plane starts without its credentials files and listen address`,
  };
}

/** `pivot`; `installConfig` is the install config pivotToSelf read already. Default: read here. */
export async function pivot(request: PivotRequest, installConfig?: InstallConfigRead): Promise<PivotResult> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const layout = controlPlaneLayout(dir);
  const toKubeconfig = path.resolve(request.toKubeconfig);
  await checkKubeconfigFile(toKubeconfig, requestField('toKubeconfig'));
  if (!(await exists(layout.etcdDataDir))) {
    throw new UsageError(`No local control plane data in ${dir}: there is nothing to pivot`, { hint: 'Run `provisioner create cluster --dir` first, or pass the install directory that holds the cluster.' });
  }
  const lock = await acquireDirLock(dir, { command: 'pivot', events: sink });
  const fromConfig = sourceOf(installConfig ?? (await readInstallConfigOrProblem({ dir, sink })));
  const { platform } = fromConfig;
  const machinesInController = platform?.lifecycle.machinesInController ?? false;
  let source: AttachedControlPlane | undefined;
  try {
    // Checked before the source boots: a wrong target or a rollback with nothing to undo costs nothing.
    const journal = await openPivotJournal(dir, toKubeconfig, request.rollback ?? false);
    if (fromConfig.warning) log(sink, 'warn', fromConfig.warning);
    source = await attachManagement({ dir, config: fromConfig.config, platform, detached: machinesInController, sink, signal });
    const result = await pivotFrom({ ...request, dir, toKubeconfig, source, machinesInController, journal });
    if (result.sourceStopped) source = undefined;
    return result;
  } finally {
    if (source) {
      // A control plane that manages simulated machines stays up; otherwise stop what this command started.
      if (machinesInController) source.client.close();
      else await source.stop().catch((error: unknown) => log(sink, 'warn', `While stopping the local control plane: ${messageOf(error)}`));
    }
    await lock.release();
  }
}

export type PivotToSelfRequest = Omit<PivotRequest, 'toKubeconfig'>;

/**
 * `pivot --dir D --to self` (and `create cluster --pivot-to self`): the cluster of D becomes its own
 * management cluster, as Cluster API's self-hosted flow does it. First `management install`
 * into it (installSelfManagement, src/pivot/self.ts), then the journaled move into
 * `D/auth/kubeconfig`; the hosts' agents follow to the in-cluster agent manager through the
 * cluster's own API endpoint (the kubeconfig's server), and the local control plane, which
 * manages no cluster any more, is stopped and its data removed once the move is done. The
 * install serves the node files from inside the cluster (platforms/hosts/in-cluster-artifacts.ts),
 * so a host registered afterwards joins. `destroy cluster` moves it back first (pivot/back.ts).
 */
export async function pivotToSelf(request: PivotToSelfRequest): Promise<PivotResult> {
  const dir = path.resolve(request.dir);
  const kubeconfig = pivotTargetKubeconfig(dir, selfTarget);
  await checkKubeconfigFile(kubeconfig, `${requestField('to')} self`);
  const journal = await readPivotJournal(dir);
  if (journal?.phase === 'done' && !journal.rolledBack && path.resolve(journal.targetKubeconfig) === kubeconfig) {
    // A run killed after the move but before the cluster was recorded as its own manager, or before (or while) the data went: finished now.
    const layout = controlPlaneLayout(dir);
    const left = (await exists(layout.stateDir)) || (await exists(layout.kubeconfig));
    if (left || (await recordedExternalManagement(dir)) !== kubeconfig) {
      const lock = await acquireDirLock(dir, { command: 'pivot', events: request.sink });
      try {
        await recordExternalManagement(dir, kubeconfig);
        await removeRecordedControlPlane(dir, request.sink);
        log(request.sink, 'info', `The cluster manages itself: the local control plane's data left by an interrupted run was removed from ${dir}`);
      } finally {
        await lock.release();
      }
    }
    return { action: 'nothing-to-move', kinds: [], clusters: journal.clusters.map((c) => `${c.namespace}/${c.name}`), lines: [`the cluster of ${dir} already manages itself`], sourceStopped: false };
  }
  const installConfig = await readInstallConfigOrProblem({ dir, sink: request.sink });
  if (!request.rollback) {
    await installSelfManagement({ dir, dryRun: request.dryRun ?? false, sink: request.sink, signal: request.signal, ...('config' in installConfig ? { config: installConfig.config } : {}) });
  }
  return pivot({ ...request, toKubeconfig: kubeconfig }, installConfig);
}
