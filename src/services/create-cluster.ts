/**
 * `create cluster`: the main job. Boots (or adopts) the local control plane, applies the
 * manifests in stages with hooks, waits on watches until the cluster is healthy, then
 * hands off. Every stage runs on lifecycle/stages.ts (timed, journaled in the journal); running the
 * command again after Ctrl-C, SIGKILL or a crash resumes: the control plane comes back
 * from its data (or is adopted when still running), applies are idempotent, and waits
 * pick up what is left.
 *
 * Stages: manifests → controlplane → preflight → pre-provision hooks → infrastructure →
 * wait-infrastructure → infra-ready hooks → bootstrap-data hooks → control-plane →
 * workers → wait-cluster → post-provision hooks → hand-off (→ management-install with `--pivot-to self` → pivot → wait-pivoted) (→ register-rancher).
 *
 * The platform (src/platforms, through the registry) decides what runs and what happens
 * at the end: the control plane starts exactly its controllers, with its credentials
 * files by path; its hooks run first in each hook stage. Hand-off depends on where the
 * machines live: when they live inside an infrastructure controller's process
 * (`lifecycle.machinesInController`), the control plane must keep running: it is started
 * detached and stays up as the cluster's management cluster (`destroy cluster` stops it).
 * Otherwise the temporary control plane stops after the hand-off and keeps its data for
 * `destroy` and `gather`.
 */
import path from 'node:path';
import { durationToMs, type HookStage, type InstallConfig } from '../config/index.js';
import type { DesiredSetOwner } from '../config/ownership.js';
import { ConfigError, ProvisionerError, UsageError, messageOf, requestField } from '../errors.js';
import { gatherBundle } from '../gather/collect.js';
import { log, type EventSink } from '../events.js';
import { KubeClient, describeRef, type KubeObject } from '../kube/client.js';
import { checkKubeconfigFile } from '../kube/kubeconfig-file.js';
import { handOff } from '../lifecycle/hand-off.js';
import { Journal } from '../lifecycle/journal.js';
import { StageRunner, type Stage } from '../lifecycle/stages.js';
import { runUserHooks, type UserHook } from '../lifecycle/hooks.js';
import { platformFor, prunableKinds, type Platform, type PlatformHookContext } from '../platforms/index.js';
import { acquireDirLock } from '../process/lock.js';
import { capiCoreApiVersion } from '../capi.js';
import { infrastructureReady, stallError } from '../wait/capi.js';
import { countMachines, topologyOf, waitHealthy } from '../wait/healthy.js';
import { waitFor } from '../wait/waiter.js';
import { applyObjects, dryRunObjects } from '../apply/objects.js';
import { requireInstallConfigFile } from '../assets/install-config.js';
import { createManifests } from '../assets/create-manifests.js';
import { prepareNodeArtifactsFor } from '../nodeartifacts/prepare.js';
import { attachManagement, checkListenAddress, checkManagementCluster, installControlPlane, type AttachedControlPlane, type InstallManagement } from '../management/attach.js';
import { recordedExternalManagement } from '../installdir/management.js';
import { readPivotJournal } from '../pivot/journal.js';
import { isUnfinished, pivotFrom } from '../pivot/from.js';
import { installSelfManagement } from '../pivot/self.js';
import { isSelfManaged, pivotTargetKubeconfig, selfTarget } from '../pivot/target.js';
import { registerRancherLocked, type RancherStrategy } from '../handoff/rancher/register.js';

export interface CreateClusterRequest {
  dir: string;
  sink: EventSink;
  signal: AbortSignal;
  /** Print what would be applied and validate it against the real CRDs and webhooks; change nothing. Default false. */
  dryRun?: boolean;
  /** Time without any observable progress before a wait stage fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
  /** Use this existing management cluster instead of a local control plane. Default: none (local). */
  managementKubeconfig?: string;
  /**
   * The one address besides loopback where the local control plane's API
   * server listens, for hosts. Default: the install config's `bootstrap.listenAddress`, else
   * none (loopback only). Unused with an existing management cluster.
   */
  listenAddress?: string;
  /**
   * Once the cluster is healthy, move its Cluster API objects into this lasting management
   * cluster (see pivot/from.ts) and wait until it manages the cluster; `self` installs the
   * providers into the new cluster and moves them there (pivotToSelf's path). Default: none (no pivot).
   */
  pivotTo?: string;
  /**
   * Once the cluster is handed off (and pivoted, with `pivotTo`), hand it to the Rancher whose
   * local cluster this kubeconfig reaches, as `register rancher` does (services/rancher.ts), in a
   * `register-rancher` stage. Default: none (no Rancher).
   */
  registerRancher?: { kubeconfig: string; /** Default v3 (`defaultRancherStrategy`). */ strategy?: RancherStrategy };
}

export interface CreateClusterResult {
  kubeconfig: string;
  managementKubeconfig: string;
  /** Whether the local control plane keeps running as the cluster's manager. */
  controlPlaneRunning: boolean;
  resumed: boolean;
  stages: { name: string; durationMs: number }[];
  /** The management cluster the objects were moved into (`pivotTo`), once the move is done. */
  pivotedTo?: string;
}

const listenAddressFlag = requestField('listenAddress');


/** Where the final state of every CAPI object is written (never a Secret's data). */

export async function createCluster(request: CreateClusterRequest): Promise<CreateClusterResult> {
  const dir = path.resolve(request.dir);
  const { sink, signal } = request;
  const dryRun = request.dryRun ?? false;
  // Kubeconfigs named by flag are checked before anything starts: one that is no kubeconfig is the user's to fix.
  if (request.managementKubeconfig) await checkKubeconfigFile(path.resolve(request.managementKubeconfig), requestField('managementKubeconfig'));
  if (request.pivotTo && request.pivotTo !== selfTarget) await checkKubeconfigFile(path.resolve(request.pivotTo), requestField('pivotTo'));
  if (request.registerRancher) await checkKubeconfigFile(path.resolve(request.registerRancher.kubeconfig), requestField('registerRancher'));
  if (request.listenAddress) checkListenAddress(request.listenAddress, { flag: listenAddressFlag });
  const lock = await acquireDirLock(dir, { command: 'create cluster', events: sink });
  let controlPlane: AttachedControlPlane | undefined;
  let keepRunning = false;
  /** The platform's credentials files, whose values the failure bundle redacts. */
  let credentialFiles: readonly string[] = [];
  try {
    const journal = await Journal.open(dir);
    const resumed = journal.runs > 0;
    // A first run in a directory without an install config records nothing there: the manifests stage would refuse it anyway.
    if (!resumed) await requireInstallConfigFile(dir);
    if (!dryRun) {
      const run = await journal.beginRun();
      if (resumed) log(sink, 'info', `Resuming: run ${run} on ${dir}`);
    }
    const stages = new StageRunner({ journal, sink, signal, dryRun });

    // Where the cluster is managed and whether it moves, known before any stage runs.
    const external = request.managementKubeconfig ?? (await recordedExternalManagement(dir));
    const pivotTo = request.pivotTo ? pivotTargetKubeconfig(dir, request.pivotTo) : undefined;
    if (pivotTo && external && path.resolve(external) !== pivotTo) {
      throw new UsageError(`This install is managed by the cluster of ${external}; ${requestField('pivotTo')} moves a cluster from its local control plane only`, {
        hint: `Run without ${requestField('pivotTo')}, or use \`clusterctl move\` between the two management clusters.`,
      });
    }
    const pendingPivot = await readPivotJournal(dir);
    /** A move in flight goes first: the source may already have let go of objects, so nothing may be re-applied to it. */
    const resumingPivot = !dryRun && !external && isUnfinished(pendingPivot);
    if (resumingPivot) log(sink, 'info', `An unfinished pivot (phase ${pendingPivot.phase}) is resumed before anything else`);
    else if (pivotTo && external && !dryRun) log(sink, 'info', `The cluster is already managed by the cluster of ${external}: nothing to pivot`);
    const pivotTarget = dryRun || external ? undefined : resumingPivot ? (pivotTo ?? pendingPivot?.targetKubeconfig) : pivotTo;
    const provisioning = !resumingPivot && !dryRun;

    // What the manifests stage learns, for the stages after it.
    let config!: InstallConfig;
    let objects: KubeObject[] = [];
    let platform!: Platform;
    let owner!: DesiredSetOwner;
    let byStage!: StagedObjects;
    let preflightText = '';
    let kubeconfig = path.join(dir, 'auth', 'kubeconfig');
    const noProgressTimeoutMs = request.noProgressTimeoutMs;
    const timeout = noProgressTimeoutMs ? { noProgressTimeoutMs } : {};
    const client = () => controlPlane!.client;
    const applyRequest = () => ({ owner, sink, signal, prunableKinds: prunableKinds(platform) });
    const healthy = () => ({
      clusterName: config.metadata.name,
      namespace: config.metadata.namespace,
      expectedMachines: countMachines(objects),
      podNetwork: config.networking.cni !== 'none',
      sink,
      signal,
      ...timeout,
    });
    const hookContext = (name: string) => ({ stage: name, dir, kubeconfig: controlPlane!.kubeconfig, events: sink, signal });
    /** What the platform's hooks are given. */
    const platformHookContext = (hookSignal: AbortSignal = signal) => ({
      config,
      dir,
      kubeconfig: controlPlane!.kubeconfig,
      signal: hookSignal,
      log: (message: string) => log(sink, 'info', message),
      events: sink,
      ...timeout,
      // Served by the local control plane's forwarder; an existing management cluster serves none.
      ...(external ? {} : { nodeArtifacts: () => prepareNodeArtifactsFor({ dir, sink, signal }) }),
    });
    /**
     * A hook stage's bodies: the platform's hook, then the user's hooks of that stage; the
     * user's run once per install directory, the platform's (safe to call again by contract)
     * on every run (a later run may scale a pool onto hosts that have yet to register, or find
     * the control plane serving on new ports).
     */
    const hooks = (which: HookStage, name: string): HookStageBodies => ({
      run: async () => {
        await platform.hooks?.[which]?.(platformHookContext());
        await runUserHooks(userHooks(config, which), hookContext(name));
      },
      whenDone: async () => void (await platform.hooks?.[which]?.(platformHookContext())),
    });

    const situation: CreateClusterSituation = {
      dryRun,
      resumingPivot,
      pivot: pivotTarget === undefined ? 'none' : isSelfManaged(dir, pivotTarget) ? 'self' : 'kubeconfig',
      registerRancher: request.registerRancher !== undefined,
    };
    await stages.runAll(
      createClusterStages(situation, {
        manifests: readManifests,
        controlplane: attach,
        preflight: async () => void (preflightText = await preflight()),
        hooks,
        infrastructure: () => applyObjects(client(), byStage.infrastructure, applyRequest()),
        'wait-infrastructure': waitInfrastructure,
        'control-plane': () => applyObjects(client(), byStage.controlPlane, applyRequest()),
        workers: () => applyObjects(client(), byStage.workers, applyRequest(), { prune: true, all: objects }),
        'wait-cluster': waitCluster,
        'hand-off': async () => void (kubeconfig = await handOff(client(), dir, config.metadata.name, config.metadata.namespace, platform.lifecycle.stateKinds)),
        'management-install': () => installSelfManagement({ dir, config, lockHeld: true, sink, signal }),
        pivot: () => pivot(pivotTarget!),
        'wait-pivoted': () => waitPivoted(pivotTarget!),
        'register-rancher': registerRancher,
      }),
    );

    if (dryRun) {
      sink.emit({ type: 'result', kind: 'dry-run', text: `${preflightText}\n${objects.length} objects valid; nothing applied`, data: { objects: objects.map(describeRef) } });
      return { kubeconfig: '', managementKubeconfig: controlPlane!.kubeconfig, controlPlaneRunning: false, resumed, stages: stages.timings };
    }
    await journal.complete();
    if (pivotTarget) {
      const pivotedTo = path.resolve(pivotTarget);
      return { kubeconfig, managementKubeconfig: pivotedTo, controlPlaneRunning: false, resumed, stages: stages.timings, pivotedTo };
    }
    return { kubeconfig, managementKubeconfig: controlPlane!.kubeconfig, controlPlaneRunning: keepRunning, resumed, stages: stages.timings };

    /** manifests: generated if missing, user edits kept; conflicts stop here, before anything runs. */
    async function readManifests(): Promise<void> {
      const manifests = await createManifests({ dir, regenerate: [], keepEdits: false, sink: withoutResults(sink), signal });
      ({ config } = manifests);
      objects = manifests.manifests.files.flatMap((f) => f.objects as unknown as KubeObject[]);
      owner = manifests.manifests.generated.owner;
      byStage = partitionByStage(objects);
      platform = platformFor(config);
      // A dry-run changes nothing, so its control plane is temporary on every platform; an existing management cluster keeps nothing local running.
      keepRunning = platform.lifecycle.machinesInController && !dryRun && !external;
      credentialFiles = (installControlPlane(config, dir).credentials ?? []).map((c) => c.path);
    }

    /** controlplane: the target of a pivot checked first (a missing provider there is known now, not after the cluster is up), then the management cluster attached. */
    async function attach(): Promise<void> {
      if (provisioning && pivotTo && request.pivotTo !== selfTarget && !external) (await checkManagementCluster(pivotTo, infrastructureKinds(objects))).close();
      controlPlane = await attachManagement(managementOf());
    }

    /** The management cluster this install attaches, with the request's listen address winning over the config's. */
    function managementOf(): InstallManagement {
      return {
        dir,
        config,
        external,
        infrastructure: infrastructureKinds(objects),
        detached: keepRunning,
        ...(request.listenAddress ? { listenAddress: { address: request.listenAddress, flag: listenAddressFlag } } : {}),
        sink,
        signal,
      };
    }

    /** preflight: every object validated by the real CRDs and webhooks (a server-side dry run); returns the plan. */
    async function preflight(): Promise<string> {
      const { problems, planText } = await dryRunObjects(client(), objects, applyRequest());
      if (problems.length > 0) {
        throw new ConfigError(`${problems.length} manifest(s) were refused by the API server's validation`, problems, {
          hint: 'Fix the files named above in cluster-api/ (or regenerate them with `provisioner create manifests --regenerate <file>`), then run `provisioner create cluster` again.',
        });
      }
      return planText;
    }

    async function waitInfrastructure(): Promise<unknown> {
      const { name: clusterName, namespace } = config.metadata;
      const infrastructure = { apiVersion: platform.infrastructure.apiVersion, kind: platform.infrastructure.clusterKind };
      return waitFor(client(), {
        what: 'the infrastructure',
        kinds: [
          { apiVersion: capiCoreApiVersion, kind: 'Cluster', namespace },
          { ...infrastructure, namespace },
        ],
        evaluate: infrastructureReady(clusterName, infrastructure),
        onStall: (last, ms) => stallError('the infrastructure', last, ms, 'infrastructure'),
        events: sink,
        signal,
        fatal: controlPlane!.fatal,
        ...timeout,
      });
    }

    async function waitCluster(): Promise<unknown> {
      return withMachineFailures(platform, platformHookContext, controlPlane!.fatal, (fatal) => waitHealthy(client(), { ...healthy(), what: 'the control plane and nodes', fatal, settle: pivotTo ? 'conditions' : 'nodes' }), signal);
    }

    /**
     * pivot: the journaled move into `target` (pivot/from.ts), which stops the local control
     * plane before the target takes over when the machines live in its controllers; a temporary
     * control plane with nothing left to manage stops right after the move.
     */
    async function pivot(target: string): Promise<void> {
      const source = controlPlane!;
      const { machinesInController } = platform.lifecycle;
      const moved = await pivotFrom({ dir, toKubeconfig: target, source, machinesInController, sink, signal });
      if (moved.sourceStopped) controlPlane = undefined;
      else if (!machinesInController) {
        await source.stop();
        controlPlane = undefined;
      }
    }

    /** wait-pivoted: until the target reports the cluster healthy and the workload cluster's API answers with every node Ready. */
    async function waitPivoted(target: string): Promise<void> {
      const managed = KubeClient.fromFile(target);
      try {
        await waitHealthy(managed, { ...healthy(), what: `the cluster under its new management (${managed.server})` });
      } finally {
        managed.close();
      }
      log(sink, 'info', `The cluster is managed by ${path.resolve(target)} from now on; destroy cluster and wait-for use it`);
    }

    /** register-rancher: the hand-off to Rancher (resumable: Rancher's cluster is found by its labels). */
    async function registerRancher(): Promise<unknown> {
      const rancher = request.registerRancher!;
      return registerRancherLocked({ dir, rancherKubeconfig: rancher.kubeconfig, ...(rancher.strategy ? { strategy: rancher.strategy } : {}), sink, signal, ...timeout });
    }
  } catch (error) {
    if (shouldGather(error)) await gatherAfterFailure(dir, controlPlane?.client, sink, credentialFiles);
    throw error;
  } finally {
    // A control plane that manages simulated machines keeps running (detached) even on failure,
    // so a re-run resumes against the same in-memory state; a temporary one always stops.
    if (controlPlane && !keepRunning) await controlPlane.stop().catch((error: unknown) => log(sink, 'warn', `While stopping the local control plane: ${messageOf(error)}`));
    else controlPlane?.client.close();
    await lock.release();
  }
}

/** What decides which of `create cluster`'s stages a run has, all known before the first stage runs. */
export interface CreateClusterSituation {
  /** `--dry-run`: the manifests validated against the management cluster; nothing applied, nothing journaled. */
  dryRun: boolean;
  /** An unfinished move is resumed: the source may have let go of objects, so nothing is applied to it again. */
  resumingPivot: boolean;
  /** Where the cluster moves once healthy: into another cluster's kubeconfig, into itself, or nowhere. */
  pivot: 'none' | 'kubeconfig' | 'self';
  /** `--register-rancher`: hand the cluster to Rancher at the end. */
  registerRancher: boolean;
}

/** A hook stage's bodies: `run` the first time, `whenDone` on a later run once an earlier one finished it. */
export interface HookStageBodies {
  run: () => Promise<unknown>;
  whenDone: () => Promise<void>;
}

/** The body of each stage of `create cluster`, by stage name; `hooks` makes a hook stage's. */
export type CreateClusterBodies = Record<
  | 'manifests'
  | 'controlplane'
  | 'preflight'
  | 'infrastructure'
  | 'wait-infrastructure'
  | 'control-plane'
  | 'workers'
  | 'wait-cluster'
  | 'hand-off'
  | 'management-install'
  | 'pivot'
  | 'wait-pivoted'
  | 'register-rancher',
  () => Promise<unknown>
> & { hooks: (which: HookStage, name: string) => HookStageBodies };

/**
 * `create cluster`, in order: the one declared stage list. Every stage but the user's hooks
 * (`once`) runs again on a resume: applies and waits are idempotent. A resumed move runs the
 * move and nothing that applies to its source.
 */
export function createClusterStages(situation: CreateClusterSituation, body: CreateClusterBodies): Stage[] {
  const provisioning = !situation.resumingPivot && !situation.dryRun;
  const moving = situation.pivot !== 'none' && !situation.dryRun;
  const hookStage = (which: HookStage, name: string): Stage => ({ name: `hooks/${name}`, when: provisioning, once: true, ...body.hooks(which, name) });
  return [
    { name: 'manifests', run: body.manifests },
    { name: 'controlplane', run: body.controlplane },
    { name: 'preflight', when: !situation.resumingPivot, run: body.preflight },
    hookStage('preProvision', 'pre-provision'),
    { name: 'infrastructure', when: provisioning, run: body.infrastructure },
    { name: 'wait-infrastructure', when: provisioning, run: body['wait-infrastructure'] },
    hookStage('infraReady', 'infra-ready'),
    hookStage('bootstrapData', 'bootstrap-data'),
    { name: 'control-plane', when: provisioning, run: body['control-plane'] },
    { name: 'workers', when: provisioning, run: body.workers },
    { name: 'wait-cluster', when: provisioning, run: body['wait-cluster'] },
    hookStage('postProvision', 'post-provision'),
    { name: 'hand-off', when: provisioning, run: body['hand-off'] },
    { name: 'management-install', when: moving && situation.pivot === 'self', run: body['management-install'] },
    { name: 'pivot', when: moving, run: body.pivot },
    { name: 'wait-pivoted', when: moving, run: body['wait-pivoted'] },
    { name: 'register-rancher', when: situation.registerRancher && !situation.dryRun, run: body['register-rancher'] },
  ];
}

/**
 * Runs `wait` with `fatal` that also rejects when the platform's `machineFailures` hook
 * sees a machine fail for good; the hook is stopped when the wait ends.
 */
async function withMachineFailures<T>(
  platform: Platform,
  hookContext: (signal: AbortSignal) => PlatformHookContext,
  fatal: Promise<never>,
  wait: (fatal: Promise<never>) => Promise<T>,
  signal: AbortSignal,
): Promise<T> {
  const watch = platform.hooks?.machineFailures;
  if (!watch) return wait(fatal);
  const stop = new AbortController();
  const failures = watch(hookContext(AbortSignal.any([signal, stop.signal])));
  // Its rejection when stopped (an AbortError) is nobody's business.
  failures.catch(() => undefined);
  try {
    return await wait(Promise.race([fatal, failures]));
  } finally {
    stop.abort();
  }
}

/** Failures worth a log bundle: not bad input (nothing ran), not an interrupt, not a held lock. */
function shouldGather(error: unknown): boolean {
  return !(error instanceof ProvisionerError) || ['infrastructure', 'machines', 'hook', 'internal', 'external'].includes(error.exitCode);
}

/** The automatic `gather bootstrap` of a failed run; a failure to gather is reported, never hides the first error. */
async function gatherAfterFailure(dir: string, client: KubeClient | undefined, sink: EventSink, credentialFiles: readonly string[]): Promise<void> {
  try {
    const result = await gatherBundle({ dir, ...(client ? { client } : {}), events: sink, credentialFiles, notes: ['Gathered automatically after `create cluster` failed.'] });
    log(sink, 'error', `Log bundle for this failure: ${result.path}`, { bundle: result.path });
  } catch (error) {
    log(sink, 'warn', `Could not write a log bundle: ${messageOf(error)}; run \`provisioner gather bootstrap\``);
  }
}

/** The manifests step reports as a stage here; its own result line would be noise on stdout. */
function withoutResults(sink: EventSink): EventSink {
  return { emit: (event) => event.type !== 'result' && sink.emit(event) };
}

/** The hooks of one stage as the runtime runs them (exported for the test that holds the schema and the runtime to one duration parser). */
export function userHooks(config: InstallConfig, stage: 'preProvision' | 'infraReady' | 'bootstrapData' | 'postProvision'): UserHook[] {
  return (config.hooks?.[stage] ?? []).map((h) => ({ path: h.path, args: h.args, timeoutMs: durationToMs(h.timeout) }));
}

/** Infrastructure kinds the manifests use (the preflight of an existing management cluster checks they are served). */
function infrastructureKinds(objects: readonly KubeObject[]): { apiVersion: string; kind: string }[] {
  const seen = new Map<string, { apiVersion: string; kind: string }>();
  for (const o of objects) if (o.apiVersion.startsWith('infrastructure.')) seen.set(`${o.apiVersion}/${o.kind}`, { apiVersion: o.apiVersion, kind: o.kind });
  return [...seen.values()];
}

export interface StagedObjects {
  infrastructure: KubeObject[];
  controlPlane: KubeObject[];
  workers: KubeObject[];
}

/**
 * Splits the manifests by stage: infrastructure (namespace, Secrets, ConfigMaps, the
 * Cluster and the infrastructure cluster), control plane (the control-plane object and
 * the machine template it references), workers (everything else: templates and
 * MachineDeployments). User-added files fall into the stage their kind belongs to.
 *
 * A Cluster with `spec.topology` (the ClusterClass layout) makes its infrastructure
 * cluster, control plane and MachineDeployments itself, all at once, from its class: the
 * ClusterClass and every template go with it into the infrastructure stage, and the
 * control-plane and workers stages have nothing of theirs to apply.
 */
export function partitionByStage(objects: readonly KubeObject[]): StagedObjects {
  const group = (o: KubeObject) => o.apiVersion.split('/')[0] ?? '';
  const classBased = objects.some((o) => topologyOf(o) !== undefined);
  const classObject = (o: KubeObject) => classBased && (o.kind === 'ClusterClass' || o.kind.endsWith('Template'));
  const controlPlanes = objects.filter((o) => group(o).startsWith('controlplane.'));
  const cpTemplates = new Set(
    controlPlanes.map((o) => (o.spec as { machineTemplate?: { spec?: { infrastructureRef?: { name?: string } } } } | undefined)?.machineTemplate?.spec?.infrastructureRef?.name).filter(Boolean),
  );
  const staged: StagedObjects = { infrastructure: [], controlPlane: [], workers: [] };
  for (const obj of objects) {
    const g = group(obj);
    if (['Namespace', 'Secret', 'ConfigMap', 'Cluster'].includes(obj.kind) || (g.startsWith('infrastructure.') && !obj.kind.endsWith('Template')) || classObject(obj)) staged.infrastructure.push(obj);
    else if (g.startsWith('controlplane.') || (g.startsWith('infrastructure.') && cpTemplates.has(obj.metadata.name))) staged.controlPlane.push(obj);
    else staged.workers.push(obj);
  }
  return staged;
}
