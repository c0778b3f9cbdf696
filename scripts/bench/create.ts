/**
 * `create cluster` benchmark, on the in-memory platform with the real bundle:
 *
 *  - baseline: the control-plane boot alone (`management start` on a fresh dir), so the
 *    table shows how much of a create is boot and how much is provisioning;
 *  - the acceptance install (3 control-plane + 2 workers): wall time, per-stage timings
 *    from the `stage` events of `--output json`, the CLI's own CPU time and share of all
 *    the CPU spent (CLI + control-plane processes), the CLI's peak RSS, and its Kubernetes API
 *    request rate per stage (the `requests` of each stage event), the wait stages above all;
 *  - the same at 3 + 100 workers (install-config.yaml edited), to see what breaks first.
 *
 * The CLI's CPU and peak RSS come from /proc/<pid>/stat (utime + stime) and
 * /proc/<pid>/status (VmHWM), sampled every 200 ms while it runs (the last sample is at
 * most 200 ms before its exit); the control plane's from its recorded pids at the end.
 * Every created cluster is destroyed (timed as well) and its dir removed.
 *
 * Runs (medians): PROVISIONER_BENCH_BOOT_RUNS (default 3), PROVISIONER_BENCH_CREATE_RUNS
 * (default 3; one 3+2 create takes ~2–3 min on 2 cores), PROVISIONER_BENCH_LARGE_WORKERS
 * (default 100, one run of ~10 min; 0 skips it). The whole benchmark takes ~25 min.
 *
 * Run: `npm run bench -- create` (prints the table, writes bench-results/create.json).
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { isAlive, readPidfiles } from '../../src/process/pidfile.js';
import { cliVersion } from '../../src/version.js';
import { cli, editInstallConfig, ensureBuilt, getNodes, procStats, startCli, type CliRun } from '../../test/e2e/support/cli.js';
import { formatNumber, median, positiveEnv, type BenchRecord, type BenchTable } from './record.js';

const bootRuns = positiveEnv('PROVISIONER_BENCH_BOOT_RUNS', 3);
const createRuns = positiveEnv('PROVISIONER_BENCH_CREATE_RUNS', 3);
const largeWorkers = positiveEnv('PROVISIONER_BENCH_LARGE_WORKERS', 100, true);
/** Wall-clock limit of one run; the CLI's own no-progress timeout (10 min) normally ends a stuck one first. */
const runLimitMs = 60 * 60_000;

interface StageTiming {
  stage: string;
  durationMs: number;
  /** Kubernetes API requests the CLI made during the stage (from the stage event). */
  requests?: number;
}

interface Measured {
  wallMs: number;
  exitCode: number | undefined;
  /** CLI process utime + stime at its last sample. */
  cliCpuMs: number;
  cliPeakRssBytes: number;
  /** CPU of the control-plane processes (they start during the run, so their total is what the run cost). */
  controlPlaneCpuMs: number;
  controlPlaneRssBytes: number;
  /** Each control-plane process at the CLI's end: CPU since it started, current RSS. */
  processes: { name: string; cpuMs: number; rssBytes: number }[];
  stages: StageTiming[];
  /** The failed stage and its message, or the error event, when the run failed. */
  failure?: string;
  run: CliRun;
}

interface JsonEvent {
  type: string;
  stage?: string;
  state?: string;
  durationMs?: number;
  requests?: number;
  message?: string;
  details?: string[];
}

/** Runs the CLI with `--output json`, sampling its /proc entry until it exits. */
async function measure(dir: string, args: readonly string[]): Promise<Measured> {
  const child = startCli([...args, '--dir', dir, '--output', 'json'], runLimitMs);
  let cliCpuMs = 0;
  let cliPeakRssBytes = 0;
  while (!child.ended()) {
    const stats = await procStats(child.pid);
    if (stats) {
      cliCpuMs = stats.cpuMs;
      cliPeakRssBytes = Math.max(cliPeakRssBytes, stats.peakRssBytes);
    }
    await Promise.race([child.result(), new Promise((resolve) => setTimeout(resolve, 200))]);
  }
  const run = await child.result();
  const events = run.stdout
    .split('\n')
    .filter((l) => l.trim().startsWith('{'))
    .map((l) => JSON.parse(l) as JsonEvent);
  const stages = events.filter((e) => e.type === 'stage' && e.state === 'succeeded' && e.durationMs !== undefined).map((e) => ({ stage: e.stage!, durationMs: e.durationMs!, ...(e.requests !== undefined ? { requests: e.requests } : {}) }));
  const processes: Measured['processes'] = [];
  for (const entry of await readPidfiles(controlPlaneLayout(dir).stateDir)) {
    if (!isAlive(entry)) continue;
    processes.push({ name: entry.name, cpuMs: (await procStats(entry.pid))?.cpuMs ?? 0, rssBytes: await currentRss(entry.pid) });
  }
  const controlPlaneCpuMs = processes.reduce((n, p) => n + p.cpuMs, 0);
  const controlPlaneRssBytes = processes.reduce((n, p) => n + p.rssBytes, 0);
  const failedStage = events.find((e) => e.type === 'stage' && e.state === 'failed');
  const error = events.find((e) => e.type === 'error');
  const failure =
    run.exitCode === 0
      ? undefined
      : [failedStage ? `stage ${failedStage.stage} failed: ${failedStage.message ?? ''}` : undefined, error ? `error: ${error.message ?? ''} ${(error.details ?? []).slice(0, 3).join('; ')}` : undefined, `exit ${run.exitCode ?? run.signal}`]
          .filter(Boolean)
          .join(' | ');
  return { wallMs: run.durationMs, exitCode: run.exitCode, cliCpuMs, cliPeakRssBytes, controlPlaneCpuMs, controlPlaneRssBytes, processes, stages, run, ...(failure ? { failure } : {}) };
}

async function currentRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** Error lines (klog `E…`) per process log of `dir`, with the most frequent `err=` text: what strained first. */
async function controllerErrors(dir: string): Promise<string[]> {
  const logDir = controlPlaneLayout(dir).logDir;
  const found: string[] = [];
  for (const name of (await readdir(logDir).catch(() => [] as string[])).filter((n) => n.endsWith('.log')).sort()) {
    const lines = (await readFile(path.join(logDir, name), 'utf8')).split('\n').filter((l) => /^E\d{4} /.test(l));
    if (lines.length === 0) continue;
    const counts = new Map<string, number>();
    for (const line of lines) {
      // Without object names and ids, so the same failure on 100 machines counts as one kind.
      const err = (/err="([^"]{0,200})/.exec(line)?.[1] ?? line.slice(30, 130)).replace(/[a-z0-9]+(-[a-z0-9]+)+/g, '<name>');
      counts.set(err, (counts.get(err) ?? 0) + 1);
    }
    const [top, n] = [...counts].sort((a, b) => b[1] - a[1])[0]!;
    found.push(`${name.replace(/\.log$/, '')} ${lines.length} (most: ${n}× "${top.slice(0, 120)}")`);
  }
  return found;
}

async function scratchDir(prefix: string): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `provisioner-bench-${prefix}-`));
}

/** Destroys what `dir` holds (timed) and removes it; returns the destroy's wall time or undefined when it failed. */
async function teardown(dir: string, command: readonly string[], notes: string[]): Promise<number | undefined> {
  const run = await cli([...command, '--dir', dir], 30 * 60_000);
  if (run.exitCode !== 0) notes.push(`${command.join(' ')} on ${path.basename(dir)} exited ${run.exitCode}: ${run.stderr.split('\n').slice(-5).join(' / ')}`);
  // Whatever a failed teardown left running dies here.
  for (const entry of await readPidfiles(controlPlaneLayout(dir).stateDir)) {
    if (isAlive(entry)) for (const target of [-entry.pid, entry.pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Gone already, or not a group leader.
      }
    }
  }
  await rm(dir, { recursive: true, force: true });
  return run.exitCode === 0 ? run.durationMs : undefined;
}

interface CreateFigures {
  label: string;
  workers: number;
  runs: Measured[];
  destroyMs: number[];
  readyNodes: number[];
}

async function createInstall(controlPlane: number, workers: number, runs: number, notes: string[]): Promise<CreateFigures> {
  const label = `${controlPlane}+${workers}`;
  const figures: CreateFigures = { label, workers, runs: [], destroyMs: [], readyNodes: [] };
  for (let i = 0; i < runs; i++) {
    const dir = await scratchDir(`create-${controlPlane}x${workers}`);
    try {
      // The flags cap nothing: --workers N writes a pool of N; editing the file is what a user does too.
      const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'bench', '--control-plane-replicas', String(controlPlane), '--workers', '2'], 60_000);
      if (config.exitCode !== 0) throw new Error(`create install-config exited ${config.exitCode}: ${config.stderr}`);
      if (workers !== 2) {
        await editInstallConfig(dir, (doc) => {
          const pool = (doc.machinePools as { name: string; quantity: number }[]).find((p) => p.name === 'worker');
          if (!pool) throw new Error('no worker pool in the generated install-config.yaml');
          pool.quantity = workers;
        });
      }
      const measured = await measure(dir, ['create', 'cluster']);
      figures.runs.push(measured);
      const errors = await controllerErrors(dir);
      if (errors.length) notes.push(`create ${label} run ${i + 1}: error lines in the logs: ${errors.join('; ')}`);
      if (measured.failure) notes.push(`create ${label} run ${i + 1} failed first at: ${measured.failure}`);
      else {
        const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig')).catch((error: unknown) => {
          notes.push(`create ${label} run ${i + 1}: kubectl get nodes failed: ${String(error)}`);
          return [];
        });
        figures.readyNodes.push(nodes.filter((n) => n.ready).length);
      }
    } finally {
      const destroyMs = await teardown(dir, ['destroy', 'cluster'], notes);
      if (destroyMs !== undefined) figures.destroyMs.push(destroyMs);
    }
  }
  return figures;
}

const mib = (bytes: number) => bytes / 2 ** 20;
const seconds = (ms: number) => Math.round(ms / 100) / 10;

function medianOf(runs: readonly Measured[], pick: (m: Measured) => number): number {
  return median(runs.map(pick));
}

/** The CLI's API requests per second during `stage`, median over runs that report it. */
function requestRate(runs: readonly Measured[], stage: string): number | undefined {
  const rates = runs
    .map((r) => r.stages.find((s) => s.stage === stage))
    .filter((s): s is StageTiming & { requests: number } => s?.requests !== undefined && s.durationMs > 0)
    .map((s) => s.requests / (s.durationMs / 1000));
  return rates.length ? median(rates) : undefined;
}

function stageMedian(runs: readonly Measured[], stage: string): number | undefined {
  const values = runs.map((r) => r.stages.find((s) => s.stage === stage)?.durationMs).filter((v): v is number => v !== undefined);
  return values.length ? median(values) : undefined;
}

export async function run(): Promise<BenchRecord> {
  await ensureBuilt();
  const notes: string[] = [];

  // Baseline: the control plane alone.
  const boots: Measured[] = [];
  for (let i = 0; i < bootRuns; i++) {
    const dir = await scratchDir('boot');
    try {
      const measured = await measure(dir, ['management', 'start']);
      if (measured.failure) notes.push(`management start run ${i + 1} failed: ${measured.failure}`);
      else boots.push(measured);
    } finally {
      await teardown(dir, ['management', 'stop'], notes);
    }
  }

  const small = await createInstall(3, 2, createRuns, notes);
  const large = largeWorkers > 0 ? await createInstall(3, largeWorkers, 1, notes) : undefined;
  const okSmall = small.runs.filter((r) => !r.failure);
  const okLarge = large?.runs.filter((r) => !r.failure) ?? [];

  const figures: Record<string, number> = {
    bootMs: medianOf(boots, (m) => m.wallMs),
    bootCliCpuMs: medianOf(boots, (m) => m.cliCpuMs),
    bootCliPeakRssMiB: mib(medianOf(boots, (m) => m.cliPeakRssBytes)),
    create3x2Ms: medianOf(okSmall, (m) => m.wallMs),
    create3x2ControlPlaneStageMs: median(okSmall.map((m) => m.stages.find((s) => s.stage === 'controlplane')?.durationMs ?? Number.NaN)),
    create3x2CliCpuMs: medianOf(okSmall, (m) => m.cliCpuMs),
    create3x2ControlPlaneCpuMs: medianOf(okSmall, (m) => m.controlPlaneCpuMs),
    create3x2CliPeakRssMiB: mib(medianOf(okSmall, (m) => m.cliPeakRssBytes)),
    create3x2ControlPlaneRssMiB: mib(medianOf(okSmall, (m) => m.controlPlaneRssBytes)),
    destroy3x2Ms: median(small.destroyMs),
    create3x2WaitClusterRequestsPerSec: requestRate(okSmall, 'wait-cluster') ?? Number.NaN,
    create3x2WaitInfrastructureRequestsPerSec: requestRate(okSmall, 'wait-infrastructure') ?? Number.NaN,
  };
  if (large) {
    Object.assign(figures, {
      [`create3x${largeWorkers}Ms`]: medianOf(okLarge, (m) => m.wallMs),
      [`create3x${largeWorkers}CliCpuMs`]: medianOf(large.runs, (m) => m.cliCpuMs),
      [`create3x${largeWorkers}ControlPlaneCpuMs`]: medianOf(large.runs, (m) => m.controlPlaneCpuMs),
      [`create3x${largeWorkers}CliPeakRssMiB`]: mib(medianOf(large.runs, (m) => m.cliPeakRssBytes)),
      [`create3x${largeWorkers}ControlPlaneRssMiB`]: mib(medianOf(large.runs, (m) => m.controlPlaneRssBytes)),
      [`create3x${largeWorkers}ReadyNodes`]: median(large.readyNodes),
      [`destroy3x${largeWorkers}Ms`]: median(large.destroyMs),
      [`create3x${largeWorkers}WaitClusterRequestsPerSec`]: requestRate(large.runs, 'wait-cluster') ?? Number.NaN,
    });
  }
  const ratios: Record<string, number> = {
    bootShareOf3x2: figures.bootMs! / figures.create3x2Ms!,
    provisioningShareOf3x2: 1 - figures.create3x2ControlPlaneStageMs! / figures.create3x2Ms!,
    cliCpuShareOf3x2: figures.create3x2CliCpuMs! / (figures.create3x2CliCpuMs! + figures.create3x2ControlPlaneCpuMs!),
    cliCpuPerWallOf3x2: figures.create3x2CliCpuMs! / figures.create3x2Ms!,
  };
  if (large && okLarge.length > 0) {
    ratios[`create3x${largeWorkers}Over3x2`] = figures[`create3x${largeWorkers}Ms`]! / figures.create3x2Ms!;
    ratios[`cliCpuShareOf3x${largeWorkers}`] = figures[`create3x${largeWorkers}CliCpuMs`]! / (figures[`create3x${largeWorkers}CliCpuMs`]! + figures[`create3x${largeWorkers}ControlPlaneCpuMs`]!);
  }

  // Per-stage table: every stage any run reported, in the order of the first run that has it.
  const stageNames: string[] = [];
  for (const m of [...boots, ...small.runs, ...(large?.runs ?? [])]) for (const s of m.stages) if (!stageNames.includes(s.stage)) stageNames.push(s.stage);
  const cell = (value: number | undefined) => (value === undefined ? '-' : `${seconds(value)} s`);
  const rate = (value: number | undefined) => (value === undefined ? '-' : formatNumber(value));
  const stageTable: BenchTable = {
    title: 'stages (median seconds; controlplane/* are sub-stages of controlplane)',
    columns: ['stage', 'boot (management start)', 'create 3+2', 'CLI API req/s 3+2', ...(large ? [`create 3+${largeWorkers}`, `CLI API req/s 3+${largeWorkers}`] : [])],
    rows: stageNames.map((name) => [
      name,
      cell(stageMedian(boots, name)),
      cell(stageMedian(small.runs, name)),
      rate(requestRate(small.runs, name)),
      ...(large ? [cell(stageMedian(large.runs, name)), rate(requestRate(large.runs, name))] : []),
    ]),
  };
  const summary: BenchTable = {
    title: 'per run (medians)',
    columns: ['run', 'ok/runs', 'wall', 'CLI CPU', 'CLI CPU share', 'CLI peak RSS', 'control plane CPU', 'control plane RSS', 'destroy'],
    rows: [
      ['boot (management start)', `${boots.length}/${bootRuns}`, cell(figures.bootMs), cell(figures.bootCliCpuMs), '-', `${formatNumber(figures.bootCliPeakRssMiB!)} MiB`, '-', '-', '-'],
      ...[small, ...(large ? [large] : [])].map((f) => {
        const ok = f.runs.filter((r) => !r.failure);
        const cliCpu = medianOf(f.runs, (m) => m.cliCpuMs);
        const cpCpu = medianOf(f.runs, (m) => m.controlPlaneCpuMs);
        return [
          `create ${f.label}`,
          `${ok.length}/${f.runs.length}`,
          ok.length ? cell(medianOf(ok, (m) => m.wallMs)) : 'failed',
          cell(cliCpu),
          `${formatNumber((100 * cliCpu) / (cliCpu + cpCpu))} %`,
          `${formatNumber(mib(medianOf(f.runs, (m) => m.cliPeakRssBytes)))} MiB`,
          cell(cpCpu),
          `${formatNumber(mib(medianOf(f.runs, (m) => m.controlPlaneRssBytes)))} MiB`,
          f.destroyMs.length ? cell(median(f.destroyMs)) : 'failed',
        ];
      }),
    ],
  };
  // Where the CPU and memory go: each control-plane process at the end of the last run of each create.
  const creates = [small, ...(large ? [large] : [])];
  const processNames = [...new Set(creates.flatMap((f) => f.runs.at(-1)?.processes.map((p) => p.name) ?? []))];
  const processTable: BenchTable = {
    title: 'control-plane processes at the end of the last run (CPU since start / RSS)',
    columns: ['process', ...creates.map((f) => `create ${f.label}`)],
    rows: processNames.map((name) => [
      name,
      ...creates.map((f) => {
        const p = f.runs.at(-1)?.processes.find((x) => x.name === name);
        return p ? `${seconds(p.cpuMs)} s / ${formatNumber(mib(p.rssBytes))} MiB` : '-';
      }),
    ]),
  };
  notes.push(
    'Baseline: `management start` boots the same control plane (etcd, kube-apiserver, CRDs, 4 provider managers) a create boots in its controlplane stage.',
    'CLI CPU share = CLI utime+stime / (CLI + every control-plane process), from /proc; the control plane keeps running after an inmemory create, its CPU is read right after the CLI exits.',
    `Runs: boot ${bootRuns}, create 3+2 ${createRuns}, create 3+${largeWorkers} ${large ? 1 : 0}. Single runs on a shared 2-core machine are noisy; read the ratios.`,
  );
  if (large && okLarge.length > 0) notes.push(`3+${largeWorkers}: completed with ${median(large.readyNodes)} Ready nodes; see the error-line notes and the process table for what strained.`);
  return {
    name: 'create',
    figures,
    ratios,
    versions: { provisioner: cliVersion },
    tables: [summary, stageTable, processTable],
    notes,
  };
}
