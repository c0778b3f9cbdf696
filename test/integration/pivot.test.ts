/**
 * `pivot` between two REAL local control planes (etcd, kube-apiserver, every bundled
 * provider) booted from the bundle in temp dirs: the source plays the install's local
 * control plane, the target a lasting management cluster. Each test seeds its own cluster
 * (Cluster, DevCluster, KubeadmControlPlane, DevMachineTemplates, KubeadmConfigTemplate,
 * MachineDeployment from the in-memory golden manifests, plus a `<name>-kubeconfig`
 * Secret owned by the Cluster) with spec.paused false, and moves it with --cluster:
 * a straight move, an interrupt right after each phase of the journal in turn then resumed,
 * failures injected after a phase then resumed or rolled back. Between moves the fenced
 * source's controllers start again in place; the first test starts it whole from its data.
 * Fails (never skips) when the bundle has not been built: run `npm run bundle` first.
 */
import { access, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { controlPlaneStatus, type LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import { ExternalError, InterruptedError } from '../../src/errors.js';
import { RecordingSink } from '../support/recording-sink.js';
import type { ProvisionerEvent } from '../../src/events.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { handOverAgents } from '../../src/pivot/agents.js';
import { contentDifference } from '../../src/pivot/graph.js';
import { sourceUidAnnotation } from '../../src/pivot/move.js';
import { pivotJournalPath, pivotPhases, readPivotJournal, type PivotPhase } from '../../src/pivot/journal.js';
import { storageKey, storedKeys } from '../../src/controlplane/etcd-storage.js';
import { attachedFrom, prepareLocalControlPlane } from '../../src/management/attach.js';
import { allControllers } from '../../src/platforms/index.js';
import { issueRegistrationCommand } from '../../src/agent/registration.js';
import { pivotFrom, type PivotRequest } from '../../src/pivot/from.js';
import { checkMoved, retriedWrite, seedCluster, setClusterPaused } from '../support/move-fixtures.js';
import { removeInstallDir, waitFor } from './support/controlplane.js';
import { runTempDir } from '../support/run-dirs.js';

/** The CLI from its sources (no build step): `node --import tsx src/main.ts ...`. */
function cli(args: string[]) {
  return execa(process.execPath, ['--import', 'tsx', path.join(packageRoot, 'src', 'main.ts'), ...args], { cwd: packageRoot, reject: false, timeout: 300_000 });
}

const goldenDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../fixtures/golden/inmemory/default/cluster-api');

/** The golden in-memory manifests renamed to `name` (namespace too), one replica each; plus the owned kubeconfig Secret. */
async function seed(client: KubeClient, name: string): Promise<KubeObject[]> {
  const files = (await readdir(goldenDir)).filter((f) => f.endsWith('.yaml')).sort();
  const objects: KubeObject[] = [];
  for (const file of files) {
    const text = (await readFile(path.join(goldenDir, file), 'utf8')).replaceAll('demo', name).replace(/replicas: \d+/g, 'replicas: 1');
    for (const doc of parseAllDocuments(text)) objects.push(doc.toJS() as KubeObject);
  }
  for (const obj of objects) await retriedWrite(() => client.apply(obj));
  const cluster = await getObject(client, objects.find((o) => o.kind === 'Cluster')!);
  expect((cluster!['spec'] as { paused?: boolean }).paused ?? false).toBe(false);
  await retriedWrite(() => client.apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: `${name}-kubeconfig`,
      namespace: name,
      labels: { 'cluster.x-k8s.io/cluster-name': name },
      ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', name, uid: cluster!.metadata.uid!, controller: true }],
    },
    type: 'cluster.x-k8s.io/secret',
    data: { value: Buffer.from('apiVersion: v1\nkind: Config\n').toString('base64') },
  }));
  // Let the source's controllers reconcile it (status, finalizers, the endpoint the
  // in-memory DevCluster writes into its own spec, KubeadmControlPlane adopting the
  // kubeconfig Secret), as a real cluster would have: a write still in flight when the move
  // pauses the cluster makes the snapshot differ from what the move copies, through no
  // fault of the move (seen in CI runs).
  const devCluster = objects.find((o) => o.kind === 'DevCluster')!;
  const kubeconfig = { apiVersion: 'v1', kind: 'Secret', metadata: { name: `${name}-kubeconfig`, namespace: name } } as KubeObject;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const live = await getObject(client, cluster!);
    const infra = await getObject(client, devCluster);
    const secret = await getObject(client, kubeconfig);
    const endpoint = (infra?.['spec'] as { controlPlaneEndpoint?: { host?: string } } | undefined)?.controlPlaneEndpoint?.host;
    const adopted = secret?.metadata.ownerReferences?.some((r) => r.kind === 'KubeadmControlPlane') ?? false;
    if ((live?.['status'] as { phase?: string } | undefined)?.phase && endpoint && adopted) break;
    if (Date.now() > deadline) throw new Error(`Cluster ${name} not reconciled within 60 s: status phase, DevCluster endpoint, kubeconfig Secret adopted by KubeadmControlPlane = ${Boolean(live?.['status'])}, ${Boolean(endpoint)}, ${adopted}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  return objects.filter((o) => o.kind !== 'Namespace').concat([{ apiVersion: 'v1', kind: 'Secret', metadata: { name: `${name}-kubeconfig`, namespace: name } }]);
}

/** The seeded objects as `client` has them now, by `Kind/name`. */
async function snapshotOf(client: KubeClient, seeded: KubeObject[]): Promise<Map<string, KubeObject>> {
  const map = new Map<string, KubeObject>();
  for (const o of seeded) {
    const live = await getObject(client, o);
    if (live) map.set(`${live.kind}/${live.metadata.name}`, live);
  }
  return map;
}

function getObject(client: KubeClient, o: KubeObject): Promise<KubeObject | undefined> {
  return client.get<KubeObject>({ apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.metadata.name, namespace: o.metadata.namespace! } });
}

/**
 * Records like any sink and says on stderr when a source process exits unasked (its supervisor
 * restarts it, and our writes retry the refused webhook meanwhile), with its log's tail: a CI
 * log then shows why a webhook went away, after the run's temp dirs are gone.
 */
class SourceSink extends RecordingSink {
  override emit(event: ProvisionerEvent): void {
    super.emit(event);
    if (event.type === 'process' && (event.state === 'exited' || event.state === 'restarting' || event.state === 'failed')) {
      console.warn(`source ${event.name} ${event.state}: ${event.message ?? ''} (exit ${event.exitCode ?? event.signal ?? '?'})\n${(event.logTail ?? []).join('\n')}`);
    }
  }
}

describe('pivot between two real control planes', () => {
  let sourceDir: string;
  let targetDir: string;
  let source: LocalControlPlane;
  let target: LocalControlPlane;
  const abort = new AbortController();
  /**
   * The source as an install's local control plane runs its platform's controllers, not every
   * bundled provider as the lasting target does: capi-manager (Cluster API's core, kubeadm and
   * in-memory providers, whose kinds the seeded clusters use) and our agent manager (Host and
   * NodePlan move too). Each move fences the source and the next test starts it again: about
   * half the time of a start with every provider (14.5 against 29 s on this machine).
   */
  const sourceControllers = allControllers().filter((c) => c.binary === 'capi-manager');
  const sourceRequest = () => ({ dir: sourceDir, detached: false, sink: new SourceSink(), signal: abort.signal, controllers: sourceControllers });

  beforeAll(async () => {
    sourceDir = await runTempDir('pivot-src');
    targetDir = await runTempDir('pivot-dst');
    source = await prepareLocalControlPlane(sourceRequest());
    await source.start();
    target = await prepareLocalControlPlane({ dir: targetDir, detached: false, sink: new RecordingSink(), signal: abort.signal });
    await target.start();
  });

  afterAll(async () => {
    await source?.stop();
    await target?.stop();
    abort.abort();
    for (const dir of [sourceDir, targetDir]) if (dir) await rm(dir, { recursive: true, force: true });
  });

  /**
   * The target's copies as the move left them, read when `source-deleted` is journaled, the
   * last phase before the target's Cluster is unpaused: once unpaused, the target's own
   * controllers may write (an endpoint, a label, an adopting owner such as KubeadmControlPlane
   * on the kubeconfig Secret) what the source's had not yet written when it was paused, which
   * says nothing about the copy.
   */
  const targetBeforeUnpause = new Map<string, Map<string, KubeObject>>();
  const seededByCluster = new Map<string, KubeObject[]>();

  /**
   * The source with its controllers running. A move fences it (stops its controllers); the
   * next seed or resume starts them again in place (`startControllers`: etcd and the API server
   * kept running, 1-2 s), or, `whole`, stops it and starts it whole from its data, as the next
   * command would find it (about 14.5 s: the API server's boot and the CRDs' install).
   */
  let fenced = false;
  async function sourceWithControllers({ whole = false }: { whole?: boolean } = {}): Promise<LocalControlPlane> {
    if (fenced && whole) {
      await source.stop();
      source = await prepareLocalControlPlane(sourceRequest());
      await source.start();
    } else if (fenced) {
      await source.startControllers();
    }
    fenced = false;
    return source;
  }

  /** Seeds a cluster in the source and remembers its objects for the target's snapshot. */
  async function seedSource(name: string): Promise<KubeObject[]> {
    const seeded = await seed((await sourceWithControllers()).kube, name);
    seededByCluster.set(name, seeded);
    return seeded;
  }

  /** One `provisioner pivot --cluster` (the move of services/pivot.ts, as `create cluster --pivot-to` runs it), from the source as a new command finds it. */
  const run = async (clusterName: string, extra: Partial<PivotRequest> = {}) => {
    const attached = attachedFrom(await sourceWithControllers());
    const fence = attached.fence!;
    return pivotFrom({
      source: {
        ...attached,
        fence: {
          ...fence,
          stopControllers: async () => {
            fenced = true;
            await fence.stopControllers();
          },
        },
      },
      machinesInController: false,
      dir: sourceDir,
      toKubeconfig: target.kubeconfig,
      clusterName,
      sink: new RecordingSink(),
      signal: abort.signal,
      ...extra,
      afterPhase: async (phase) => {
        const seeded = seededByCluster.get(clusterName);
        if (phase === 'source-deleted' && seeded) targetBeforeUnpause.set(clusterName, await snapshotOf(target.kube, seeded));
        await extra.afterPhase?.(phase);
      },
    });
  };

  /** Every journal object is in the target (once, with its content and remapped owners) and gone from the source. */
  async function expectMoved(name: string, seeded: KubeObject[], sourceCopies: Map<string, KubeObject>): Promise<void> {
    const journal = await readPivotJournal(sourceDir);
    expect(journal?.phase).toBe('done');
    const uidMap = new Map(journal!.objects.map((o) => [o.sourceUid, o.targetUid]));
    for (const seededObj of seeded) expect(journal!.objects.some((o) => o.kind === seededObj.kind && o.name === seededObj.metadata.name), `${seededObj.kind} ${seededObj.metadata.name} in the journal`).toBe(true);
    for (const entry of journal!.objects.filter((o) => !o.global)) {
      const ref = { apiVersion: entry.apiVersion, kind: entry.kind, metadata: { name: entry.name, namespace: entry.namespace! } } as KubeObject;
      const moved = await getObject(target.kube, ref);
      expect(moved, `${entry.kind} ${entry.name} in the target`).toBeDefined();
      expect(moved!.metadata.uid).toBe(entry.targetUid);
      expect(await getObject(source.kube, ref), `${entry.kind} ${entry.name} left in the source`).toBeUndefined();
      const before = sourceCopies.get(`${entry.kind}/${entry.name}`);
      if (before) {
        const copied = targetBeforeUnpause.get(name)?.get(`${entry.kind}/${entry.name}`) ?? moved!;
        expect(contentDifference(before, copied, entry.kind === 'Cluster'), `${entry.kind} ${entry.name}: the first field that differs`).toBeUndefined();
        const expectedOwners = (before.metadata.ownerReferences ?? []).map((r) => uidMap.get(r.uid)).sort();
        expect((copied.metadata.ownerReferences ?? []).map((r) => r.uid).sort(), `${entry.kind} ${entry.name}: owners`).toEqual(expectedOwners);
      }
    }
    // No duplicates: every copy in the target (an object carrying a source UID) is a moved object
    // of the journal. Nothing lost is the check above (each one there, with its recorded UID):
    // once unpaused, the target's own controllers may rewrite a copy's annotations (the
    // bootstrap data Secrets', seen after an interrupt right after `source-deleted`), or create
    // objects of these kinds (KubeadmControlPlane writes Secrets), which carry no source UID.
    for (const kind of new Set(seeded.map((o) => `${o.apiVersion}|${o.kind}`))) {
      const [apiVersion, k] = kind.split('|') as [string, string];
      const inTarget = (await target.kube.list<KubeObject>(apiVersion, k, { namespace: name })).filter((o) => o.metadata.annotations?.[sourceUidAnnotation]);
      const inJournal = new Set(journal!.objects.filter((o) => o.kind === k && o.namespace === name).map((o) => o.name));
      expect(inTarget.map((o) => o.metadata.name).filter((copy) => !inJournal.has(copy)), `${k} copies the journal does not record`).toEqual([]);
    }
    const cluster = await target.kube.get<KubeObject>({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace: name } });
    expect((cluster!['spec'] as { paused?: boolean }).paused ?? false).toBe(false);
    expect(cluster!.metadata.ownerReferences ?? []).toEqual([]);
  }

  /** The seeded objects as they are in the source now (for the content comparison after the move). */
  function snapshot(seeded: KubeObject[]): Promise<Map<string, KubeObject>> {
    return snapshotOf(source.kube, seeded);
  }

  it('moves a cluster: every object in the target with equal spec and remapped owners, none left in the source, unpaused', async () => {
    const seeded = await seedSource('move-a');
    const dry = await run('move-a', { dryRun: true });
    expect(dry.action).toBe('planned');
    expect(dry.kinds.map((k) => k.kind)).toEqual(expect.arrayContaining(['Cluster', 'DevCluster', 'KubeadmControlPlane', 'DevMachineTemplate', 'MachineDeployment', 'Secret']));
    expect(await readPivotJournal(sourceDir)).toBeUndefined(); // a dry run writes nothing
    // The content the move copies is the paused source's: snapshot it right after the pause.
    let paused = new Map<string, KubeObject>();
    let runningWhilePaused: string[] = [];
    const result = await run('move-a', {
      afterPhase: async (phase) => {
        if (phase !== 'paused') return;
        paused = await snapshot(seeded);
        runningWhilePaused = (await controlPlaneStatus(sourceDir)).processes.filter((p) => p.running).map((p) => p.name);
      },
    });
    expect(result.action).toBe('moved');
    expect(paused.size).toBe(seeded.length);
    // The fence: from the pause on, the source runs no controller, so nothing there acts on the objects in flight.
    expect(runningWhilePaused.sort()).toEqual(['etcd', 'kube-apiserver']);
    await expectMoved('move-a', seeded, paused);
    // ... and the moved objects are gone from the source's storage itself: started again whole, with
    // every controller, the old source has nothing of the cluster left to reconcile, ever.
    const journal = (await readPivotJournal(sourceDir))!;
    const movedKeys = await Promise.all(
      journal.objects.filter((o) => !o.global).map(async (o) => {
        const resource = await target.kube.resource(o.apiVersion, o.kind);
        return storageKey({ group: o.apiVersion.includes('/') ? o.apiVersion.split('/')[0]! : '', resource: resource.name, ...(resource.namespaced ? { namespace: o.namespace! } : {}), name: o.name });
      }),
    );
    expect(movedKeys).toContain('/registry/cluster.x-k8s.io/clusters/move-a/move-a');
    const restarted = await sourceWithControllers({ whole: true });
    expect((await controlPlaneStatus(sourceDir)).usable).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 5_000)); // its controllers' first reconcile of whatever they find
    expect((await storedKeys(sourceDir, '/registry/')).filter((k) => movedKeys.includes(k))).toEqual([]);
    expect((await restarted.kube.list<KubeObject>('cluster.x-k8s.io/v1beta2', 'Cluster', { namespace: 'move-a' })).map((c) => c.metadata.name)).toEqual([]);
    const secret = await target.kube.get<KubeObject>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'move-a-kubeconfig', namespace: 'move-a' } });
    const cluster = await target.kube.get<KubeObject>({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'move-a', namespace: 'move-a' } });
    // Copied with its owner remapped to the target's Cluster; once unpaused, the target's
    // KubeadmControlPlane controller adopts the kubeconfig Secret (CAPI replaces the Cluster
    // owner with itself), so either target owner is right. A source UID never is.
    const [controlPlane] = await target.kube.list<KubeObject>('controlplane.cluster.x-k8s.io/v1beta2', 'KubeadmControlPlane', { namespace: 'move-a' });
    const owners = secret!.metadata.ownerReferences?.map((r) => r.uid) ?? [];
    expect(owners).toHaveLength(1);
    expect([cluster!.metadata.uid, controlPlane!.metadata.uid]).toContain(owners[0]);
    expect((secret!['data'] as Record<string, string>)['value']).toBe(Buffer.from('apiVersion: v1\nkind: Config\n').toString('base64'));
  });

  it('resumes after a failure injected after `copied`: no object lost or duplicated; status copied only where no controller rebuilds it', async () => {
    const seeded = await seedSource('move-b');
    // A kind outside Cluster API's contract (our agent provider's cluster-scoped Host): its status records what nothing rebuilds.
    // Claimed by the moving cluster (its label), so it moves; an unclaimed Host stays in the source, not copied.
    const hostRef = { apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name: 'move-b-host' } };
    const host = await source.kube.apply({ ...hostRef, metadata: { ...hostRef.metadata, labels: { 'cluster.x-k8s.io/cluster-name': 'move-b' } }, spec: { address: '127.0.0.2', roles: ['worker'] } });
    const freeRef = { apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name: 'move-b-free' } };
    await source.kube.apply({ ...freeRef, spec: { address: '127.0.0.3' } });
    await source.kube.applyStatus({ ...host, status: { planNamespace: 'host-move-b-host', serviceAccount: 'agent', registration: 'move-b-host', agentVersion: 'v0.0.0-test' } });
    const injected = new Error('injected after copied');
    await expect(run('move-b', { afterPhase: (phase) => { if (phase === 'copied') throw injected; } })).rejects.toBeInstanceOf(ExternalError);
    const journal = await readPivotJournal(sourceDir);
    expect(journal?.phase).toBe('copied');
    expect(journal?.lastError).toContain('injected');
    // The source is paused and still holds everything: snapshot it for the content check.
    const before = await snapshot(seeded);
    expect(((before.get('Cluster/move-b')!['spec']) as { paused?: boolean }).paused).toBe(true);
    // Cluster API kinds: no status copied, as with clusterctl move (their controllers rebuild it; the paused copy has none yet).
    const sourceStatus = before.get('Cluster/move-b')!['status'] as { phase?: string; conditions?: unknown[] } | undefined;
    const copy = await target.kube.get<KubeObject>({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'move-b', namespace: 'move-b' } });
    expect(sourceStatus?.phase).toBeDefined();
    expect((copy!['status'] as { phase?: string } | undefined)?.phase).toBeUndefined();
    // Any other kind keeps it, through the status subresource.
    const hostCopy = await target.kube.get<KubeObject>(hostRef);
    expect(hostCopy?.['status']).toMatchObject({ planNamespace: 'host-move-b-host', serviceAccount: 'agent', registration: 'move-b-host', agentVersion: 'v0.0.0-test' });
    expect(await target.kube.get<KubeObject>(freeRef)).toBeUndefined();
    const result = await run('move-b');
    expect(result.action).toBe('moved');
    expect(result.resumedFrom).toBe('copied');
    await expectMoved('move-b', seeded, before);
    expect(await source.kube.get<KubeObject>(hostRef), 'the claimed Host moved').toBeUndefined();
    expect(await source.kube.get<KubeObject>(freeRef), 'the unclaimed Host stays').toBeDefined();
    expect(await target.kube.get<KubeObject>(freeRef)).toBeUndefined();
  });

  it('moves a cluster\'s Host and its plans, and the host\'s real agent follows to the target with a fresh credential while the source revokes the old one; a day-2 plan applied in the target runs', async () => {
    const name = 'move-agent';
    const hostName = 'agent-h0';
    const seeded = await seedSource(name);
    const agentBin = (await ensureBinaries(['provisioner-agent']))['provisioner-agent']!;
    const work = await runTempDir('pivot-agent');
    const dataDir = path.join(work, 'data');
    const command = await issueRegistrationCommand(source.kube, { dir: sourceDir, signal: abort.signal });
    const register = await execa(agentBin, ['register', '--server', command.server, '--ca-checksum', command.caChecksum, '--host-name', hostName, '--data-dir', dataDir], {
      env: { PROVISIONER_AGENT_TOKEN: command.token },
      reject: false,
    });
    expect(register.exitCode, register.stderr).toBe(0);
    const agent = execa(agentBin, ['run', '--data-dir', dataDir, '--lock-file', path.join(work, 'plan.lock'), '--heartbeat-interval', '1s'], { reject: false, all: true });
    const hostRef = { apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name: hostName } };
    const planRef = (planName: string) => ({ apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'NodePlan', metadata: { name: planName, namespace: `host-${hostName}` } });
    const plan = (planName: string, file: string) => ({ ...planRef(planName), metadata: { ...planRef(planName).metadata, labels: { 'agent.provisioner.dev/host': hostName } }, spec: { files: [{ path: file, content: `${planName}\n` }] } });
    const applied = (client: KubeClient, planName: string) =>
      waitFor(`plan ${planName} Applied`, async () => ((await client.get<KubeObject>(planRef(planName)))?.['status'] as { phase?: string } | undefined)?.phase === 'Applied', 60_000);
    try {
      // Claimed by the cluster (the label an infrastructure provider's claim sets), with a plan it ran.
      await source.kube.mergePatch(hostRef as KubeObject, { metadata: { labels: { 'cluster.x-k8s.io/cluster-name': name } } });
      await source.kube.apply(plan('before', path.join(work, 'before')));
      await applied(source.kube, 'before');
      // Its second generation, Applied too; the file then removed, so a run of it after the move would show.
      const second = plan('before', path.join(work, 'before'));
      await source.kube.apply({ ...second, spec: { files: [{ path: path.join(work, 'before'), content: 'before, second generation\n' }] } });
      await waitFor('plan before Applied at generation 2', async () => {
        const live = await source.kube.get<KubeObject>(planRef('before'));
        return live?.metadata.generation === 2 && (live['status'] as { phase?: string; observedGeneration?: number } | undefined)?.observedGeneration === 2 && (live['status'] as { phase?: string }).phase === 'Applied';
      }, 60_000);
      expect(await readFile(path.join(work, 'before'), 'utf8')).toBe('before, second generation\n');
      await rm(path.join(work, 'before'));
      await waitFor('a heartbeat in the source', async () => ((await source.kube.get<KubeObject>(hostRef))?.['status'] as { lastHeartbeatTime?: string } | undefined)?.lastHeartbeatTime, 30_000);
      const oldToken = (await readFile(path.join(dataDir, 'token'), 'utf8')).trim();

      // A crash after the agent switched but before the journal said `agents-followed` (the hand-over run by hand
      // on a move stopped at `verified`): the rollback withdraws the hand-over, sees the agent gone to the target and refuses.
      const started = performance.now();
      await expect(run(name, { afterPhase: (at) => { if (at === 'verified') throw new Error('injected after verified'); } })).rejects.toBeInstanceOf(ExternalError);
      const verified = await readPivotJournal(sourceDir);
      expect(verified?.phase).toBe('verified');
      await handOverAgents({ source: source.kube, target: target.kube, journal: verified!, sink: new RecordingSink(), signal: abort.signal });
      expect((await readPivotJournal(sourceDir))?.phase, 'the journal still says verified').toBe('verified');
      await expect(run(name, { rollback: true })).rejects.toThrow(`The agents of 1 host(s) already follow the target (${hostName}); the move cannot be rolled back`);
      expect(await source.kube.get<KubeObject>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'agent-handover', namespace: `host-${hostName}` } }), 'the hand-over is withdrawn').toBeUndefined();
      expect(await target.kube.get<KubeObject>(hostRef), 'the refused rollback deleted nothing').toBeDefined();

      // A crash right after the hand-over is journaled: no rollback any more (the agent works for the target), a resume finishes.
      await expect(run(name, { afterPhase: (at) => { if (at === 'agents-followed') throw new Error('injected after agents-followed'); } })).rejects.toBeInstanceOf(ExternalError);
      expect((await readPivotJournal(sourceDir))?.phase).toBe('agents-followed');
      await expect(run(name, { rollback: true })).rejects.toThrow(/handed the hosts' agents over to the target/);
      const result = await run(name);
      expect(result.action).toBe('moved');
      expect(result.resumedFrom).toBe('agents-followed');
      const journal = await readPivotJournal(sourceDir);
      expect(journal!.objects.filter((o) => o.kind === 'Host' || o.kind === 'NodePlan').map((o) => `${o.kind}/${o.name}`).sort()).toEqual(['Host/agent-h0', 'NodePlan/before']);
      await expectMoved(name, seeded, new Map());
      console.log(`pivot with one host agent handed over: ${Math.round(performance.now() - started)} ms`);

      // In the target: the Host (claim label, registered with the follow token, reporting) and its plan's history.
      const moved = await target.kube.get<KubeObject>(hostRef);
      expect(moved!.metadata.labels?.['cluster.x-k8s.io/cluster-name']).toBe(name);
      expect(moved!['status']).toMatchObject({ registration: `follow-${hostName}` });
      expect(((await target.kube.get<KubeObject>(planRef('before')))!['status'] as { phase?: string }).phase).toBe('Applied');
      expect(await source.kube.get<KubeObject>(hostRef)).toBeUndefined();
      expect(await source.kube.get<KubeObject>(planRef('before'))).toBeUndefined();

      // The agent's stored credential names the target; the old one is refused by the source.
      const credential = JSON.parse(await readFile(path.join(dataDir, 'credential.json'), 'utf8')) as { server: string; host: string };
      expect(credential).toMatchObject({ server: target.kube.server, host: hostName });
      const newToken = (await readFile(path.join(dataDir, 'token'), 'utf8')).trim();
      expect(newToken).not.toBe(oldToken);
      const status = (token: string, server: string) =>
        execa('curl', ['-sk', '-o', '/dev/null', '-w', '%{http_code}', '-H', `Authorization: Bearer ${token}`, `${server.replace(/\/$/, '')}/apis/agent.provisioner.dev/v1alpha1/hosts/${hostName}`]).then((r) => r.stdout);
      // Its RBAC is gone at once (403); the token itself once the API server's authentication cache (10 s) forgets it.
      await waitFor('the old token refused by the source (401)', async () => (await status(oldToken, source.kube.server)) === '401', 30_000);
      expect(await status(newToken, target.kube.server)).toBe('200');
      expect(await status(newToken, source.kube.server)).toBe('401');

      // A day-2 plan applied in the new manager runs on the host.
      await target.kube.apply(plan('day-2', path.join(work, 'day-2')));
      await applied(target.kube, 'day-2');
      expect(await readFile(path.join(work, 'day-2'), 'utf8')).toBe('day-2\n');
      // The moved plan, Applied at its source generation, is current at its copy's (1) and was not run again.
      const movedPlan = await target.kube.get<KubeObject>(planRef('before'));
      expect(movedPlan!.metadata.generation).toBe(1);
      expect(movedPlan!['status']).toMatchObject({ phase: 'Applied', observedGeneration: 1 });
      await expect(access(path.join(work, 'before')), 'the moved plan ran again on the host').rejects.toThrow();
      expect(agent.exitCode, 'the agent kept running').toBeNull();
    } finally {
      agent.kill('SIGTERM');
      const ended = await agent;
      expect(ended.all ?? '', 'the agent logged no token').not.toMatch(/eyJ[\w-]+\.eyJ/);
      await rm(work, { recursive: true, force: true });
    }
  });

  it('rolls back after a failure injected after `copied`: source unpaused, target without the objects', async () => {
    const seeded = await seedSource('move-c');
    await expect(run('move-c', { afterPhase: (phase) => { if (phase === 'copied') throw new Error('injected'); } })).rejects.toBeInstanceOf(ExternalError);
    const journal = await readPivotJournal(sourceDir);
    expect(journal?.objects.filter((o) => o.targetUid).length).toBeGreaterThanOrEqual(seeded.length);
    const result = await run('move-c', { rollback: true });
    expect(result.action).toBe('rolled-back');
    expect(result.rolledBackObjects).toBe(journal!.objects.length);
    const cluster = await getObject(source.kube, seeded.find((o) => o.kind === 'Cluster')!);
    expect((cluster!['spec'] as { paused?: boolean }).paused ?? false).toBe(false);
    for (const entry of journal!.objects) {
      const ref = { apiVersion: entry.apiVersion, kind: entry.kind, metadata: { name: entry.name, namespace: entry.namespace! } } as KubeObject;
      expect(await getObject(target.kube, ref), `${entry.kind} ${entry.name} left in the target`).toBeUndefined();
      expect(await getObject(source.kube, ref), `${entry.kind} ${entry.name} still in the source`).toBeDefined();
    }
    // A rolled-back journal is history: running again starts a fresh move, which succeeds.
    const again = await run('move-c');
    expect(again.action).toBe('moved');
    await expectMoved('move-c', seeded, new Map());
  });

  // An interrupt (what SIGINT does to the CLI) right after each phase is journaled, every phase
  // in turn, so none is left to chance: the run stops with the journal at that phase, and running
  // again finishes the move with no object lost or duplicated. A new phase is covered as soon as
  // pivotPhases lists it; after `done` there is nothing left to interrupt.
  for (const [i, phase] of pivotPhases.filter((p) => p !== 'done').entries()) {
    it(`resumes after an interrupt right after \`${phase}\`: no object lost or duplicated`, async () => {
      const name = `resume-${i}`;
      const seeded = await seedSource(name);
      // The content the move copies is the paused source's; interrupted at `planned`, the resume pauses it.
      let paused = new Map<string, KubeObject>();
      const snapshotWhenPaused = async (at: PivotPhase) => {
        if (at === 'paused') paused = await snapshot(seeded);
      };
      const interrupt = new AbortController();
      const interrupted = run(name, {
        signal: interrupt.signal,
        afterPhase: async (at) => {
          await snapshotWhenPaused(at);
          if (at === phase) interrupt.abort();
        },
      });
      await expect(interrupted).rejects.toBeInstanceOf(InterruptedError);
      expect((await readPivotJournal(sourceDir))?.phase).toBe(phase);
      const result = await run(name, { afterPhase: snapshotWhenPaused });
      expect(result.action).toBe('moved');
      expect(result.resumedFrom).toBe(phase);
      expect(paused.size).toBe(seeded.length);
      await expectMoved(name, seeded, paused);
    });
  }

  it('resumes a crash between a create in the target and its journal record: the copy is recognised by its source UID, not duplicated', async () => {
    const seeded = await seedSource('move-e');
    await expect(run('move-e', { afterPhase: (phase) => { if (phase === 'copied') throw new Error('injected'); } })).rejects.toBeInstanceOf(ExternalError);
    // As if the process died after the target accepted these creates but before the journal said so.
    const journal = (await readPivotJournal(sourceDir))!;
    const forgotten = journal.objects.filter((o) => !o.global).slice(0, 3);
    for (const o of forgotten) delete o.targetUid;
    journal.phase = 'paused';
    await writeFile(pivotJournalPath(sourceDir), JSON.stringify(journal, null, 2));
    const before = await snapshot(seeded);
    const result = await run('move-e');
    expect(result.action).toBe('moved');
    expect(result.resumedFrom).toBe('paused');
    await expectMoved('move-e', seeded, before);
  });

  it('rolls back after a failure injected after `paused` and after `verified`; refuses once the source was deleted', async () => {
    for (const [name, phase] of [['move-f', 'paused'], ['move-g', 'verified']] as const) {
      const seeded = await seedSource(name);
      await expect(run(name, { afterPhase: (at) => { if (at === phase) throw new Error('injected'); } })).rejects.toBeInstanceOf(ExternalError);
      const result = await run(name, { rollback: true });
      expect(result.action).toBe('rolled-back');
      const cluster = await getObject(source.kube, seeded.find((o) => o.kind === 'Cluster')!);
      expect((cluster!['spec'] as { paused?: boolean }).paused ?? false, `${name} unpaused`).toBe(false);
      for (const o of seeded) {
        expect(await getObject(target.kube, o), `${o.kind} ${o.metadata.name} left in the target`).toBeUndefined();
        expect(await getObject(source.kube, o), `${o.kind} ${o.metadata.name} still in the source`).toBeDefined();
      }
    }
    const seeded = await seedSource('move-h');
    await expect(run('move-h', { afterPhase: (at) => { if (at === 'source-deleted') throw new Error('injected'); } })).rejects.toBeInstanceOf(ExternalError);
    await expect(run('move-h', { rollback: true })).rejects.toThrow(/cannot be rolled back/);
    const result = await run('move-h');
    expect(result.action).toBe('moved');
    await expectMoved('move-h', seeded, new Map());
  });

  it('interoperates: the bundled `clusterctl move` moves a cluster from our local control plane into another, whole, owners remapped', async () => {
    const clusterctl = (await ensureBinaries(['clusterctl'])).clusterctl!;
    const seeded = await seedCluster(source.kube, 'ctl-move', { controlPlane: 3, workers: 2 });
    // clusterctl refuses a paused Cluster; the seeded status is what it checks before it moves.
    await setClusterPaused(source.kube, seeded, false);
    const move = await execa(clusterctl, ['move', '--kubeconfig', source.kubeconfig, '--to-kubeconfig', target.kubeconfig, '-n', seeded.namespace], {
      reject: false,
      timeout: 300_000,
      env: { CLUSTERCTL_DISABLE_VERSIONCHECK: 'true', HOME: sourceDir },
    });
    expect(move.exitCode, `${move.stdout}\n${move.stderr}`).toBe(0);
    const result = await checkMoved(source.kube, target.kube, seeded);
    expect(result.problems).toEqual([]);
    expect(result.moved).toBe(seeded.objects.length);
    await setClusterPaused(target.kube, seeded, true); // keep the target's controllers off it
  });

  it('through the CLI, from an in-memory install\'s detached control plane: moved, and the source stopped with its data kept', async () => {
    const dir = await runTempDir('pivot-inmemory');
    try {
      const start = await cli(['management', 'start', '--dir', dir]);
      expect(start.exitCode, start.stderr).toBe(0);
      // What makes it the in-memory platform's control plane (its machines live in its controllers).
      await writeFile(path.join(dir, 'install-config.yaml'), 'apiVersion: v1\nmetadata:\n  name: move-d\nplatform:\n  inmemory: {}\n');
      const kube = KubeClient.fromFile(controlPlaneLayout(dir).kubeconfig);
      try {
        await seed(kube, 'move-d');
      } finally {
        kube.close();
      }
      const dry = await cli(['pivot', '--dir', dir, '--to-kubeconfig', target.kubeconfig, '--dry-run']);
      expect(dry.exitCode, dry.stderr).toBe(0);
      expect(dry.stdout).toMatch(/tier 1: .*Cluster/);
      const moved = await cli(['pivot', '--dir', dir, '--to-kubeconfig', target.kubeconfig, '--output', 'json']);
      expect(moved.exitCode, moved.stderr).toBe(0);
      const result = moved.stdout
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as { type: string; kind?: string; data?: { sourceStopped?: boolean; clusters?: string[] } })
        .find((e) => e.type === 'result');
      expect(result?.kind).toBe('pivot-moved');
      expect(result?.data?.clusters).toEqual(['move-d/move-d']);
      expect(result?.data?.sourceStopped).toBe(true);
      expect((await controlPlaneStatus(dir)).processes.filter((p) => p.running).map((p) => p.name)).toEqual([]);
      await access(controlPlaneLayout(dir).etcdDataDir); // the data stays for destroy bootstrap
      const cluster = await target.kube.get<KubeObject>({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'move-d', namespace: 'move-d' } });
      expect((cluster!['spec'] as { paused?: boolean }).paused ?? false).toBe(false);
    } finally {
      await removeInstallDir(dir);
    }
  });
});
