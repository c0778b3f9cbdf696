/**
 * The move back of `destroy cluster` for a self-managed cluster (pivot/back.ts `clusterFence`
 * with `pivotFrom`), between two REAL local control planes booted from the bundle: the source
 * plays the self-managed cluster (reached through its API only: its providers' webhook
 * configurations deleted, the moved objects deleted through the API with `delete-for-move`;
 * it serves no Deployments, so the scale to 0 is the e2e's, hosts-pivot-self.test.ts), the
 * target the temporary local control plane.
 * A move interrupted right after each phase of the journal in turn (as a kill leaves it), then
 * run again: every object in the target once, none left in the source, and the target never
 * recorded as the install's management cluster.
 * Fails (never skips) when the bundle has not been built: run `npm run bundle` first.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { InterruptedError } from '../../src/errors.js';
import { RecordingSink } from '../support/recording-sink.js';
import { externalManagementFile } from '../../src/installdir/management.js';
import type { KubeObject } from '../../src/kube/client.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { clusterFence } from '../../src/pivot/back.js';
import { pivotFrom } from '../../src/pivot/from.js';
import { clusterctlLabel } from '../../src/pivot/graph.js';
import { pivotPhases, readPivotJournal, type PivotPhase } from '../../src/pivot/journal.js';
import { allControllers } from '../../src/platforms/index.js';
import { checkMoved, seedCluster, type Seeded } from '../support/move-fixtures.js';
import { runTempDir } from '../support/run-dirs.js';

describe('the move back of a self-managed cluster into a temporary local control plane', () => {
  let dir: string;
  let sourceDir: string;
  let targetDir: string;
  let source: LocalControlPlane;
  let target: LocalControlPlane;
  const abort = new AbortController();
  // Cluster API's core, kubeadm and in-memory providers (the seeded kinds) and our agent manager, in both.
  const controllers = allControllers().filter((c) => c.binary === 'capi-manager');
  // Interrupted after each phase but the last (`done`: nothing left to resume).
  const killPoints = pivotPhases.filter((p) => p !== 'done');
  const seeded = new Map<PivotPhase, Seeded>();

  beforeAll(async () => {
    dir = await runTempDir('pivot-back');
    sourceDir = await runTempDir('pivot-back-src');
    targetDir = await runTempDir('pivot-back-dst');
    source = await prepareLocalControlPlane({ dir: sourceDir, detached: false, sink: new RecordingSink(), signal: abort.signal, controllers });
    target = await prepareLocalControlPlane({ dir: targetDir, detached: false, sink: new RecordingSink(), signal: abort.signal, controllers });
    await Promise.all([source.start(), target.start()]);
    // Seeded before any move: the first fence deletes the source's webhook configurations.
    for (const phase of killPoints) seeded.set(phase, await seedCluster(source.kube, `back-${phase}`, { controlPlane: 1, workers: 1 }));
  }, 600_000);

  afterAll(async () => {
    await source?.stop();
    await target?.stop();
    abort.abort();
    for (const d of [dir, sourceDir, targetDir]) if (d) await rm(d, { recursive: true, force: true });
  });

  const move = (clusterName: string, killAfter?: PivotPhase) =>
    pivotFrom({
      dir,
      toKubeconfig: target.kubeconfig,
      clusterName,
      source: { client: source.kube, kubeconfig: source.kubeconfig, adopted: true, fatal: new Promise<never>(() => {}), stop: async () => {}, fence: clusterFence(source.kube, new RecordingSink(), abort.signal) },
      machinesInController: false,
      recordTarget: false,
      sink: new RecordingSink(),
      signal: abort.signal,
      afterPhase: (phase) => {
        if (phase === killAfter) throw new InterruptedError(`killed after ${phase}`);
      },
    });

  for (const phase of pivotPhases.filter((p) => p !== 'done')) {
    it(`interrupted after ${phase}, then run again: moved whole, nothing left in the cluster`, async () => {
      const cluster = seeded.get(phase)!;
      await expect(move(cluster.name, phase)).rejects.toThrow(`killed after ${phase}`);
      expect((await readPivotJournal(dir))?.phase).toBe(phase);
      const result = await move(cluster.name);
      expect(result.action).toBe('moved');
      expect(result.resumedFrom).toBe(phase);
      expect((await readPivotJournal(dir))?.phase).toBe('done');
      const { moved, problems } = await checkMoved(source.kube, target.kube, cluster);
      expect(problems).toEqual([]);
      expect(moved).toBe(cluster.objects.length);
      // The fence: no provider webhook left to refuse the deletions (a bare API server serves no Deployments to scale).
      for (const kind of ['ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration']) {
        expect(await source.kube.list<KubeObject>('admissionregistration.k8s.io/v1', kind, { labelSelector: clusterctlLabel }), kind).toEqual([]);
      }
      // The temporary control plane is not the install's management cluster: destroy forgets the self record itself.
      expect(existsSync(externalManagementFile(dir))).toBe(false);
    }, 300_000);
  }
});
