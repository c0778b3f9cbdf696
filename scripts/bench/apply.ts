/**
 * Apply-engine benchmark, against a real etcd and kube-apiserver from the bundle:
 *
 *  - first apply of N = 200 and 2,000 ConfigMaps in one namespace, each with the set's
 *    ownership metadata: our engine (planApply + executePlan: two lists, then server-side
 *    apply 8 at a time) vs the floor measured in the same run, the same objects applied
 *    one by one with `KubeClient.apply` (what a plain loop does, and all it does: no plan,
 *    no prune).
 *  - second apply of the same set: our plan (all unchanged, so nothing is sent) vs the
 *    floor re-applying every object one by one (the no-op writes a tool without a plan makes).
 *  - prune of the whole set (an empty generation): our engine vs sequential deletes.
 *
 * Each figure is the median of `runs` runs; every run uses fresh namespaces, and the order of
 * ours and the floor alternates between runs so drift of a shared, noisy machine hits both.
 * Only etcd and kube-apiserver run: ConfigMaps have no webhooks or controllers, and idle
 * provider managers would only add noise to 2 cores.
 *
 * Run: `npm run bench -- apply` (prints the table, writes bench-results/apply.json).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defaultConcurrency, executePlan, planApply, type DesiredSet } from '../../src/apply/index.js';
import { ownershipMetadata, type DesiredSetOwner } from '../../src/config/ownership.js';
import { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { loadCatalog } from '../../src/embedded/catalog.js';
import { nullSink } from '../../src/events.js';
import type { KubeClient, KubeObject } from '../../src/kube/client.js';
import { cliVersion } from '../../src/version.js';
import { formatNumber, median, type BenchRecord } from './record.js';

const sizes = [200, 2000] as const;
/** Runs per size; medians are reported. */
const runs = 3;
const configMapKind = { apiVersion: 'v1', kind: 'ConfigMap' };

function owner(name: string): DesiredSetOwner {
  return { setId: 'provisioner-bench', ownerGvk: 'provisioner.dev/v1alpha1, Kind=InstallConfig', ownerName: name, ownerNamespace: name };
}

function configMaps(set: DesiredSetOwner, namespace: string, count: number): KubeObject[] {
  const meta = ownershipMetadata(set);
  return Array.from({ length: count }, (_, i) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `cm-${String(i).padStart(5, '0')}`, namespace, labels: { ...meta.labels }, annotations: { ...meta.annotations } },
    data: { index: String(i), payload: `value-${i}-`.padEnd(200, 'x') },
  }));
}

async function timed<T>(task: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = performance.now();
  const value = await task();
  return { ms: performance.now() - start, value };
}

interface RunFigures {
  engineApplyMs: number;
  enginePlanCreateMs: number;
  floorApplyMs: number;
  planUnchangedMs: number;
  floorReapplyMs: number;
  enginePruneMs: number;
  floorDeleteMs: number;
}

async function oneRun(kube: KubeClient, size: number, run: number): Promise<RunFigures> {
  const engineNs = `bench-${size}-${run}-engine`;
  const floorNs = `bench-${size}-${run}-floor`;
  for (const name of [engineNs, floorNs]) await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  const engineOwner = owner(engineNs);
  const set: DesiredSet = { owner: engineOwner, objects: configMaps(engineOwner, engineNs, size) };
  const floorObjects = configMaps(owner(floorNs), floorNs, size);

  const engine = async () => {
    let planMs = 0;
    const total = await timed(async () => {
      const plan = await timed(() => planApply(kube, set));
      planMs = plan.ms;
      if (plan.value.counts.create !== size) throw new Error(`expected ${size} creates, planned ${JSON.stringify(plan.value.counts)}`);
      const result = await executePlan(kube, plan.value);
      if (result.counts.created !== size) throw new Error(`expected ${size} created, got ${JSON.stringify(result.counts)}`);
    });
    return { totalMs: total.ms, planMs };
  };
  const floor = async () =>
    (
      await timed(async () => {
        for (const obj of floorObjects) await kube.apply(obj);
      })
    ).ms;

  // Alternate who goes first.
  let ours: { totalMs: number; planMs: number };
  let floorApplyMs: number;
  if (run % 2 === 0) {
    ours = await engine();
    floorApplyMs = await floor();
  } else {
    floorApplyMs = await floor();
    ours = await engine();
  }

  const unchanged = await timed(() => planApply(kube, set));
  if (unchanged.value.counts.unchanged !== size) throw new Error(`expected ${size} unchanged, planned ${JSON.stringify(unchanged.value.counts)}`);
  const floorReapplyMs = await floor();

  const prune = await timed(async () => {
    const plan = await planApply(kube, { owner: engineOwner, objects: [] }, { extraKinds: [configMapKind] });
    if (plan.counts.delete !== size) throw new Error(`expected ${size} deletes, planned ${JSON.stringify(plan.counts)}`);
    return executePlan(kube, plan);
  });
  const floorDelete = await timed(async () => {
    for (const obj of floorObjects) await kube.delete(obj);
  });

  return {
    engineApplyMs: ours.totalMs,
    enginePlanCreateMs: ours.planMs,
    floorApplyMs,
    planUnchangedMs: unchanged.ms,
    floorReapplyMs,
    enginePruneMs: prune.ms,
    floorDeleteMs: floorDelete.ms,
  };
}

const round = (ms: number) => Math.round(ms * 10) / 10;
const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;

export async function run(): Promise<BenchRecord> {
  const catalog = await loadCatalog();
  const binaries = await ensureBinaries(['etcd', 'kube-apiserver'], { catalog, sink: nullSink });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-apply-'));
  const abort = new AbortController();
  const cp = new LocalControlPlane({ dir, etcdBinary: binaries.etcd!, apiServerBinary: binaries['kube-apiserver']!, providers: [], detached: false, signal: abort.signal });
  try {
    await cp.start();
    const kube = cp.kube;
    // Warm-up: discovery, connections, the API server's first writes.
    await oneRun(kube, 50, 99);

    const figures: Record<string, number> = {};
    const ratios: Record<string, number> = {};
    const rows: (string | number)[][] = [];
    for (const size of sizes) {
      const all: RunFigures[] = [];
      for (let r = 0; r < runs; r++) all.push(await oneRun(kube, size, r));
      const med = (key: keyof RunFigures) => round(median(all.map((f) => f[key])));
      const m = Object.fromEntries((Object.keys(all[0]!) as (keyof RunFigures)[]).map((k) => [k, med(k)])) as unknown as RunFigures;
      for (const [key, value] of Object.entries(m)) figures[`n${size}_${key}`] = value;
      ratios[`n${size}_engineApplyOverFloor`] = ratio(m.engineApplyMs, m.floorApplyMs);
      ratios[`n${size}_planUnchangedOverFloorReapply`] = ratio(m.planUnchangedMs, m.floorReapplyMs);
      ratios[`n${size}_enginePruneOverFloorDelete`] = ratio(m.enginePruneMs, m.floorDeleteMs);
      rows.push(
        [`first apply, ours (plan ${formatNumber(m.enginePlanCreateMs)} ms + execute)`, size, m.engineApplyMs, formatNumber(size / (m.engineApplyMs / 1000))],
        ['first apply, floor: sequential KubeClient.apply', size, m.floorApplyMs, formatNumber(size / (m.floorApplyMs / 1000))],
        ['second apply, ours: plan (all unchanged, nothing sent)', size, m.planUnchangedMs, formatNumber(size / (m.planUnchangedMs / 1000))],
        ['second apply, floor: sequential no-op re-apply', size, m.floorReapplyMs, formatNumber(size / (m.floorReapplyMs / 1000))],
        ['prune all, ours (plan + deletes)', size, m.enginePruneMs, formatNumber(size / (m.enginePruneMs / 1000))],
        ['prune all, floor: sequential KubeClient.delete', size, m.floorDeleteMs, formatNumber(size / (m.floorDeleteMs / 1000))],
      );
    }
    return {
      name: 'apply',
      figures: { ...figures, runsPerSize: runs, concurrency: defaultConcurrency },
      ratios,
      versions: { provisioner: cliVersion, 'kube-apiserver': catalog.findBinary('kube-apiserver')?.version ?? 'unknown' },
      tables: [{ title: `medians of ${runs} runs (ConfigMaps, one namespace, concurrency ${defaultConcurrency})`, columns: ['what', 'objects', 'median ms', 'objects/s'], rows }],
      notes: [
        'Ratios are ours over the floor measured in the same run: below 1 is faster than the floor.',
        'The floor of a first apply sends exactly the same objects one by one and does nothing else; ours also lists the set and the namespace before writing (the plan).',
        'A second apply of an unchanged set costs us the plan only (one list per kind), the floor a no-op write per object.',
        'Only etcd and kube-apiserver run; ConfigMaps cross no webhook. Objects of CAPI kinds pass admission webhooks, which makes every write slower for both sides.',
      ],
    };
  } finally {
    await cp.stop().catch(() => undefined);
    abort.abort();
    await rm(dir, { recursive: true, force: true });
  }
}
