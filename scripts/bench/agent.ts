/**
 * Agent benchmark: how fast a host applies a day-2 plan, and what the agent costs a host
 * while it only watches. Hosts are network namespaces on this machine
 * (test/support/netns.ts): `management start --listen-address 198.18.0.1` in a machine
 * namespace, 10 hosts with a registered provisioner-agent each, reaching it through the
 * forwarder. Needs root and iproute2.
 *
 * Figures:
 *  - `plan apply` → Applied for a plan of one file and one instruction (`/bin/true`), on
 *    one host (median of PROVISIONER_BENCH_AGENT_RUNS runs, default 5) and on 10 hosts at
 *    once (10 `plan apply` started together; until the last host is Applied; median of
 *    PROVISIONER_BENCH_AGENT_FLEET_RUNS rounds, default 3). Applied is seen by a watch
 *    (`kubectl get nodeplans -A -w`, inside the machine namespace) running the whole time,
 *    so no polling interval is added.
 *  - baseline, measured in the same run: the `plan apply` command alone (spawn to exit),
 *    the part of the latency the CLI itself takes; the ratio is latency over it.
 *  - the idle agent: VmRSS and CPU (user + system from /proc over an idle window of
 *    PROVISIONER_BENCH_AGENT_IDLE_S seconds, default 30) of each of the 10 agents, watching
 *    with a 30 s heartbeat (the agent's default), against the agent manager and the
 *    forwarder of the same run.
 *
 * Run: `npm run bench -- agent` (prints the table, writes bench-results/agent.json).
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sleep } from '../../src/concurrency.js';
import type { ResultPromise } from 'execa';
import { cliVersion } from '../../src/version.js';
import { ensureBuilt } from '../../test/e2e/support/cli.js';
import { HostsLab, type RunningAgent } from '../../test/e2e/support/hosts-lab.js';
import type { TestHost } from '../../test/support/netns.js';
import { formatNumber, median, MB, positiveEnv, round1, round2, type BenchRecord } from './record.js';

const fleetSize = 10;
const runs = positiveEnv('PROVISIONER_BENCH_AGENT_RUNS', 5);
const fleetRuns = positiveEnv('PROVISIONER_BENCH_AGENT_FLEET_RUNS', 3);
const idleSeconds = positiveEnv('PROVISIONER_BENCH_AGENT_IDLE_S', 30);
/** A plan that is not Applied within this long fails the benchmark. */
const appliedTimeoutMs = 120_000;

/** `<namespace>/<name>` → when the watch first saw it Applied (performance.now()). */
class AppliedWatch {
  private readonly seen = new Map<string, number>();
  private readonly waiters = new Map<string, () => void>();
  private buffer = '';

  constructor(readonly child: ResultPromise) {
    child.stdout?.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString();
      const lines = this.buffer.split('\n');
      this.buffer = lines.pop() ?? '';
      for (const line of lines) {
        const [key, phase] = line.trim().split(' ');
        if (!key || phase !== 'Applied' || this.seen.has(key)) continue;
        this.seen.set(key, performance.now());
        this.waiters.get(key)?.();
      }
    });
  }

  async applied(key: string): Promise<number> {
    if (!this.seen.has(key)) {
      await Promise.race([
        new Promise<void>((resolve) => this.waiters.set(key, resolve)),
        sleep(appliedTimeoutMs).then(() => {
          throw new Error(`plan ${key} was not Applied within ${appliedTimeoutMs / 1000} s`);
        }),
      ]);
    }
    return this.seen.get(key)!;
  }
}

/** VmRSS in bytes and user + system CPU in ms of a process, from /proc. */
async function usage(pid: number): Promise<{ rssBytes: number; cpuMs: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? Number.NaN);
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  const ticks = Number(stat[11]) + Number(stat[12]);
  return { rssBytes: rssKb * 1024, cpuMs: (ticks * 1000) / 100 };
}

async function measureIdle(pids: Record<string, number>): Promise<Record<string, { rssMB: number; cpuPercent: number }>> {
  const before = Object.fromEntries(await Promise.all(Object.entries(pids).map(async ([k, pid]) => [k, await usage(pid)] as const)));
  const started = performance.now();
  await sleep(idleSeconds * 1000);
  const elapsedMs = performance.now() - started;
  const result: Record<string, { rssMB: number; cpuPercent: number }> = {};
  for (const [k, pid] of Object.entries(pids)) {
    const after = await usage(pid);
    result[k] = { rssMB: after.rssBytes / MB, cpuPercent: ((after.cpuMs - before[k]!.cpuMs) / elapsedMs) * 100 };
  }
  return result;
}

export async function run(): Promise<BenchRecord> {
  await ensureBuilt();
  const lab = await HostsLab.create(fleetSize);
  const agents: RunningAgent[] = [];
  let watch: AppliedWatch | undefined;
  const loadBefore = os.loadavg()[0] ?? 0;
  try {
    const start = await lab.startManagement();
    if (start.exitCode !== 0) throw new Error(`management start exited ${start.exitCode}:\n${start.stderr}`);
    for (const host of lab.hosts) {
      const registered = await lab.register(host, await lab.registrationCommand());
      if (registered.exitCode !== 0) throw new Error(`${host.name} did not register:\n${registered.stderr}`);
    }
    // The idle window first, with the agents' default heartbeat, before any plan ran.
    for (const host of lab.hosts) agents.push(lab.startAgent(host, ['--heartbeat-interval', '30s']));
    await sleep(5_000);
    const status = await lab.cli(['management', 'status', '--dir', lab.mgmt, '--output', 'json']);
    const processes = status.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; data?: { processes?: { name: string; pid: number }[] } })
      .find((e) => e.type === 'result')?.data?.processes ?? [];
    const pidOf = (name: string) => processes.find((p) => p.name === name)?.pid ?? Number.NaN;
    const idle = await measureIdle({
      ...Object.fromEntries(agents.map((a, i) => [`agent${i}`, a.process.pid!])),
      manager: pidOf('capi-manager'),
      forwarder: pidOf('provisioner-forwarder'),
    });
    const agentIdle = agents.map((_, i) => idle[`agent${i}`]!);

    watch = new AppliedWatch(lab.spawnKubectl(['get', 'nodeplans', '-A', '--watch', '--output-watch-events=false', '-o', 'jsonpath={.metadata.namespace}/{.metadata.name} {.status.phase}{"\\n"}']));
    await sleep(2_000); // the watch has listed and is watching

    const planSpec = (host: TestHost, plan: string) => ({
      files: [{ path: path.join(host.dir, `${plan}.conf`), content: 'bench = true\n', mode: '0644' }],
      instructions: [{ name: 'true', command: '/bin/true' }],
    });
    /** `plan apply` of a fresh plan on `host`: the command's own duration and the time to Applied, both from its spawn. */
    let planCount = 0;
    const applyOne = async (host: TestHost) => {
      const plan = `bench-${++planCount}`;
      const started = performance.now();
      const applied = await lab.applyPlan(host, plan, planSpec(host, plan));
      const commandMs = performance.now() - started;
      if (applied.exitCode !== 0) throw new Error(`plan apply ${plan} on ${host.name} exited ${applied.exitCode}:\n${applied.stderr}`);
      const doneAt = await watch!.applied(`host-${host.name}/${plan}`);
      return { commandMs, appliedMs: doneAt - started, afterCommandMs: doneAt - started - commandMs };
    };

    const single: { commandMs: number; appliedMs: number; afterCommandMs: number }[] = [];
    await applyOne(lab.hosts[0]!); // warm-up: first CLI start, first plan of the agent
    for (let i = 0; i < runs; i++) single.push(await applyOne(lab.hosts[i % fleetSize]!));

    const fleet: { lastMs: number; medianMs: number; commandMs: number; afterCommandMs: number }[] = [];
    for (let round = 0; round < fleetRuns; round++) {
      const results = await Promise.all(lab.hosts.map((host) => applyOne(host)));
      fleet.push({ lastMs: Math.max(...results.map((r) => r.appliedMs)), medianMs: median(results.map((r) => r.appliedMs)), commandMs: median(results.map((r) => r.commandMs)), afterCommandMs: Math.max(...results.map((r) => r.afterCommandMs)) });
    }
    const loadAfter = os.loadavg()[0] ?? 0;

    const singleApplied = median(single.map((s) => s.appliedMs));
    const singleCommand = median(single.map((s) => s.commandMs));
    const fleetLast = median(fleet.map((f) => f.lastMs));
    const fleetMedian = median(fleet.map((f) => f.medianMs));
    const fleetCommand = median(fleet.map((f) => f.commandMs));
    const singleAfter = median(single.map((s) => s.afterCommandMs));
    const fleetAfter = median(fleet.map((f) => f.afterCommandMs));
    const agentRss = median(agentIdle.map((a) => a.rssMB));
    const agentCpu = median(agentIdle.map((a) => a.cpuPercent));
    const manager = idle.manager!;
    const forwarder = idle.forwarder!;
    const figures: Record<string, number> = {
      runs, fleetRuns, fleetSize, idleSeconds,
      singleAppliedMs: round1(singleApplied),
      singlePlanApplyCommandMs: round1(singleCommand),
      fleetLastAppliedMs: round1(fleetLast),
      fleetMedianAppliedMs: round1(fleetMedian),
      fleetPlanApplyCommandMs: round1(fleetCommand),
      singleAfterCommandMs: round1(singleAfter),
      fleetMaxAfterCommandMs: round1(fleetAfter),
      agentIdleRssMB: round1(agentRss),
      agentIdleRssMaxMB: round1(Math.max(...agentIdle.map((a) => a.rssMB))),
      agentIdleCpuPercent: round2(agentCpu),
      managerIdleRssMB: round1(manager.rssMB),
      managerIdleCpuPercent: round2(manager.cpuPercent),
      forwarderIdleRssMB: round1(forwarder.rssMB),
      forwarderIdleCpuPercent: round2(forwarder.cpuPercent),
      loadAverage1mBefore: round2(loadBefore),
      loadAverage1mAfter: round2(loadAfter),
    };
    const ratios = {
      singleAppliedOverPlanApplyCommand: round2(singleApplied / singleCommand),
      fleetLastAppliedOverSingleApplied: round2(fleetLast / singleApplied),
      agentIdleRssOverManager: round2(agentRss / manager.rssMB),
    };
    const ms = (n: number) => `${formatNumber(n)} ms`;
    return {
      name: 'agent',
      figures,
      ratios,
      versions: { provisioner: cliVersion },
      tables: [
        {
          title: `plan apply -> Applied, one file and one instruction (medians: ${runs} single runs, ${fleetRuns} rounds of ${fleetSize} hosts at once)`,
          columns: ['case', 'to Applied', 'plan apply command', 'ratio', 'Applied after the command returned'],
          rows: [
            ['1 host', ms(singleApplied), ms(singleCommand), `${formatNumber(singleApplied / singleCommand)} x`, ms(singleAfter)],
            [`${fleetSize} hosts at once, last host`, ms(fleetLast), ms(fleetCommand), `${formatNumber(fleetLast / fleetCommand)} x`, `${ms(fleetAfter)} (slowest host)`],
            [`${fleetSize} hosts at once, median host`, ms(fleetMedian), ms(fleetCommand), `${formatNumber(fleetMedian / fleetCommand)} x`, ''],
          ],
        },
        {
          title: `idle for ${idleSeconds} s (watching, 30 s heartbeat): VmRSS and CPU`,
          columns: ['process', 'VmRSS', 'CPU'],
          rows: [
            [`provisioner-agent (median of ${fleetSize})`, `${formatNumber(agentRss)} MB`, `${formatNumber(agentCpu)} %`],
            ['capi-manager, the agent provider\'s process (reference)', `${formatNumber(manager.rssMB)} MB`, `${formatNumber(manager.cpuPercent)} %`],
            ['provisioner-forwarder', `${formatNumber(forwarder.rssMB)} MB`, `${formatNumber(forwarder.cpuPercent)} %`],
          ],
        },
      ],
      notes: [
        'Baseline: the plan apply command alone (spawn to exit, in the same runs): the CLI part of the latency. "Applied after the command returned" is the agent\'s part: seeing the plan through its watch, taking the lock, writing the file, running the instruction and reporting Applied.',
        `${fleetSize} hosts at once: ${fleetSize} plan apply commands started together on ${os.availableParallelism()} cores, so the CLI starts compete for CPU with the agents; "last host" is when the last of the ${fleetSize} plans was Applied.`,
        `CPU is user + system time over the idle window, in percent of one core; 1-minute load average ${loadBefore.toFixed(2)} before and ${loadAfter.toFixed(2)} after (the machine is shared).`,
      ],
    };
  } finally {
    for (const agent of agents) agent.process.kill('SIGKILL');
    watch?.child.kill('SIGKILL');
    await lab.remove();
  }
}
