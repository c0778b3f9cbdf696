/**
 * `provisioner gather bootstrap`: the log bundle of an install directory, with the objects
 * of its local control plane when they can be read:
 *
 * - running (a management cluster, or processes left up): read as it is;
 * - stopped but with etcd data: etcd and the API server only are started for the gather
 *   (children die with the CLI), read, then stopped again — the objects of a failed install
 *   are still in its etcd, and with no controller running nothing reconciles them meanwhile;
 * - managed by another cluster (pivoted, or made with `--management-kubeconfig`): read from it;
 * - neither (or the start failed): files only, and the bundle's README says so.
 *
 * Holds the install-dir lock throughout, so no other command changes what is gathered.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { apiServerName, controlPlaneStatus, type LocalControlPlane } from '../controlplane/local-controlplane.js';
import { InterruptedError, messageOf, UsageError } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { gatherBundle, type GatherResult } from '../gather/collect.js';
import { KubeClient } from '../kube/client.js';
import { acquireDirLock } from '../process/lock.js';
import { recordedExternalManagement } from '../installdir/management.js';
import { installControlPlane, prepareLocalControlPlane } from '../management/attach.js';
import { readInstallConfig } from '../assets/index.js';
import { installConfigFileName } from '../config/index.js';

export interface GatherBootstrapRequest {
  dir: string;
  /** Bundle path. Default `<dir>/log-bundle-<UTC time>.tar.gz`. */
  output?: string;
  sink: EventSink;
  signal: AbortSignal;
}

/** Where the objects came from: a control plane already `running`, one `started` for the gather, the install's recorded `management` cluster, or `none` (files only). */
export type ObjectSource = 'running' | 'started' | 'management' | 'none';

export interface GatherBootstrapResult extends GatherResult {
  objectSource: ObjectSource;
}

/**
 * The install's credentials files (its platform's, by path), whose values the bundle
 * redacts; none when install-config.yaml cannot be read (said as a warning).
 */
async function installCredentialFiles(dir: string, sink: EventSink): Promise<string[]> {
  if (!(await isFile(path.join(dir, installConfigFileName)))) return [];
  try {
    return (installControlPlane(await readInstallConfig({ dir, sink }), dir).credentials ?? []).map((c) => c.path);
  } catch (error) {
    log(sink, 'warn', `install-config.yaml cannot be read (${messageOf(error)}): the values of the platform's credentials files are not looked for in the bundle`);
    return [];
  }
}

export async function gatherBootstrap(request: GatherBootstrapRequest): Promise<GatherBootstrapResult> {
  const layout = controlPlaneLayout(request.dir);
  if (!(await isDirectory(layout.dir))) {
    throw new UsageError(`${layout.dir} is not a directory`, { hint: 'Pass the install directory of the install to diagnose with --dir.' });
  }
  const { sink, signal } = request;
  const lock = await acquireDirLock(layout.dir, { command: 'gather bootstrap', events: sink });
  try {
    const credentialFiles = await installCredentialFiles(layout.dir, sink);
    const gather = (client: KubeClient | undefined, notes: string[]) =>
      gatherBundle({ dir: layout.dir, events: sink, signal, notes, credentialFiles, ...(client ? { client } : {}), ...(request.output !== undefined ? { output: request.output } : {}) });

    // A pivoted install (or one made with --management-kubeconfig): its objects live in that cluster.
    const external = await recordedExternalManagement(layout.dir);
    if (external) {
      log(sink, 'info', `Reading objects from the install's management cluster (${external})`);
      const client = KubeClient.fromFile(external);
      try {
        const result = await gather(client, [`The install is managed by the cluster of ${external}; objects were read from it as they were.`]);
        return { ...result, objectSource: 'management' };
      } finally {
        client.close();
      }
    }

    const { processes } = await controlPlaneStatus(layout.dir);
    const apiServer = processes.find((p) => p.name === apiServerName);
    if (apiServer?.running && (await isFile(layout.kubeconfig))) {
      log(sink, 'info', `Reading objects from the running control plane of ${layout.dir}`);
      const client = KubeClient.fromFile(layout.kubeconfig);
      try {
        const result = await gather(client, ['The local control plane was running (e.g. a management cluster); objects were read from it as they were.']);
        return { ...result, objectSource: 'running' };
      } finally {
        client.close();
      }
    }

    if (await isDirectory(path.join(layout.etcdDataDir, 'member'))) {
      log(sink, 'info', `Starting etcd and the API server of ${layout.dir} to read its objects (no controller); they stop again after the gather`);
      const notes = [
        'The local control plane was not running: etcd and the API server were started for this gather (no controller, so nothing was reconciled) and stopped after it.',
        'The end of the etcd and kube-apiserver logs is that start; processes.json shows the processes started for the gather.',
      ];
      let controlPlane: LocalControlPlane | undefined;
      try {
        controlPlane = await prepareLocalControlPlane({ dir: layout.dir, detached: false, reconcile: false, sink, signal });
        await controlPlane.start();
      } catch (error) {
        if (error instanceof InterruptedError || signal.aborted) throw error;
        // start() stopped whatever it had started. The failed start's logs are evidence too.
        log(sink, 'warn', `Could not start the local control plane (${messageOf(error)}); gathering files only`);
        const result = await gather(undefined, [`The local control plane was not running and could not be started: ${messageOf(error)}`, 'Files only; the process logs end with that failed start.']);
        return { ...result, objectSource: 'none' };
      }
      try {
        const result = await gather(controlPlane.kube, notes);
        return { ...result, objectSource: 'started' };
      } finally {
        await controlPlane.stop();
      }
    }

    log(sink, 'warn', `No local control plane data in ${layout.dir} (never started, or destroyed): gathering files only`);
    const result = await gather(undefined, ['No local control plane data was found (never started, or destroyed): files only.']);
    return { ...result, objectSource: 'none' };
  } finally {
    await lock.release();
  }
}

async function isDirectory(p: string): Promise<boolean> {
  return (await stat(p).catch(() => undefined))?.isDirectory() ?? false;
}

async function isFile(p: string): Promise<boolean> {
  return (await stat(p).catch(() => undefined))?.isFile() ?? false;
}
