/**
 * `destroy cluster` and `destroy bootstrap`.
 *
 * destroy cluster: first removes Rancher's cluster when the install was registered with
 * Rancher (services/rancher.ts) and its Fleet Cluster when it was registered with Fleet
 * (services/fleet.ts), then brings the local control plane back if needed (from its data), deletes
 * every Cluster of the install, waits on watches until every Cluster API object of it is
 * gone, stops the control plane and removes the local state. It works after a failed or
 * interrupted create, since it only needs the control plane's data. A cluster that manages
 * itself (`--pivot-to self`) is first moved back into a temporary local control plane
 * (`moveBack`, pivot/back.ts), then deleted from there like any local install; while it
 * manages other installs' clusters (made with `--management-kubeconfig` its kubeconfig), it is
 * refused before anything changes, naming them: the move back would take their objects into a
 * control plane that destroy then removes, leaving them with no management.
 *
 * destroy bootstrap: removes what exists only for bootstrapping — the local control plane
 * and its data, and whatever else the platform made only for the bootstrap
 * (`lifecycle.bootstrapResources`, its `destroyBootstrap` hook). It refuses while that
 * control plane still manages a cluster (on a platform whose machines live in its
 * controllers it always does, unless the cluster was pivoted away), because the cluster
 * would be left with no management; `--force` does it anyway.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { exists } from '../files.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { removeRecordedControlPlane, stopRecordedControlPlane } from '../controlplane/local-controlplane.js';
import { EnvironmentError, MachinesError, messageOf } from '../errors.js';
import { log, type EventSink } from '../events.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { Journal } from '../lifecycle/journal.js';
import { stageSteps, type StageStep } from '../lifecycle/stages.js';
import { pivotJournalPath } from '../pivot/journal.js';
import { acquireDirLock } from '../process/lock.js';
import { capiCoreApiVersion } from '../capi.js';
import { clusterDeleted, clusterKinds, stallError } from '../wait/capi.js';
import { waitFor } from '../wait/waiter.js';
import { readInstallConfigOrProblem, type InstallConfigRead } from '../assets/index.js';
import { desiredSetSelector, installConfigOwner, objectSetHashKey, type InstallConfig } from '../config/index.js';
import { platformFor, type Platform, type ProviderObject, type ReleasedObject } from '../platforms/index.js';
import { attachManagement, type AttachedControlPlane } from '../management/attach.js';
import { pivotBack, refuseWhileManagingOthers } from '../pivot/back.js';
import { forgetExternalManagement, recordedExternalManagement } from '../installdir/management.js';
import { recordPath } from '../installdir/paths.js';
import { removeRancherRegistration } from '../handoff/rancher/register.js';
import { deregisterFleet } from '../handoff/fleet/register.js';
import { isSelfManaged } from '../pivot/target.js';

export interface DestroyRequest {
  dir: string;
  sink: EventSink;
  signal: AbortSignal;
  /** destroy bootstrap only: remove the control plane even though it manages a cluster. Default false. */
  force?: boolean;
  /** Time without progress before the deletion wait fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
}

/** Local state removed once nothing is left to manage. The user's files (install config, manifests) stay. */
async function removeLocalState(dir: string): Promise<void> {
  const layout = controlPlaneLayout(dir);
  for (const target of [layout.stateDir, Journal.path(dir), pivotJournalPath(dir), recordPath(dir, 'clusterState'), path.join(dir, 'auth'), layout.logDir]) {
    await rm(target, { recursive: true, force: true });
  }
}

export async function destroyCluster(request: DestroyRequest): Promise<{ deleted: string[] }> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const layout = controlPlaneLayout(dir);
  const lock = await acquireDirLock(dir, { command: 'destroy cluster', events: sink });
  const phase = destroyPhases(sink, signal);
  try {
    // Read once for the whole command, when first needed (a destroy with nothing to delete reads none).
    let read: Promise<InstallConfigRead> | undefined;
    const installConfig = (): Promise<InstallConfigRead> => (read ??= readInstallConfigOrProblem({ dir, sink }));
    let external = await recordedExternalManagement(dir);
    const selfManaged = external !== undefined && isSelfManaged(dir, external);
    // Before anything changes: a self-managed cluster that manages other installs' clusters stays.
    if (selfManaged) await refuseWhileManagingOthers(dir, external!, ownConfig(await installConfig(), sink, true));
    // Rancher's cluster first, by its labels (ADR 0008's custom deletion): no owner reference removes it for us.
    await removeRancherRegistration(dir, { sink, signal, ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}) });
    // The Fleet Cluster and its kubeconfig Secret, by their labels, while the manager is still recorded.
    await deregisterFleet({ dir, sink, signal, ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}) });
    // A cluster that manages itself cannot be deleted from inside (it would remove its own controllers): it moves back first.
    const movedBack = selfManaged ? await moveBack(dir, ownConfig(await installConfig(), sink, true), phase, sink, signal) : undefined;
    if (movedBack) external = undefined;
    if (!external && !(await exists(layout.etcdDataDir))) {
      log(sink, 'info', `No local control plane data in ${dir}: nothing was created, or it was destroyed already`);
      await removeLocalState(dir);
      return { deleted: [] };
    }
    // Only this install's Cluster (found by its desired-set label): a management cluster may hold others.
    const config = ownConfig(await installConfig(), sink, Boolean(external));
    const selector = config ? desiredSetSelector(installConfigOwner(config)) : undefined;
    // The platform's controllers delete its infrastructure, with its credentials; an unreadable config: every bundled provider.
    const platform = config ? platformFor(config) : undefined;
    // As create cluster ran it (the controllers, their credentials, where hosts reach it: machines on hosts run their reset plans through it).
    const controlPlane = movedBack ?? (await attachManagement({ dir, config, external, detached: false, sink, signal }));
    const deleted: string[] = [];
    try {
      await phase('delete-clusters', async () => {
        const clusters = await controlPlane.client.list<KubeObject>(capiCoreApiVersion, 'Cluster', selector ? { labelSelector: selector } : {});
        // The platform's own clean-up, told before the deletion starts (what its provider holds), run after it ends.
        const afterDeletion = new Map<KubeObject, () => Promise<void>>();
        for (const cluster of clusters) {
          const hook = platform?.hooks?.clusterDeletion;
          if (hook && config) {
            afterDeletion.set(
              cluster,
              await hook({
                config,
                dir,
                kubeconfig: controlPlane.kubeconfig,
                signal,
                log: (message) => log(sink, 'info', message),
                events: sink,
                clusterName: cluster.metadata.name,
                namespace: cluster.metadata.namespace!,
                ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
              }),
            );
          }
        }
        for (const cluster of clusters) {
          log(sink, 'info', `Deleting Cluster ${cluster.metadata.namespace}/${cluster.metadata.name}`);
          await controlPlane.client.delete(cluster);
          deleted.push(`${cluster.metadata.namespace}/${cluster.metadata.name}`);
        }
        for (const cluster of clusters) {
          const namespace = cluster.metadata.namespace!;
          const waitDeleted = () =>
            waitFor(controlPlane.client, {
              what: `the deletion of Cluster ${namespace}/${cluster.metadata.name}`,
              kinds: clusterKinds(namespace),
              evaluate: clusterDeleted(cluster.metadata.name),
              onStall: (last, ms) => stallError(`the deletion of ${cluster.metadata.name}`, last, ms, 'machines'),
              events: sink,
              signal,
              fatal: controlPlane.fatal,
              ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
            });
          try {
            await waitDeleted();
          } catch (error) {
            // A stalled deletion: the platform may release what its provider never created outside; then the wait goes on.
            if (!(error instanceof MachinesError) || !platform?.hooks?.releaseUnprovisioned || !config) throw error;
            const released = await releaseUnprovisioned(platform, config, controlPlane.client, cluster, sink);
            if (released.length === 0) throw error;
            await waitDeleted();
          }
          log(sink, 'info', `Every Cluster API object of ${namespace}/${cluster.metadata.name} is gone`);
          await afterDeletion.get(cluster)?.();
        }
        // The ClusterClass layout's class and templates belong to no Cluster: deleted once the Clusters are gone.
        if (selector) await deleteClusterClasses(controlPlane.client, selector, sink);
      });
    } finally {
      await controlPlane.stop().catch((error: unknown) => log(sink, 'warn', `While stopping the control plane: ${messageOf(error)}`));
    }
    await phase('remove-local-state', async () => {
      // An adopted (detached) local control plane is still running: stop it from its pidfiles.
      if (!external) await stopRecordedControlPlane(dir, sink);
      await removeLocalState(dir);
      await forgetExternalManagement(dir);
    });
    return { deleted };
  } finally {
    await lock.release();
  }
}

/** The phases of one destroy, as stages `destroy:<name>` (its resume is what is left to delete, not the journal). */
function destroyPhases(sink: EventSink, signal: AbortSignal): StageStep {
  return stageSteps('destroy:', { sink, signal });
}

/**
 * The first half of destroying a self-managed cluster (pivoted with `--to self`), as
 * clusterctl documents it for a self-hosted cluster: a temporary local control plane (the
 * one create cluster runs, from the install config, listening where the hosts reach it),
 * then the journaled move of the cluster's objects back into it (pivot/back.ts), the hosts'
 * agents following to it; once done, the install is managed locally again (its management
 * record forgotten), and destroy goes on as for any local install. A kill anywhere is
 * resumed by running destroy cluster again: the pivot journal says where the move stood.
 */
async function moveBack(dir: string, config: InstallConfig | undefined, phase: StageStep, sink: EventSink, signal: AbortSignal): Promise<AttachedControlPlane> {
  log(sink, 'info', `The cluster of ${dir} manages itself: moving it back into a temporary local control plane to delete it from there`);
  const controlPlane = await phase('temporary-control-plane', () => attachManagement({ dir, config, detached: false, sink, signal }));
  try {
    await phase('move-back', () => pivotBack({ dir, target: controlPlane, sink, signal }));
    await forgetExternalManagement(dir);
  } catch (error) {
    await controlPlane.stop().catch((stopError: unknown) => log(sink, 'warn', `While stopping the local control plane: ${messageOf(stopError)}`));
    throw error;
  }
  return controlPlane;
}

/**
 * Asks the platform to release the provider objects of `cluster` that hold its deletion
 * although nothing of them exists outside (its `releaseUnprovisioned` hook), and says
 * what was released and why.
 */
async function releaseUnprovisioned(platform: Platform, config: InstallConfig, client: KubeClient, cluster: KubeObject, sink: EventSink): Promise<ReleasedObject[]> {
  const namespace = cluster.metadata.namespace!;
  const released = await platform.hooks!.releaseUnprovisioned!({
    config,
    clusterName: cluster.metadata.name,
    namespace,
    list: (apiVersion, kind) => client.list<KubeObject & ProviderObject>(apiVersion, kind, { namespace }),
    releaseFinalizers: async (object) => {
      await client.mergePatch({ apiVersion: object.apiVersion, kind: object.kind, metadata: { name: object.metadata.name, namespace } }, { metadata: { finalizers: null } });
    },
    log: (message) => log(sink, 'info', message),
  });
  for (const object of released) {
    log(sink, 'warn', `Released ${object.kind} ${object.namespace}/${object.name} (its finalizers removed): ${object.reason}`);
  }
  return released;
}

/**
 * Deletes the install's ClusterClasses (found by its desired-set label) and the templates
 * each names that are the install's too, in its namespace; a template already gone is fine. The templates are the
 * class's, not a Cluster's: nothing else deletes them (the local control plane runs no
 * garbage collector).
 */
async function deleteClusterClasses(client: KubeClient, selector: string, sink: EventSink): Promise<void> {
  const classes = await client.list<KubeObject>(capiCoreApiVersion, 'ClusterClass', { labelSelector: selector });
  for (const clusterClass of classes) {
    const namespace = clusterClass.metadata.namespace!;
    await client.delete(clusterClass);
    const setLabel = clusterClass.metadata.labels?.[objectSetHashKey];
    for (const template of templateRefsOf(clusterClass)) {
      const live = await client.get<KubeObject>({ apiVersion: template.apiVersion, kind: template.kind, metadata: { name: template.name, namespace } });
      // Only the install's own templates: a class edited to name someone else's leaves theirs alone.
      if (live && live.metadata.labels?.[objectSetHashKey] === setLabel) await client.delete(live);
    }
    log(sink, 'info', `Deleted ClusterClass ${namespace}/${clusterClass.metadata.name} and its templates`);
  }
}

/** Every `templateRef` a ClusterClass's spec holds (infrastructure, control plane, its machines, each worker class). */
function templateRefsOf(clusterClass: KubeObject): { apiVersion: string; kind: string; name: string }[] {
  const refs: { apiVersion: string; kind: string; name: string }[] = [];
  const walk = (value: unknown, key: string): void => {
    if (Array.isArray(value)) for (const item of value) walk(item, key);
    else if (value && typeof value === 'object') {
      const record = value as Record<string, unknown>;
      if (key === 'templateRef' && typeof record.apiVersion === 'string' && typeof record.kind === 'string' && typeof record.name === 'string') {
        refs.push({ apiVersion: record.apiVersion, kind: record.kind, name: record.name });
      } else for (const [k, v] of Object.entries(record)) walk(v, k);
    }
  };
  walk(clusterClass['spec'], '');
  return refs;
}

/** What the platform made only for the bootstrap (its `destroyBootstrap` hook), when its install config can be read. */
async function destroyPlatformBootstrap(dir: string, sink: EventSink, signal: AbortSignal): Promise<void> {
  const read = await readInstallConfigOrProblem({ dir, sink });
  if (!('config' in read)) {
    log(sink, 'warn', `install-config.yaml cannot be read (${messageOf(read.problem)}), so the platform's own bootstrap resources, if it has any, were left alone`);
    return;
  }
  const { config } = read;
  await platformFor(config).hooks?.destroyBootstrap?.({ config, dir, signal, log: (message) => log(sink, 'info', message) });
}

/** This install's config (its objects' label selector, its platform); undefined (all Clusters, every provider) when it cannot be read and the control plane is ours. */
function ownConfig(read: InstallConfigRead, sink: EventSink, external: boolean): InstallConfig | undefined {
  if ('config' in read) return read.config;
  if (external) {
    throw new EnvironmentError(`Cannot tell which Cluster of the management cluster is this install's: ${messageOf(read.problem)}`, {
      hint: 'Restore install-config.yaml as it was at create time, then run destroy cluster again.',
    });
  }
  log(sink, 'warn', `install-config.yaml cannot be read (${messageOf(read.problem)}); deleting every Cluster of the local control plane, which only this install uses`);
  return undefined;
}

export async function destroyBootstrap(request: DestroyRequest): Promise<{ removed: boolean }> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const layout = controlPlaneLayout(dir);
  const lock = await acquireDirLock(dir, { command: 'destroy bootstrap', events: sink });
  try {
    if (!(await exists(layout.etcdDataDir))) {
      log(sink, 'info', `No local control plane in ${dir}: nothing to remove`);
      return { removed: false };
    }
    if (!request.force) {
      // Reading the Clusters needs etcd and the API server only: no controller starts to act on them.
      const controlPlane = await attachManagement({ dir, config: undefined, detached: false, reconcile: false, sink, signal });
      let clusters: KubeObject[];
      try {
        clusters = await controlPlane.client.list<KubeObject>(capiCoreApiVersion, 'Cluster');
      } finally {
        await controlPlane.stop();
      }
      if (clusters.length > 0) {
        throw new EnvironmentError(
          `The local control plane in ${dir} still manages ${clusters.map((c) => `${c.metadata.namespace}/${c.metadata.name}`).join(', ')}; removing it would leave the cluster with no management`,
          {
            hint: 'Pivot the cluster to a lasting management cluster first (`provisioner pivot`), delete it with `provisioner destroy cluster`, or pass --force to remove the control plane anyway.',
          },
        );
      }
    }
    await removeRecordedControlPlane(dir, sink);
    log(sink, 'info', `Removed the local control plane and its data from ${dir}`);
    await destroyPlatformBootstrap(dir, sink, signal);
    return { removed: true };
  } finally {
    await lock.release();
  }
}
