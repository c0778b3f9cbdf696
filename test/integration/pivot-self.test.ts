/**
 * `pivot --to self` SIGKILLed right after each phase of its journaled move, then run again,
 * between two REAL local control planes booted from the bundle: an in-memory install's own
 * (detached, as create cluster leaves it: the source) and another standing in as the install's
 * cluster, whose admin kubeconfig is `D/auth/kubeconfig` (what `self` names). The kill is real
 * and lands at a chosen point (support/pivot-self-child.ts kills its own process once the
 * journal records the phase).
 *
 * One move is killed after every phase from `planned` to `unpaused` in turn, each run resuming
 * where the last was killed (its log says from which phase), then the CLI's `pivot --dir D --to
 * self` finishes it: it skips the provider install once the move has begun (the install needs a
 * cluster with nodes; its kill, and a kill after `planned` resumed by `--to self`, are
 * e2e/hosts-pivot-self.test.ts's). A second move is killed after `done`, before the cluster is
 * recorded as the install's manager and before the local control plane's data goes; the same
 * command finishes it. Afterwards every seeded object is in the cluster once (nothing lost, no
 * second copy), nothing of the local control plane runs or stays, and the install records the
 * cluster as its own manager. Each `it` boots its own install's control plane; the kills of one
 * move share one, since a finished move removes it (integration/pivot.test.ts resumes from each
 * phase to the end against one shared pair).
 * Fails (never skips) when the bundle has not been built: run `npm run bundle` first.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { controlPlaneStatus, type LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import { RecordingSink } from '../support/recording-sink.js';
import { recordedExternalManagement } from '../../src/installdir/management.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { pivotPhases, readPivotJournal, type PivotPhase } from '../../src/pivot/journal.js';
import { sourceUidAnnotation } from '../../src/pivot/move.js';
import { seedCluster } from '../support/move-fixtures.js';
import { removeInstallDir } from './support/controlplane.js';
import { pivotSelfControllers } from './support/pivot-self-child.js';
import { runTempDir } from '../support/run-dirs.js';

const child = path.join(packageRoot, 'test', 'integration', 'support', 'pivot-self-child.ts');
const tsx = (args: string[], env: Record<string, string> = {}) => execa(process.execPath, ['--import', 'tsx', ...args], { cwd: packageRoot, reject: false, timeout: 300_000, env });
/** The CLI from its sources (no build step). */
const cli = (args: string[]) => tsx([path.join(packageRoot, 'src', 'main.ts'), ...args]);

/** Every phase a move can be killed after and then resumed from, before `done`. */
const movePhases = pivotPhases.filter((phase) => phase !== 'done');

describe('pivot --to self, SIGKILLed after each phase of its move, then run again', () => {
  let cluster: LocalControlPlane;
  let clusterDir: string;
  const abort = new AbortController();

  beforeAll(async () => {
    clusterDir = await runTempDir('pivot-self-cluster');
    // The same providers as the install's (what its cluster runs once they are installed).
    cluster = await prepareLocalControlPlane({ dir: clusterDir, detached: false, sink: new RecordingSink(), signal: abort.signal, controllers: pivotSelfControllers });
    await cluster.start();
  }, 600_000);

  afterAll(async () => {
    await cluster?.stop();
    abort.abort();
    if (clusterDir) await removeInstallDir(clusterDir);
  });

  /** An in-memory install at `dir` whose local control plane runs detached, seeded with a 1 + 1 cluster, and whose cluster is the other control plane. */
  async function seededInstall(dir: string, name: string) {
    // Detached, as create cluster leaves an in-memory install's, by a process that then exits: the commands below adopt it.
    const start = await tsx([child, 'start', dir]);
    expect(start.exitCode, start.stderr).toBe(0);
    await writeFile(path.join(dir, 'install-config.yaml'), `apiVersion: v1\nmetadata:\n  name: ${name}\nplatform:\n  inmemory: {}\n`);
    await mkdir(path.join(dir, 'auth'), { recursive: true });
    await copyFile(cluster.kubeconfig, path.join(dir, 'auth', 'kubeconfig'));
    const source = KubeClient.fromFile(controlPlaneLayout(dir).kubeconfig);
    return seedCluster(source, name, { controlPlane: 1, workers: 1 }).finally(() => source.close());
  }

  /** The move's child run, SIGKILLed right after the journal records `phase`; returns its stderr (its log). */
  async function killedAfter(dir: string, phase: PivotPhase): Promise<string> {
    const run = await tsx([child, 'pivot', dir], { PIVOT_KILL_AFTER: phase });
    expect(run.signal, `killed after ${phase}?\n${run.stdout}\n${run.stderr}`).toBe('SIGKILL');
    expect(run.stderr).toContain(`killed after ${phase}`);
    expect((await readPivotJournal(dir))?.phase, 'the journal after the kill').toBe(phase);
    return run.stderr;
  }

  /** Every seeded object in the cluster once, as the copy of its source object; nothing of the local control plane left; the cluster recorded as the install's manager. */
  async function expectSelfManaged(dir: string, seeded: Awaited<ReturnType<typeof seedCluster>>): Promise<void> {
    expect((await readPivotJournal(dir))?.phase).toBe('done');
    const problems: string[] = [];
    for (const o of seeded.objects) {
      const copy = await cluster.kube.get<KubeObject>({ apiVersion: o.apiVersion, kind: o.kind, metadata: { name: o.metadata.name, namespace: seeded.namespace } });
      if (!copy) problems.push(`${o.kind} ${o.metadata.name} missing in the cluster`);
      else if (copy.metadata.annotations?.[sourceUidAnnotation] !== o.metadata.uid) problems.push(`${o.kind} ${o.metadata.name} is not the copy of the source's object`);
    }
    // Nothing duplicated: every copy of a source object in the namespace is one of the seeded ones, once.
    for (const kind of new Set(seeded.objects.map((o) => `${o.apiVersion}|${o.kind}`))) {
      const [apiVersion, k] = kind.split('|') as [string, string];
      const copies = (await cluster.kube.list<KubeObject>(apiVersion, k, { namespace: seeded.namespace })).filter((c) => c.metadata.annotations?.[sourceUidAnnotation]);
      const sourceUids = copies.map((c) => c.metadata.annotations![sourceUidAnnotation]!);
      expect(new Set(sourceUids).size, `${k}: copies of one source object`).toBe(sourceUids.length);
      const seededUids = new Set(seeded.objects.filter((o) => o.kind === k).map((o) => o.metadata.uid));
      expect(sourceUids.filter((uid) => !seededUids.has(uid)), `${k}: copies of objects that were not seeded`).toEqual([]);
    }
    expect(problems).toEqual([]);

    // The install is self-managed: nothing of its local control plane runs or stays.
    expect((await controlPlaneStatus(dir)).processes.filter((p) => p.running).map((p) => p.name)).toEqual([]);
    expect(existsSync(controlPlaneLayout(dir).stateDir), 'the local control plane data').toBe(false);
    expect(existsSync(controlPlaneLayout(dir).kubeconfig), 'the local control plane kubeconfig').toBe(false);
    expect(await recordedExternalManagement(dir)).toBe(path.join(dir, 'auth', 'kubeconfig'));
  }

  it(`killed after each of ${movePhases.join(', ')} in turn, each run resuming the last: the CLI finishes it, every object in the cluster once, nothing of the local control plane left`, async () => {
    const dir = await runTempDir('pivot-self-phases');
    try {
      const seeded = await seededInstall(dir, 'self-phases');
      let previous: PivotPhase | undefined;
      for (const phase of movePhases) {
        const log = await killedAfter(dir, phase);
        // The run resumed the move where the last run was killed, not a new one.
        if (previous) expect(log, `the run killed after ${phase}`).toContain(`Resuming the pivot of ${dir} from phase ${previous}`);
        else expect(log).not.toContain('Resuming the pivot');
        previous = phase;
      }

      const again = await cli(['pivot', '--dir', dir, '--to', 'self']);
      expect(again.exitCode, `${again.stdout}\n${again.stderr}`).toBe(0);
      expect(again.stderr).toContain(`Resuming the pivot of ${dir} from phase ${previous}`);
      await expectSelfManaged(dir, seeded);
    } finally {
      await removeInstallDir(dir);
    }
  }, 900_000);

  it('killed after done, before the record and the data removal: the same command records the cluster as the install\'s manager and removes what is left', async () => {
    const dir = await runTempDir('pivot-self-done');
    try {
      const seeded = await seededInstall(dir, 'self-done');
      await killedAfter(dir, 'done');
      const again = await cli(['pivot', '--dir', dir, '--to', 'self']);
      expect(again.exitCode, `${again.stdout}\n${again.stderr}`).toBe(0);
      expect(again.stdout).toContain('already manages itself');
      await expectSelfManaged(dir, seeded);
    } finally {
      await removeInstallDir(dir);
    }
  }, 600_000);
});
