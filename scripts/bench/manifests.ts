/**
 * Manifests benchmark: `create manifests` (the service: read and validate the install
 * config, generate, reconcile with disk and state, write atomically) for a cluster of one
 * control-plane pool of 3 and worker pools totalling 1,000 machines.
 *
 * Figures (medians of several runs, each in a fresh child process so that peak memory
 * is its own):
 * - `create manifests` into an empty directory, and again over its own output (nothing to write);
 * - the floor: serializing as many trivial objects with the `yaml` package and writing
 *   each to its own file — the least any generator writing these files can do;
 * - wall time of the operation itself (startup excluded) and the child's peak RSS
 *   (process.resourceUsage().maxRSS, startup included for both sides).
 *
 * Run: `npm run bench -- manifests`, or alone: `npx tsx scripts/bench/manifests.ts`.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import type { BenchRecord } from './record.js';

const thisFile = fileURLToPath(import.meta.url);
const runs = 5;
/** Worker pools and machines per pool: 10 × 100 = 1,000 workers, plus 3 control-plane machines. */
const workerPools = 10;
const machinesPerPool = 100;

function installConfigText(): string {
  const pools = Array.from({ length: workerPools }, (_, i) => `  - name: workers-${String(i).padStart(2, '0')}\n    quantity: ${machinesPerPool}\n    roles: [worker]\n    labels: {example.com/pool: p${i}}\n`).join('');
  return `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: bench
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
${pools}`;
}

interface ChildResult {
  ms: number;
  maxRssBytes: number;
  files: number;
}

type Mode = 'create' | 'rerun' | 'floor';

/** Runs in the child: does one measured operation and prints its figures as JSON. */
async function child(mode: Mode, dir: string): Promise<ChildResult> {
  const { RecordingSink } = await import('../../test/support/recording-sink.js');
  if (mode === 'floor') {
    const count = Number(process.env.BENCH_OBJECTS ?? '0');
    const start = performance.now();
    await mkdir(path.join(dir, 'floor'), { recursive: true });
    for (let i = 0; i < count; i++) {
      const text = stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `object-${i}`, namespace: 'bench' } });
      await writeFile(path.join(dir, 'floor', `${String(i).padStart(3, '0')}.yaml`), text);
    }
    return { ms: performance.now() - start, maxRssBytes: process.resourceUsage().maxRSS * 1024, files: count };
  }
  const { createManifests } = await import('../../src/services/manifests.js');
  const start = performance.now();
  const result = await createManifests({ dir, regenerate: [], keepEdits: false, sink: new RecordingSink() });
  const ms = performance.now() - start;
  return { ms, maxRssBytes: process.resourceUsage().maxRSS * 1024, files: result.manifests.files.length };
}

async function spawnChild(mode: Mode, dir: string, objects: number): Promise<ChildResult> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', thisFile, '--child', mode, dir], {
    env: { ...process.env, BENCH_OBJECTS: String(objects) },
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as ChildResult;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export async function run(): Promise<BenchRecord> {
  const samples: Record<Mode, ChildResult[]> = { create: [], rerun: [], floor: [] };
  let objects = 0;
  for (let i = 0; i < runs; i++) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-bench-manifests-'));
    try {
      await writeFile(path.join(dir, 'install-config.yaml'), installConfigText());
      const created = await spawnChild('create', dir, 0);
      objects = created.files;
      samples.create.push(created);
      samples.rerun.push(await spawnChild('rerun', dir, 0));
      samples.floor.push(await spawnChild('floor', dir, objects));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  const ms = (mode: Mode) => median(samples[mode].map((s) => s.ms));
  const rss = (mode: Mode) => median(samples[mode].map((s) => s.maxRssBytes));
  const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    name: 'manifests',
    figures: {
      machines: 3 + workerPools * machinesPerPool,
      files: objects,
      createMs: round(ms('create')),
      rerunMs: round(ms('rerun')),
      floorMs: round(ms('floor')),
      createMaxRssBytes: rss('create'),
      rerunMaxRssBytes: rss('rerun'),
      floorMaxRssBytes: rss('floor'),
      runs,
    },
    ratios: {
      createOverFloorTime: round(ms('create') / ms('floor')),
      rerunOverFloorTime: round(ms('rerun') / ms('floor')),
      createOverFloorPeakRss: round(rss('create') / rss('floor')),
    },
    tables: [
      {
        title: `create manifests: 1 control-plane pool of 3, ${workerPools} worker pools of ${machinesPerPool} (${objects} files); medians of ${runs} runs`,
        columns: ['case', 'wall ms', 'peak RSS MiB'],
        rows: [
          ['create manifests, empty dir', round(ms('create')), mb(rss('create'))],
          ['create manifests, rerun (nothing to write)', round(ms('rerun')), mb(rss('rerun'))],
          [`floor: yaml.stringify + write ${objects} trivial objects`, round(ms('floor')), mb(rss('floor'))],
        ],
      },
    ],
    notes: [
      'Wall time is the operation inside the child (process and tsx startup excluded); peak RSS is the whole child (startup included on both sides).',
      'Objects scale with pools, not machines: a pool of 100 machines is three objects (template, bootstrap template, MachineDeployment).',
      'create includes parsing and validating install-config.yaml, reading the state file, hashing, fsync of every file and the state file; the floor does none of that.',
    ],
  };
}

if (process.argv[2] === '--child') {
  const result = await child(process.argv[3] as Mode, process.argv[4] ?? '.');
  process.stdout.write(JSON.stringify(result) + '\n');
} else if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  const { describeMachine, formatRecord } = await import('./record.js');
  process.stdout.write(formatRecord(await run(), await describeMachine()));
}
