/**
 * `wait-for install-complete`: waits, on watches, until the cluster of an install
 * directory is healthy (control plane available, every machine with a Ready node), then
 * writes the same outputs as the hand-off of `create cluster`. Useful after an
 * interrupted create, or to watch a create that runs elsewhere on the same directory.
 */
import path from 'node:path';
import { AssetStore, clusterApiManifestsAsset, installConfigAsset } from '../assets/index.js';
import { EnvironmentError } from '../errors.js';
import type { EventSink } from '../events.js';
import type { KubeObject } from '../kube/client.js';
import { acquireDirLock } from '../process/lock.js';
import { clusterKinds, clusterReady, stallError } from '../wait/capi.js';
import { waitFor } from '../wait/waiter.js';
import { countMachines, handOff } from './create-cluster.js';
import { attachLocalControlPlane } from './local-controlplane.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { access } from 'node:fs/promises';

export interface WaitForRequest {
  dir: string;
  sink: EventSink;
  signal: AbortSignal;
  noProgressTimeoutMs?: number;
}

export async function waitForInstallComplete(request: WaitForRequest): Promise<{ kubeconfig: string }> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  if (!(await access(controlPlaneLayout(dir).etcdDataDir).then(() => true, () => false))) {
    throw new EnvironmentError(`Nothing to wait for in ${dir}: no cluster was created there`, { hint: 'Run `provisioner create cluster --dir ' + request.dir + '` first.' });
  }
  const lock = await acquireDirLock(dir, { command: 'wait-for install-complete', events: sink });
  try {
    const store = await AssetStore.open({ dir, sink, signal, regenerate: [], keepEdits: true });
    const { config } = await store.fetch(installConfigAsset);
    const manifests = await store.fetch(clusterApiManifestsAsset);
    const objects = manifests.files.flatMap((f) => f.objects as unknown as KubeObject[]);
    const keepRunning = config.platform.inmemory !== undefined;
    const controlPlane = await attachLocalControlPlane({ dir, detached: keepRunning, sink, signal });
    try {
      await waitFor(controlPlane.client, {
        what: 'the control plane and nodes',
        kinds: clusterKinds(config.metadata.namespace),
        evaluate: clusterReady(config.metadata.name, countMachines(objects)),
        onStall: (last, ms) => stallError('the control plane and nodes', last, ms, 'machines'),
        events: sink,
        signal,
        fatal: controlPlane.fatal,
        ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
      });
      const kubeconfig = await handOff(controlPlane.client, dir, config.metadata.name, config.metadata.namespace);
      return { kubeconfig };
    } finally {
      if (keepRunning || controlPlane.adopted) controlPlane.client.close();
      else await controlPlane.stop();
    }
  } finally {
    await lock.release();
  }
}
