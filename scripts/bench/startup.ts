/**
 * Start-up benchmark: how long the built CLI takes to print its version and its help,
 * against the floor of starting Node itself (`node -e ''`), measured in the same run.
 *
 * Cases, each a fresh `node` process timed from spawn to exit by this process:
 *  - floor: `node -e ''`;
 *  - `node bin/provisioner.js --version`, `--help`, and `create cluster --help` (a
 *    subcommand's full option help);
 *  - `provisioner hosts list` in an empty directory: a command that runs (its service
 *    imported, the install directory read) and exits 2 naming the management cluster it
 *    lacks, before any request;
 *  - reference: a bare import of @kubernetes/client-node, ink and react, which every start
 *    loaded before commands imported what they run in their actions;
 *  - reference: a bare import of @kubernetes/client-node, which every command that runs
 *    loaded before the client read certificate and token kubeconfigs without it.
 * Rounds run the cases in turn, so a burst of load on the shared machine hits all of them;
 * the figures are medians. Target: `--version` and `--help` within 150 ms of the floor.
 *
 * Each process's CPU time (user + system, from GNU time when /usr/bin/time exists, at its
 * 10 ms resolution) is reported too: on a loaded machine wall times stretch with the load,
 * CPU time much less.
 *
 * Runs: PROVISIONER_BENCH_STARTUP_RUNS (default 15), after one untimed warm-up round.
 * Builds dist/ first when it is older than src/ (bin/provisioner.js runs dist/main.js).
 *
 * Run: `npm run bench -- startup` (prints the table, writes bench-results/startup.json).
 */
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { cliVersion } from '../../src/version.js';
import { ensureBuilt } from '../../test/e2e/support/cli.js';
import { formatNumber, median, positiveEnv, repoRoot, round1, round2, type BenchRecord } from './record.js';

const runs = positiveEnv('PROVISIONER_BENCH_STARTUP_RUNS', 15);
/** The target: --version and --help at most this much slower than bare Node. */
const targetDeltaMs = 150;

interface StartupCase {
  /** Figure key prefix. */
  key: string;
  label: string;
  args: string[];
  /** Held to the target (the floor and the reference are not). */
  targeted: boolean;
  /** Checks the output (stdout, or stderr for a case that exits non-zero), so a case that fails fast is not mistaken for a fast one. */
  check?: (output: string) => boolean;
  /** The exit code the case must end with. Default: 0. */
  exitCode?: number;
}

/** An empty install directory for the case that runs a command (made by `run`, removed after). */
const emptyDir = path.join(os.tmpdir(), `provisioner-bench-startup-${process.pid}`);

const cases: StartupCase[] = [
  { key: 'floor', label: "floor: node -e ''", args: ['-e', ''], targeted: false },
  { key: 'version', label: 'provisioner --version', args: ['bin/provisioner.js', '--version'], targeted: true, check: (out) => out.trim() === cliVersion },
  { key: 'help', label: 'provisioner --help', args: ['bin/provisioner.js', '--help'], targeted: true, check: (out) => out.includes('Commands:') },
  {
    key: 'subcommandHelp',
    label: 'provisioner create cluster --help',
    args: ['bin/provisioner.js', 'create', 'cluster', '--help'],
    targeted: true,
    check: (out) => out.includes('--pivot-to <kubeconfig|self>'),
  },
  {
    key: 'commandRun',
    label: 'provisioner hosts list, empty directory (exits 2)',
    args: ['bin/provisioner.js', 'hosts', 'list', '--dir', emptyDir],
    targeted: false,
    exitCode: 2,
    check: (out) => out.includes('No running management cluster'),
  },
  {
    key: 'heavyImports',
    label: 'reference: import @kubernetes/client-node, ink, react',
    args: ['--input-type=module', '-e', "await Promise.all([import('@kubernetes/client-node'), import('ink'), import('react')]);"],
    targeted: false,
  },
  {
    key: 'clientImport',
    label: 'reference: import @kubernetes/client-node',
    args: ['--input-type=module', '-e', "await import('@kubernetes/client-node');"],
    targeted: false,
  },
];

const gnuTime = '/usr/bin/time';
const withCpu = existsSync(gnuTime);

interface Sample {
  wallMs: number;
  /** User + system CPU of the process; NaN without GNU time. */
  cpuMs: number;
}

/** One process from spawn to exit; throws when it fails or prints the wrong thing. */
async function timeOnce(c: StartupCase): Promise<Sample> {
  const [file, args] = withCpu ? [gnuTime, ['-f', 'cpu %U %S', process.execPath, ...c.args]] : [process.execPath, c.args];
  const started = performance.now();
  const { stdout, stderr, exitCode: code } = await execa(file, args, { cwd: repoRoot, timeout: 60_000, env: { ...process.env, NO_COLOR: '1' }, reject: false });
  const wallMs = performance.now() - started;
  const expected = c.exitCode ?? 0;
  if (code !== expected) throw new Error(`${c.label} exited with ${String(code)}, not ${expected}:\n${stderr.slice(0, 500)}`);
  const output = expected === 0 ? stdout : stderr;
  if (c.check && !c.check(output)) throw new Error(`${c.label} printed something unexpected:\n${output.slice(0, 500)}`);
  const cpu = /cpu (\d+\.\d+) (\d+\.\d+)\s*$/.exec(stderr);
  return { wallMs, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : Number.NaN };
}

export async function run(): Promise<BenchRecord> {
  await ensureBuilt();
  await mkdir(emptyDir, { recursive: true });
  try {
    return await measure();
  } finally {
    await rm(emptyDir, { recursive: true, force: true });
  }
}

async function measure(): Promise<BenchRecord> {
  const loadBefore = os.loadavg()[0] ?? 0;
  for (const c of cases) await timeOnce(c);
  const samples = new Map<string, Sample[]>(cases.map((c) => [c.key, []]));
  for (let round = 0; round < runs; round++) {
    for (const c of cases) samples.get(c.key)!.push(await timeOnce(c));
  }
  const loadAfter = os.loadavg()[0] ?? 0;

  const med = (key: string) => median(samples.get(key)!.map((s) => s.wallMs));
  const cpuMed = (key: string) => median(samples.get(key)!.map((s) => s.cpuMs));
  const floor = med('floor');
  const floorCpu = Math.round(cpuMed('floor'));
  const figures: Record<string, number> = { runs, targetDeltaMs, loadAverage1mBefore: round2(loadBefore), loadAverage1mAfter: round2(loadAfter) };
  const ratios: Record<string, number> = {};
  const rows: (string | number)[][] = [];
  const missed: string[] = [];
  for (const c of cases) {
    const ms = med(c.key);
    const delta = ms - floor;
    figures[`${c.key}Ms`] = round1(ms);
    const min = Math.min(...samples.get(c.key)!.map((s) => s.wallMs));
    const cpu = Math.round(cpuMed(c.key));
    figures[`${c.key}MinMs`] = round1(min);
    if (withCpu) figures[`${c.key}CpuMs`] = round1(cpu);
    if (c.key !== 'floor') {
      figures[`${c.key}OverFloorMs`] = round1(delta);
      if (withCpu) figures[`${c.key}OverFloorCpuMs`] = round1(cpu - floorCpu);
      ratios[`${c.key}OverFloor`] = round2(ms / floor);
    }
    if (c.targeted && delta > targetDeltaMs) missed.push(c.label);
    rows.push([
      c.label,
      `${formatNumber(ms)} ms`,
      `${formatNumber(min)} ms`,
      c.key === 'floor' ? '' : `${delta >= 0 ? '+' : ''}${formatNumber(delta)} ms`,
      c.key === 'floor' ? '' : `${formatNumber(ms / floor)} x`,
      withCpu ? `${formatNumber(cpu)} ms` : 'n/a',
      withCpu && c.key !== 'floor' ? `${cpu - floorCpu >= 0 ? '+' : ''}${formatNumber(cpu - floorCpu)} ms` : '',
      c.targeted ? (delta <= targetDeltaMs ? 'met' : 'MISSED') : '',
    ]);
  }
  figures.targetMet = missed.length === 0 ? 1 : 0;

  return {
    name: 'startup',
    figures,
    ratios,
    versions: { provisioner: cliVersion, node: process.version },
    tables: [
      {
        title: `start-up, spawn to exit; medians of ${runs} runs (cases interleaved); target: within ${targetDeltaMs} ms of the floor`,
        columns: ['case', 'median', 'min', 'vs floor', 'ratio', 'CPU', 'CPU vs floor', 'target'],
        rows,
      },
    ],
    notes: [
      missed.length === 0
        ? `target met: --version, --help and create cluster --help are each within ${targetDeltaMs} ms of bare Node.`
        : `target MISSED by: ${missed.join(', ')}.`,
      `1-minute load average ${loadBefore.toFixed(2)} before and ${loadAfter.toFixed(2)} after, on ${os.availableParallelism()} cores: the machine is shared, so medians of interleaved runs, not single times.`,
      'The first reference row is what every start paid before each command imported what it runs inside its action; no command that prints help or the version loads it now (src/cli/startup.test.ts).',
      'The second is what a command that runs paid before the client read certificate and token kubeconfigs without the library (src/kube/client.ts imports it only for a plugin\'s credentials).',
    ],
  };
}
