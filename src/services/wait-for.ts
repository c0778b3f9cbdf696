/**
 * `wait-for install-complete`: waits until the cluster of an install directory is healthy,
 * then writes the same outputs as the hand-off of `create cluster`. Useful after an
 * interrupted create, or to watch a create that runs elsewhere on the same directory.
 *
 * It asks whoever manages the cluster: the management cluster recorded in
 * `.provisioner/management.json` (by `--management-kubeconfig` or a finished pivot) when
 * there is one — the stopped local control plane is then left alone — otherwise the local
 * control plane (adopted when running, started from its data when not). The wait is
 * `create cluster`'s own (`waitHealthy`): the conditions, then the workload API's Ready nodes.
 */
import path from 'node:path';
import { exists } from '../files.js';
import { AssetStore, clusterApiManifestsAsset, loadInstallConfig } from '../assets/index.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { EnvironmentError } from '../errors.js';
import { log, type EventSink } from '../events.js';
import type { KubeObject } from '../kube/client.js';
import { readPivotJournal } from '../pivot/journal.js';
import { acquireDirLock } from '../process/lock.js';
import { platformFor } from '../platforms/index.js';
import { handOff } from '../lifecycle/hand-off.js';
import { countMachines, waitHealthy } from '../wait/healthy.js';
import { attachManagement } from '../management/attach.js';
import { recordedExternalManagement } from '../installdir/management.js';
import { isUnfinished } from '../pivot/from.js';

export interface WaitForRequest {
  dir: string;
  sink: EventSink;
  signal: AbortSignal;
  /** Time without any observable change before the wait fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
}

export interface WaitForResult {
  kubeconfig: string;
  /** The kubeconfig of the management cluster that was asked. */
  managementKubeconfig: string;
}

export async function waitForInstallComplete(request: WaitForRequest): Promise<WaitForResult> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const lock = await acquireDirLock(dir, { command: 'wait-for install-complete', events: sink });
  try {
    const external = await recordedExternalManagement(dir);
    const pivot = await readPivotJournal(dir);
    if (isUnfinished(pivot)) {
      throw new EnvironmentError(`An unfinished pivot of ${dir} targets ${pivot.targetKubeconfig}: the cluster has no single manager to ask`, {
        hint: `Finish the move with \`provisioner pivot --dir ${request.dir} --to-kubeconfig ${pivot.targetKubeconfig}\` (or roll it back with --rollback), then wait again.`,
      });
    }
    if (!external && !(await exists(controlPlaneLayout(dir).etcdDataDir))) {
      throw new EnvironmentError(`Nothing to wait for in ${dir}: no cluster was created there`, { hint: `Run \`provisioner create cluster --dir ${request.dir}\` first.` });
    }
    const installConfig = await loadInstallConfig({ dir, sink });
    const { config } = installConfig;
    const store = await AssetStore.open({ dir, sink, signal, regenerate: [], keepEdits: true, installConfig });
    const manifests = await store.fetch(clusterApiManifestsAsset);
    const objects = manifests.files.flatMap((f) => f.objects as unknown as KubeObject[]);

    const platform = platformFor(config);
    // When the local control plane runs the machines, once started it stays up, as create cluster leaves it.
    const keepRunning = !external && platform.lifecycle.machinesInController;
    if (external) log(sink, 'info', `Asking the management cluster of ${external}, which manages this install`);
    const management = await attachManagement({ dir, config, external, detached: keepRunning, sink, signal });
    try {
      await waitHealthy(management.client, {
        clusterName: config.metadata.name,
        namespace: config.metadata.namespace,
        expectedMachines: countMachines(objects),
        podNetwork: config.networking.cni !== 'none',
        what: external ? `the cluster under the management of ${management.client.server}` : 'the control plane and nodes',
        sink,
        signal,
        fatal: management.fatal,
        ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
      });
      const kubeconfig = await handOff(management.client, dir, config.metadata.name, config.metadata.namespace, platform.lifecycle.stateKinds);
      return { kubeconfig, managementKubeconfig: management.kubeconfig };
    } finally {
      if (keepRunning || management.adopted) management.client.close();
      else await management.stop();
    }
  } finally {
    await lock.release();
  }
}
