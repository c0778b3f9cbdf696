/**
 * Pivot benchmark: move time of sets of objects shaped like clusters of 3 control-plane +
 * 10, 3 + 100 and 3 + 1,000 worker machines (per machine a Machine, DevMachine, KubeadmConfig and
 * bootstrap-data Secret; per cluster the Cluster, DevCluster, KubeadmControlPlane, two
 * DevMachineTemplates, KubeadmConfigTemplate, MachineDeployment, MachineSet and the
 * cluster's Secrets), created directly (no machine is provisioned), between two real local
 * control planes from the bundle, in the same run:
 *
 *  - ours: the move of `provisioner pivot --cluster <name>` (pivot/from.ts `pivotFrom`, the
 *    one `create cluster --pivot-to` runs: plan, preflight, pause, stop the source's controllers,
 *    copy with 32 requests in flight, verify, remove from the source's storage, unpause; its phases
 *    timed and their API requests counted);
 *  - baseline: `clusterctl move --kubeconfig <src> --to-kubeconfig <dst> -n <ns>` (the
 *    bundled clusterctl).
 *
 * The source control plane is started again from its data before every move (either tool):
 * ours stops its controllers, and the next set needs them and their webhooks to be seeded.
 *
 * Every set is seeded paused with the status clusterctl requires before it moves anything
 * (infrastructure provisioned, control plane initialized, a nodeRef on every Machine), then
 * unpaused right before the move (clusterctl refuses a paused Cluster). After each move every
 * seeded object is compared with its pre-move content (spec/data/labels, paused aside) and
 * owner references are checked to point at target UIDs. Medians of `runs` runs, the order
 * of the two tools alternating between runs. If clusterctl refuses, its exact message is reported.
 *
 * Run: `npm run bench -- pivot` (prints the table, writes bench-results/pivot.json).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { messageOf } from '../../src/errors.js';
import { nullSink } from '../../src/events.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { attachedFrom, prepareLocalControlPlane } from '../../src/management/attach.js';
import { pivotFrom } from '../../src/pivot/from.js';
import { cliVersion } from '../../src/version.js';
import type { KubeClient, KubeObject } from '../../src/kube/client.js';
import { checkMoved, seedCluster, setClusterPaused, snapshotSeeded, type Seeded } from '../../test/support/move-fixtures.js';
import { formatNumber, median, type BenchRecord } from './record.js';

/** Runs per shape and tool; medians are reported. Default 3; `PROVISIONER_BENCH_PIVOT_RUNS` overrides it for a quick look. */
const runs = Math.max(1, Number(process.env['PROVISIONER_BENCH_PIVOT_RUNS']) || 3);
/** Runs of the 3 + 1,000 shape (about 4,000 objects; clusterctl takes minutes per move). Default: `runs`, so its ratio is a median too; `PROVISIONER_BENCH_PIVOT_LARGE_RUNS` overrides it. */
const largeRuns = Math.max(1, Number(process.env['PROVISIONER_BENCH_PIVOT_LARGE_RUNS']) || runs);
/** Worker counts to move, e.g. `1000` for the large shape alone. Default: `10,100,1000`; `PROVISIONER_BENCH_PIVOT_WORKERS` overrides it. */
const workerCounts = (process.env['PROVISIONER_BENCH_PIVOT_WORKERS'] ?? '10,100,1000').split(',').map(Number);
const allShapes = [
  { controlPlane: 3, workers: 10, runs },
  { controlPlane: 3, workers: 100, runs },
  { controlPlane: 3, workers: 1000, runs: largeRuns },
];
const shapes = allShapes.filter((shape) => workerCounts.includes(shape.workers));

/** The fastest and slowest of some runs' times, e.g. `9812–11204`. */
function spread(values: readonly number[]): string {
  return values.length ? `${formatNumber(Math.min(...values))}–${formatNumber(Math.max(...values))}` : '';
}

/** A set counts as settled once no object of it changed for this long. */
const settledAfterMs = 3_000;
/** Longest wait for a set to settle: 5 minutes (3 + 1,000 takes the source's controllers about a minute on 2 busy cores). */
const settleTimeoutMs = 300_000;

/**
 * Waits until the source's controllers are done with a set they just saw unpaused: no
 * object of it changed (resourceVersions, one cached list per kind each second) for
 * `settledAfterMs`. A cluster that is moved has been reconciled for a while; without this
 * the move would be timed against the controllers' first reconcile of thousands of objects
 * at once, which loads the source API server for tens of seconds. Both tools get it.
 */
async function settle(kube: KubeClient, seeded: Seeded): Promise<number> {
  const start = performance.now();
  const kinds = [...new Map(seeded.objects.map((o) => [`${o.apiVersion}|${o.kind}`, o])).values()];
  let last = '';
  let stableSince = start;
  for (;;) {
    // From the watch cache: a consistent list makes the server wait for its cache to reach etcd's revision, and a
    // source just restarted and seeded with thousands of objects answered one with a 504 ("Too large resource
    // version") beyond the client's retries. A stability check needs only the cache to stop changing.
    const lists = await Promise.all(kinds.map((k) => kube.list<KubeObject>(k.apiVersion, k.kind, { namespace: seeded.namespace, fromCache: true })));
    const versions = lists.flat().map((o) => `${o.kind}/${o.metadata.name}@${o.metadata.resourceVersion}`).sort().join(',');
    const now = performance.now();
    if (versions !== last) {
      last = versions;
      stableSince = now;
    } else if (now - stableSince >= settledAfterMs || now - start >= settleTimeoutMs) return now - start;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

async function timed(task: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await task();
  return performance.now() - start;
}

export async function run(): Promise<BenchRecord> {
  if (shapes.length === 0) throw new Error(`PROVISIONER_BENCH_PIVOT_WORKERS=${process.env['PROVISIONER_BENCH_PIVOT_WORKERS']} names no shape: use any of ${allShapes.map((shape) => shape.workers).join(', ')}, comma-separated`);
  const abort = new AbortController();
  const dirs = await Promise.all([mkdtemp(path.join(os.tmpdir(), 'bench-pivot-src-')), mkdtemp(path.join(os.tmpdir(), 'bench-pivot-dst-'))]);
  const started: LocalControlPlane[] = [];
  const startIn = async (dir: string) => {
    const cp = await prepareLocalControlPlane({ dir, detached: false, sink: nullSink, signal: abort.signal });
    await cp.start();
    return cp;
  };
  try {
    const clusterctl = (await ensureBinaries(['clusterctl'], { sink: nullSink })).clusterctl!;
    const clusterctlVersion = (await promisify(execFile)(clusterctl, ['version', '-o', 'short'], { env: { ...process.env, CLUSTERCTL_DISABLE_VERSIONCHECK: 'true' } })).stdout.trim();
    for (const dir of dirs) started.push(await startIn(dir));
    const target = started[1]!;
    let source = started[0]!;
    const figures: Record<string, number> = {};
    const ratios: Record<string, number> = {};
    const rows: (string | number)[][] = [];
    /** Ours, phase by phase (the last run of each shape): time and Kubernetes API requests. */
    const phaseRows: (string | number)[][] = [];
    /** clusterctl's median over ours, per shape: how many times faster ours is. */
    const speedupRows: (string | number)[][] = [];
    const notes: string[] = [];
    let clusterctlRefusal: string | undefined;

    for (const shape of shapes) {
      const label = `${shape.controlPlane}+${shape.workers}`;
      const ours: number[] = [];
      const theirs: number[] = [];
      const problems = { ours: 0, clusterctl: 0 };
      let objects = 0;
      let phases: { stage: string; durationMs?: number; requests?: number }[] = [];
      const settleMs: number[] = [];
      for (let i = 0; i < shape.runs; i++) {
        const order = i % 2 === 0 ? (['ours', 'clusterctl'] as const) : (['clusterctl', 'ours'] as const);
        for (const tool of order) {
          if (tool === 'clusterctl' && clusterctlRefusal) continue;
          await source.stop();
          source = started[0] = await startIn(dirs[0]!);
          const seeded = await seedCluster(source.kube, `pv-${shape.workers}-${i}-${tool === 'ours' ? 'o' : 'c'}`, shape);
          objects = seeded.objects.length;
          await setClusterPaused(source.kube, seeded, false);
          settleMs.push(await settle(source.kube, seeded));
          const oursSink = new RecordingSink();
          // Ours is checked at `source-deleted`: every copy final, the source emptied, the target still
          // paused. Once it unpauses, the target's in-memory provider reconciles the copies at once (they
          // carry their status) and sets spec.providerID: the new manager at work, not a move defect.
          let oursCheck: Awaited<ReturnType<typeof checkMoved>> | undefined;
          let sourceAtVerify: KubeObject[] = [];
          let checkMs = 0;
          const afterPhase = async (phase: string) => {
            const start = performance.now();
            if (phase === 'verified') sourceAtVerify = await snapshotSeeded(source.kube, seeded);
            if (phase === 'source-deleted') oursCheck = await checkMoved(source.kube, target.kube, seeded, sourceAtVerify);
            checkMs += performance.now() - start;
          };
          let ms: number;
          try {
            ms =
              tool === 'ours'
                ? (await timed(() => pivotFrom({ dir: dirs[0]!, source: attachedFrom(source), machinesInController: false, toKubeconfig: target.kubeconfig, clusterName: seeded.name, sink: oursSink, signal: abort.signal, afterPhase }))) - checkMs
                : await timed(() =>
                    promisify(execFile)(clusterctl, ['move', '--kubeconfig', source.kubeconfig, '--to-kubeconfig', target.kubeconfig, '-n', seeded.namespace], {
                      env: { ...process.env, CLUSTERCTL_DISABLE_VERSIONCHECK: 'true' },
                      maxBuffer: 64 * 1024 * 1024,
                    }),
                  );
          } catch (error) {
            if (tool === 'ours') {
              const details = (error as { details?: readonly string[] }).details ?? [];
              throw new Error(`${messageOf(error)}${details.length ? `: ${details.slice(0, 8).join('; ')}` : ''}`, { cause: error });
            }
            const e = error as { stderr?: string; stdout?: string };
            clusterctlRefusal = (e.stderr || e.stdout || messageOf(error)).trim();
            notes.push(`clusterctl move refused (${label}): ${clusterctlRefusal}`);
            continue;
          }
          for (const event of oursSink.ofType('log')) if (/copying them again/.test(event.message)) notes.push(`ours ${label} run ${i + 1}: ${event.message}`);
          if (tool === 'ours') phases = oursSink.ofType('stage').filter((e) => e.stage.startsWith('pivot:'));
          const result = tool === 'ours' && oursCheck ? oursCheck : await checkMoved(source.kube, target.kube, seeded);
          problems[tool] += result.problems.length;
          if (result.problems.length > 0) notes.push(`${tool} ${label} run ${i + 1}: ${result.problems.length} problem(s), e.g. ${result.problems.slice(0, 3).join('; ')}`);
          (tool === 'ours' ? ours : theirs).push(ms);
          // Keep the target's controllers off the moved copies: they would load later runs.
          await setClusterPaused(target.kube, seeded, true).catch(() => {});
        }
      }
      const oursMs = median(ours);
      figures[`ours.${label}.objects`] = objects;
      figures[`ours.${label}.moveMs`] = Math.round(oursMs);
      figures[`ours.${label}.problems`] = problems.ours;
      figures[`source.${label}.settleMs`] = Math.round(median(settleMs));
      rows.push([`provisioner pivot`, label, objects, shape.runs, formatNumber(oursMs), spread(ours), problems.ours]);
      for (const phase of phases) {
        const name = phase.stage.slice('pivot:'.length);
        phaseRows.push([label, name, formatNumber(phase.durationMs ?? 0), phase.requests ?? 0]);
        figures[`ours.${label}.phase.${name}.ms`] = phase.durationMs ?? 0;
        figures[`ours.${label}.phase.${name}.requests`] = phase.requests ?? 0;
      }
      if (theirs.length > 0) {
        const theirsMs = median(theirs);
        figures[`clusterctl.${label}.moveMs`] = Math.round(theirsMs);
        figures[`clusterctl.${label}.problems`] = problems.clusterctl;
        ratios[`${label}.oursOverClusterctl`] = Math.round((oursMs / theirsMs) * 1000) / 1000;
        // Run i of each tool moved the same shape back to back, so their ratio is that run's speed-up.
        const perRun = theirs.slice(0, ours.length).map((t, i) => `${(t / ours[i]!).toFixed(1)}×`).join(', ');
        speedupRows.push([label, formatNumber(oursMs), formatNumber(theirsMs), `${(theirsMs / oursMs).toFixed(1)}×`, perRun, problems.ours + problems.clusterctl]);
        rows.push([`clusterctl move`, label, objects, theirs.length, formatNumber(theirsMs), spread(theirs), problems.clusterctl]);
      }
    }
    notes.unshift(
      `Medians of ${runs} runs per tool and shape (${largeRuns} at 3+1000), alternating which tool goes first; both move between the same two local control planes (all bundled providers running).`,
      'The source control plane is started again from its data before every move of either tool: ours fences it (stops its controllers right after the pause and removes the moved objects from its etcd), and the next set needs its controllers and webhooks to be seeded.',
      `Before either tool runs, the unpaused set is left to settle (no object of it changed for ${settledAfterMs / 1000} s; source.<shape>.settleMs is the median wait): a cluster that is moved has been reconciled for a while, and the source controllers' first reconcile of every object at once is not the move.`,
      'A ratio below 1 means provisioner pivot was faster. "problems" counts objects missing in the target, differing from their pre-move content (spec, data; labels and Cluster spec.paused aside, since the source controllers add labels while the set is unpaused), with an owner reference not pointing at a target UID, or left in the source.',
      'Pre-move content: for clusterctl, the set as seeded, checked after its move; for ours, the source as it was when the move verified (its controllers act on the set while it is unpaused before the move), checked at `source-deleted`, before the target unpauses (its in-memory provider then sets spec.providerID on copies that carry status). The check\'s own time is taken out of ours.',
      'Neither copies the status of Cluster API kinds (their controllers rebuild it; ours copies it for kinds outside Cluster API\'s groups); ours verifies every copy before deleting; clusterctl also waits for every object to be ready to move (block-move annotations) before it copies.',
    );
    return {
      name: 'pivot',
      figures,
      ratios,
      versions: { provisioner: cliVersion, clusterctl: clusterctlVersion },
      tables: [
        { title: 'move time', columns: ['tool', 'machines (cp+workers)', 'objects', 'runs', 'median ms', 'fastest–slowest ms', 'problems'], rows },
        { title: 'provisioner pivot against clusterctl move (same run, same two control planes)', columns: ['machines (cp+workers)', 'ours ms', 'clusterctl ms', 'ours faster by (medians)', 'each run', 'problems'], rows: speedupRows },
        // "paused" holds everything before it: attaching the source, the plan, the target's preflight, the pause and the re-plan.
        { title: 'provisioner pivot by phase (last run of each shape)', columns: ['machines (cp+workers)', 'phase reached', 'ms', 'API requests'], rows: phaseRows },
      ],
      notes,
    };
  } finally {
    for (const cp of started.reverse()) await cp.stop().catch(() => {});
    abort.abort();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  }
}
