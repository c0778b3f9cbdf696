/**
 * The move back of a self-managed cluster (`pivot --to self`) into a temporary local control
 * plane, so that `destroy cluster` deletes it from outside, as clusterctl documents for a
 * self-hosted cluster (move it back to a bootstrap cluster, then delete it there).
 *
 * It is the same journaled move (`pivotFrom`, phases and journal in `D/.provisioner/pivot.json`)
 * in the other direction: the source is the cluster itself, reached through `D/auth/kubeconfig`,
 * fenced by scaling its providers' Deployments to 0 (after their webhook configurations are
 * deleted: nothing serves them from then on), and the moved objects leave it through its API
 * with clusterctl's `delete-for-move` annotation and no finalizers; the target is the local
 * control plane the caller attached. The hosts' agents follow back to the local agent manager
 * at the local control plane's listen address (its forwarder), as they reached it before the pivot.
 * It moves every Cluster the cluster holds, so `destroy cluster` first refuses a cluster that
 * manages another install's (`refuseWhileManagingOthers`).
 */
import { capiCoreApiVersion } from '../capi.js';
import { desiredSetSelector, installConfigOwner, objectSetHashKey, objectSetOwnerNameKey, type InstallConfig } from '../config/index.js';
import { EnvironmentError, ExternalError, ProvisionerError, UsageError } from '../errors.js';
import { recordRelativePath } from '../installdir/paths.js';
import { log, type EventSink } from '../events.js';
import { hostPort } from '../controlplane/listen-address.js';
import { readListenRecord } from '../controlplane/local-controlplane.js';
import type { StoredObjectRef } from '../controlplane/etcd-storage.js';
import { mapLimit } from '../concurrency.js';
import { KubeApiError, KubeClient, type KubeObject } from '../kube/client.js';
import type { AttachedControlPlane } from '../management/attach.js';
import { polling, until, type Observation } from '../progress/until.js';
import { publishAgentServer } from './agents.js';
import { isUnfinished, pivotFrom, type PivotResult } from './from.js';
import { clusterctlLabel } from './graph.js';
import { readPivotJournal, type PivotPhase } from './journal.js';
import { coreKinds, discoverMoveKinds, removeFinalizersAndDelete, type FencedSource } from './move.js';
import { pivotTargetKubeconfig, selfTarget } from './target.js';

/** Requests in flight at once while the moved objects leave the cluster. */
const removalConcurrency = 32;
/** How long the providers' pods may take to go while none goes: 3 minutes. */
const scaleDownNoProgressMs = 3 * 60_000;
const pollMs = 1_000;

interface DeploymentJson extends KubeObject {
  spec?: { replicas?: number; selector?: { matchLabels?: Record<string, string> } };
}

/**
 * The self-managed cluster as the source of a move: its providers' webhook configurations
 * deleted and their Deployments scaled to 0, waited for until none of their pods is left
 * (idempotent); moved objects removed through its API, finalizers dropped, with clusterctl's
 * `delete-for-move` annotation (move.ts removeFinalizersAndDelete). Its storage (the cluster's own
 * etcd) is not reached directly.
 */
export function clusterFence(client: KubeClient, sink: EventSink, signal?: AbortSignal): FencedSource {
  return {
    stopControllers: async () => {
      // Webhooks first: once their pods are gone an admission call to them fails every write to the providers' kinds.
      for (const kind of ['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration']) {
        for (const webhook of await client.list<KubeObject>('admissionregistration.k8s.io/v1', kind, { labelSelector: clusterctlLabel })) await client.delete(webhook);
      }
      // A Kubernetes that serves no Deployments (a bare API server) runs no provider pods.
      const deployments = await client.list<DeploymentJson>('apps/v1', 'Deployment', { labelSelector: clusterctlLabel }).catch((error: unknown) => {
        if (error instanceof KubeApiError && error.isNotFound) return [];
        throw error;
      });
      for (const d of deployments) if (d.spec?.replicas !== 0) await client.mergePatch(d, { spec: { replicas: 0 } });
      const running = async (): Promise<Observation<string[]>> => {
        const left: string[] = [];
        for (const d of deployments) {
          const labels = d.spec?.selector?.matchLabels ?? {};
          const selector = Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(',');
          const pods = await client.list<KubeObject>('v1', 'Pod', { namespace: d.metadata.namespace!, labelSelector: selector });
          left.push(...pods.map((p) => `${p.metadata.namespace}/${p.metadata.name}`));
        }
        return { state: left.length === 0 ? 'done' : 'waiting', value: left, progress: left.join(', ') };
      };
      await until(polling(running, pollMs), {
        what: "the cluster's provider pods to stop",
        noProgressTimeoutMs: scaleDownNoProgressMs,
        ...(signal ? { signal } : {}),
        onStall: (last) =>
          new ExternalError(`The cluster's provider pods did not stop within ${scaleDownNoProgressMs / 60_000} min of their Deployments' scale to 0: ${(last?.value ?? []).join(', ')}`, {
            hint: 'Look at those pods (`kubectl --kubeconfig D/auth/kubeconfig describe pod …`), then run destroy cluster again.',
          }),
      });
      log(sink, 'info', `The cluster's providers are stopped: ${deployments.map((d) => `${d.metadata.namespace}/${d.metadata.name}`).join(', ')} scaled to 0, their webhook configurations deleted`);
    },
    removeObjects: async (refs: readonly StoredObjectRef[]) => {
      const kinds = new Map<string, { apiVersion: string; kind: string }>();
      for (const k of [...(await discoverMoveKinds(client)), ...coreKinds]) {
        const resource = await client.resource(k.apiVersion, k.kind);
        kinds.set(`${k.group}/${resource.name}`, { apiVersion: k.apiVersion, kind: k.kind });
      }
      const removed = await mapLimit(
        refs,
        removalConcurrency,
        async (ref) => {
          const kind = kinds.get(`${ref.group}/${ref.resource}`);
          if (!kind) throw new ExternalError(`The cluster no longer serves ${ref.resource}.${ref.group}, of moved object ${ref.name}`, { hint: 'Run destroy cluster again.' });
          // Deleted first, then its finalizers dropped (none can be added once the deletion started), with delete-for-move.
          return removeFinalizersAndDelete(client, { ...kind, name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) }, signal);
        },
        signal,
      );
      return removed.filter(Boolean).length;
    },
  };
}

export interface PivotBackRequest {
  /** Absolute install directory, whose lock the caller holds. */
  dir: string;
  /** The temporary local control plane, attached with the install's controllers and listen address. */
  target: AttachedControlPlane;
  sink: EventSink;
  signal: AbortSignal;
  /** Called after each phase is journaled (tests kill here). Default none. */
  afterPhase?: (phase: PivotPhase) => void | Promise<void>;
}

/**
 * Moves the self-managed cluster of `dir` back into `target` (resuming a move back that a
 * kill cut short), and leaves the management record to the caller. The hosts' agents follow
 * to the target's listen address, which it publishes for them (`agent-server`).
 */
export async function pivotBack(request: PivotBackRequest): Promise<PivotResult> {
  const { dir, target, sink, signal } = request;
  const listen = await readListenRecord(dir);
  if (!listen) {
    throw new UsageError(`The local control plane of ${dir} listens on loopback only, so the hosts' agents cannot follow the cluster back into it`, {
      hint: 'Set bootstrap.listenAddress in install-config.yaml to the address the hosts reached before the pivot, then run destroy cluster again.',
    });
  }
  await publishAgentServer(target.client, `https://${hostPort(listen.address, listen.port)}`);
  const kubeconfig = pivotTargetKubeconfig(dir, selfTarget);
  const source = KubeClient.fromFile(kubeconfig);
  let journal = await readPivotJournal(dir);
  if (isUnfinished(journal)) {
    if (journal.targetKubeconfig !== target.kubeconfig) {
      throw new UsageError(`An unfinished pivot of ${dir} targets ${journal.targetKubeconfig}, not the local control plane`, { hint: 'Finish it with `provisioner pivot` first, then run destroy cluster again.' });
    }
    // Started again from its data, the local control plane may serve on another port.
    journal = { ...journal, targetServer: target.client.server };
  } else journal = undefined;
  try {
    return await pivotFrom({
      dir,
      toKubeconfig: target.kubeconfig,
      source: { client: source, kubeconfig, adopted: true, fatal: new Promise<never>(() => {}), stop: async () => source.close(), fence: clusterFence(source, sink, signal) },
      machinesInController: false,
      journal,
      recordTarget: false,
      sink,
      signal,
      ...(request.afterPhase ? { afterPhase: request.afterPhase } : {}),
    });
  } catch (error) {
    throw asMoveBackError(error, dir);
  } finally {
    source.close();
  }
}

/**
 * Refuses to destroy the self-managed cluster of `dir` while it holds Clusters that are not its
 * own (another install's, made with `--management-kubeconfig` its kubeconfig): the move back would
 * take them into the temporary local control plane, which destroy removes, so they would be left
 * with no management and their objects lost. Each is named with the install config it came from
 * (its desired-set owner annotation). No flag overrides this: delete them first, or move them.
 */
export async function refuseWhileManagingOthers(dir: string, kubeconfig: string, config: InstallConfig | undefined): Promise<void> {
  if (!config) return;
  const client = KubeClient.fromFile(kubeconfig);
  try {
    const own = desiredSetSelector(installConfigOwner(config));
    const others = (await client.list<KubeObject>(capiCoreApiVersion, 'Cluster')).filter((c) => {
      const labels = c.metadata.labels ?? {};
      return `${objectSetHashKey}=${labels[objectSetHashKey] ?? ''}` !== own;
    });
    if (others.length === 0) return;
    const named = others.map((c) => {
      const owner = c.metadata.annotations?.[objectSetOwnerNameKey];
      return `Cluster ${c.metadata.namespace}/${c.metadata.name}${owner ? ` (install config ${owner})` : ''}`;
    });
    throw new EnvironmentError(
      `The cluster of ${dir} manages ${others.length === 1 ? 'another cluster' : `${others.length} other clusters`} too: ${named.join(', ')}; destroying it would leave ${others.length === 1 ? 'that cluster' : 'them'} with no management`,
      {
        hint: `Delete ${others.length === 1 ? 'it' : 'each'} first with \`provisioner destroy cluster --dir <its install directory>\` (the directory whose create cluster ran with --management-kubeconfig ${kubeconfig}), or move ${others.length === 1 ? 'it' : 'them'} to another management cluster, then run destroy cluster --dir ${dir} again.`,
      },
    );
  } finally {
    client.close();
  }
}

/**
 * A failure of the move back, with the next step for it: the move's own hints name `provisioner
 * pivot` and `--rollback`, which do not apply to a move that `destroy cluster` runs (its journal
 * targets a temporary local control plane, and `destroy cluster` again resumes it). A hint that
 * names neither (a specific cause to fix first) is kept, with the rerun after it.
 */
export function asMoveBackError(error: unknown, dir: string): unknown {
  if (!(error instanceof ProvisionerError)) return error;
  const rerun = `run \`provisioner destroy cluster --dir ${dir}\` again: it resumes the move back from where it stopped (the journal is in ${recordRelativePath('pivot')}), then deletes the cluster`;
  const hint = error.hint;
  if (hint === undefined || /\bpivot\b|--rollback/.test(hint)) error.replaceHint(`${rerun[0]!.toUpperCase()}${rerun.slice(1)}.`);
  else if (!hint.includes('destroy cluster')) error.replaceHint(`${hint.replace(/\.$/, '')}; then ${rerun}.`);
  return error;
}
