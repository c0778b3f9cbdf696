/**
 * Local control-plane benchmark, with the real bundle built by `npm run bundle`:
 *
 *  - boot time of a temporary control plane (`prepareLocalControlPlane`, detached: false),
 *    split by its `controlplane/*` stage events: PKI, etcd ready, API server ready, CRDs
 *    established, controllers ready, webhooks installed; median of 3 boots on fresh dirs.
 *  - the floor, measured in the same run and interleaved with our boots: the same etcd and
 *    kube-apiserver binaries spawned by hand with the same flags (`etcdArgs`/`apiServerArgs`)
 *    and Go runtime settings (`goRuntimeEnv`)
 *    and the PKI of a prepared dir, polled on /readyz every 50 ms, then the same namespaces
 *    and CRDs applied one by one and polled until Established. Our overhead is the ratio of
 *    the comparable window (etcd spawned → every CRD Established) over that floor.
 *  - footprint of two lasting control planes (detached) on fresh dirs: the processes
 *    `create cluster` runs on the in-memory platform (the set issue 13 budgets) and every
 *    process of `management start`; 15 s and 60 s after the start returns, each process's
 *    VmRSS, its Go heap in use (`go_memstats_heap_inuse_bytes` from its own metrics
 *    endpoint) and the CPU it has used, beside openshift-install's published figures and
 *    their 395 MB total.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sleep } from '../../src/concurrency.js';
import { apiServerArgs, apiServerEnv, etcdArgs, forwarderArgs, goRuntimeEnv, loopback } from '../../src/controlplane/components.js';
import { lightenCrd } from '../../src/controlplane/crds.js';
import { loadComponents, type ProviderComponents } from '../../src/controlplane/install.js';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { forwarderName, stopRecordedControlPlane } from '../../src/controlplane/local-controlplane.js';
import { rewriteWebhooks } from '../../src/controlplane/webhooks.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { loadCatalog, type BundleCatalog } from '../../src/embedded/catalog.js';
import type { EventSink, ProvisionerEvent } from '../../src/events.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { platformNamed } from '../../src/platforms/index.js';
import { ensureControlPlanePki, writeKubeconfig } from '../../src/pki/index.js';
import { renderArgs } from '../../src/process/args.js';
import { defaultPdeathsigWrapper } from '../../src/process/managed-process.js';
import { isAlive, readPidfiles, type PidfileEntry } from '../../src/process/pidfile.js';
import { allocatePorts } from '../../src/process/ports.js';
import { httpProbe, type ReadinessProbe } from '../../src/process/probes.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { managementControllers } from '../../src/services/management.js';
import { cliVersion } from '../../src/version.js';
import { formatNumber, MB, median, type BenchRecord, type BenchTable } from './record.js';

/**
 * openshift-install's local control plane, as published (../shared/reference/004_…, "Disk space
 * and memory", measured on macOS): resident memory per process, MB. It runs no kubeadm,
 * in-memory or vSphere providers; its infrastructure provider (AWS's, 35 MB) is set beside
 * each set's own (see `footprintSets`).
 */
const openshiftMB = { etcd: 52, 'kube-apiserver': 280, core: 28, infrastructure: 35 } as const;
/** Their sum, about 395 MB: the issue's budget for the in-memory set (six processes when it was written, three now). */
const footprintBudgetMB = 395;

/** Boots timed against the floor. Default 3; `PROVISIONER_BENCH_CONTROLPLANE_BOOTS` overrides it. */
const boots = Math.max(1, Number(process.env['PROVISIONER_BENCH_CONTROLPLANE_BOOTS']) || 3);
/** `management start` runs sampled for the footprint (each takes a minute). Default 3; `PROVISIONER_BENCH_CONTROLPLANE_FOOTPRINT_RUNS` overrides it. */
const footprintRuns = Math.max(1, Number(process.env['PROVISIONER_BENCH_CONTROLPLANE_FOOTPRINT_RUNS']) || 3);
/** When the footprint is sampled, after `management start` returns: the caches fill in the first seconds, the heap settles later. */
const sampleAtMs = [15_000, 60_000] as const;
/** Poll interval of the floor: tighter than our probes (100 ms), so it stays a floor. */
const floorPollMs = 50;
/** The overhead we aim at over the floor. */
const targetRatio = 1.15;

const stages = ['pki', 'etcd', 'kube-apiserver', 'crds', 'controllers', 'webhooks'] as const;
type Stage = (typeof stages)[number];

interface OurBoot {
  /** Stage durations from the stage events, ms. */
  stageMs: Record<Stage, number>;
  /** Catalog, binaries and construction before start(), ms. */
  prepareMs: number;
  /** Between the API server stage and the CRD stage (kubeconfig, client, parsing the component YAML), ms. */
  unstagedMs: number;
  /** etcd stage start → CRD stage end: the window the floor measures, ms. */
  windowMs: number;
  totalMs: number;
  stopMs: number;
}

interface FloorBoot {
  etcdMs: number;
  apiServerMs: number;
  crdsMs: number;
  windowMs: number;
}

/** Records each event with the time it was emitted. */
class TimedSink implements EventSink {
  readonly events: { at: number; event: ProvisionerEvent }[] = [];
  emit(event: ProvisionerEvent): void {
    this.events.push({ at: performance.now(), event });
  }
  stageTime(stage: string, state: 'started' | 'succeeded'): number {
    const found = this.events.find(({ event }) => event.type === 'stage' && event.stage === `controlplane/${stage}` && event.state === state);
    if (!found) throw new Error(`no ${state} event for stage controlplane/${stage}`);
    return found.at;
  }
}

/** One process at one moment: resident memory, Go heap in use (from its metrics), CPU used since it started. */
interface ProcessSample {
  rssBytes: number;
  /** Proportional set size (smaps_rollup): pages shared with another process counted in part; NaN when unreadable. */
  pssBytes: number;
  /** The part of VmRSS that is the process's mapped files (its own binary, mostly). */
  rssFileBytes: number;
  heapInuseBytes: number | undefined;
  cpuSeconds: number;
}

/** Samples per process name, at each of `sampleAtMs`. */
type Footprint = Record<string, ProcessSample>[];

const clockTicksPerSecond = 100;

async function sampleProcess(pid: number, metrics: () => Promise<string>): Promise<ProcessSample | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  const kb = status ? /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] : undefined;
  if (!kb || !stat) return undefined;
  // Fields after the command name: state is 3rd, utime 14th and stime 15th of the whole line.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / clockTicksPerSecond;
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  const pssKb = /^Pss:\s+(\d+) kB/m.exec(rollup)?.[1];
  const fileKb = /^RssFile:\s+(\d+) kB/m.exec(status ?? '')?.[1];
  const text = await metrics().catch(() => undefined);
  const heap = text ? /^go_memstats_heap_inuse_bytes\s+(\S+)$/m.exec(text)?.[1] : undefined;
  return {
    rssBytes: Number(kb) * 1024,
    pssBytes: pssKb !== undefined ? Number(pssKb) * 1024 : Number.NaN,
    rssFileBytes: Number(fileKb) * 1024,
    heapInuseBytes: heap !== undefined ? Number(heap) : undefined,
    cpuSeconds,
  };
}

/** The metrics of each recorded process: etcd's and the managers' plain-http endpoints on loopback, the API server's /metrics as admin. */
function metricsReader(entry: PidfileEntry, kube: KubeClient): () => Promise<string> {
  const plain = (port: number | undefined) => async () => {
    const response = await fetch(`http://${loopback}:${port}/metrics`, { signal: AbortSignal.timeout(5_000) });
    return response.text();
  };
  if (entry.name === 'etcd') return plain(entry.ports.metrics);
  if (entry.name === 'kube-apiserver') return () => kube.raw('/metrics');
  return plain(entry.ports.diagnostics);
}

/**
 * A lasting control plane as a user gets one (detached processes): `inmemory` is what
 * `create cluster` leaves running on the in-memory platform (etcd, kube-apiserver and
 * capi-manager serving the core, kubeadm bootstrap, kubeadm control-plane and in-memory
 * providers, and only their CRDs: the set the issue budgets); `management` is what `management start` runs (every
 * bundled provider). Both are started and stopped through their LocalControlPlane: its
 * supervisor lives in this process and would restart a controller stopped any other way
 * (`management stop` from here left them running).
 */
const footprintSets = {
  inmemory: {
    title: 'what `create cluster` runs on the in-memory platform (the issue\'s set: etcd, kube-apiserver, and the core, kubeadm and in-memory providers, all four in capi-manager)',
    // capi-manager serves both openshift's core and infrastructure processes here.
    openshift: { etcd: openshiftMB.etcd, 'kube-apiserver': openshiftMB['kube-apiserver'], 'capi-manager': openshiftMB.core + openshiftMB.infrastructure },
    controllers: () => platformNamed('inmemory').controllers,
    forwarder: false,
  },
  management: {
    title: '`management start --listen-address`, no --platform: every bundled provider, and the forwarder (the baseline: the platform selection switched off)',
    openshift: { etcd: openshiftMB.etcd, 'kube-apiserver': openshiftMB['kube-apiserver'], 'capi-manager': openshiftMB.core, 'capa-manager': openshiftMB.infrastructure },
    controllers: () => undefined,
    forwarder: true,
  },
  'management-hosts': {
    title: '`management start --platform hosts --listen-address`: the core and kubeadm providers and the agent provider (the hosts provider) in capi-manager, and the forwarder',
    // capi-manager serves both openshift's core and infrastructure processes here.
    openshift: { etcd: openshiftMB.etcd, 'kube-apiserver': openshiftMB['kube-apiserver'], 'capi-manager': openshiftMB.core + openshiftMB.infrastructure },
    controllers: () => managementControllers('hosts'),
    forwarder: true,
  },
} as const;
/** Each set with the one it is set beside in the same run: the same start with the setting switched off. */
const footprintPeers: Partial<Record<string, string>> = { 'management-hosts': 'management' };
type FootprintSet = keyof typeof footprintSets;
const footprintSetNames = Object.keys(footprintSets) as FootprintSet[];

/**
 * A running forwarder for a lasting control plane, the way `--listen-address` starts one but on a
 * loopback port: the benchmark names no address of this machine. Memory of an idle forwarder does
 * not depend on the address it listens on.
 */
async function startForwarder(binary: string, apiServerPort: number, dir: string): Promise<ChildProcess> {
  const [listen, health, artifacts] = await allocatePorts(3);
  const artifactsDir = path.join(dir, 'bench-artifacts');
  await mkdir(artifactsDir, { recursive: true, mode: 0o700 });
  const args = forwarderArgs(`${loopback}:${listen}`, apiServerPort, { listen: listen!, health: health!, artifacts: artifacts! }, { listen: `${loopback}:${artifacts}`, dir: artifactsDir });
  const child = spawnPlain(binary, renderArgs(args), dir);
  await pollReady(forwarderName, child, httpProbe(`http://${loopback}:${health}/readyz`));
  return child;
}

/** One lasting control plane of `set` on a fresh dir, sampled at each of `sampleAtMs` after its start returned, then stopped. */
async function measureFootprint(dir: string, set: FootprintSet, forwarderBinary: string): Promise<Footprint> {
  const sink = new TimedSink();
  const abort = new AbortController();
  const controllers = footprintSets[set].controllers();
  const controlPlane = await prepareLocalControlPlane({ dir, detached: true, sink, signal: abort.signal, ...(controllers ? { controllers } : {}) });
  let forwarder: ChildProcess | undefined;
  try {
    await controlPlane.start();
    const entries = await readPidfiles(controlPlaneLayout(dir).stateDir);
    const apiServerPort = entries.find((e) => e.name === 'kube-apiserver')?.ports.secure;
    if (footprintSets[set].forwarder) {
      if (apiServerPort === undefined) throw new Error('no kube-apiserver pidfile with its secure port');
      forwarder = await startForwarder(forwarderBinary, apiServerPort, dir);
    }
    const returned = performance.now();
    const kube = controlPlane.kube;
    const samples: Footprint = [];
    for (const at of sampleAtMs) {
      await sleep(Math.max(0, at - (performance.now() - returned)));
      const sample: Record<string, ProcessSample> = {};
      for (const entry of await readPidfiles(controlPlaneLayout(dir).stateDir)) {
        const measured = isAlive(entry) ? await sampleProcess(entry.pid, metricsReader(entry, kube)) : undefined;
        if (measured) sample[entry.name] = measured;
      }
      // The forwarder serves no metrics: its heap is n/a.
      // setpriv execs it: the child's pid is the forwarder's.
      const forwarded = forwarder?.pid !== undefined ? await sampleProcess(forwarder.pid, () => Promise.reject(new Error('no metrics'))) : undefined;
      if (forwarded) sample[forwarderName] = forwarded;
      samples.push(sample);
    }
    return samples;
  } finally {
    await terminate(forwarder);
    await controlPlane.stop();
    // Whatever the supervisor did not own (nothing, normally) is stopped from the pidfiles.
    await stopRecordedControlPlane(dir, sink);
    abort.abort();
  }
}

async function bootOurs(dir: string): Promise<OurBoot> {
  const sink = new TimedSink();
  const abort = new AbortController();
  const started = performance.now();
  const controlPlane = await prepareLocalControlPlane({ dir, detached: false, sink, signal: abort.signal });
  const prepared = performance.now();
  try {
    await controlPlane.start();
    const totalMs = performance.now() - started;
    const stageMs = Object.fromEntries(stages.map((s) => [s, sink.stageTime(s, 'succeeded') - sink.stageTime(s, 'started')])) as Record<Stage, number>;
    const stopStarted = performance.now();
    await controlPlane.stop();
    return {
      stageMs,
      prepareMs: prepared - started,
      unstagedMs: sink.stageTime('crds', 'started') - sink.stageTime('kube-apiserver', 'succeeded'),
      windowMs: sink.stageTime('crds', 'succeeded') - sink.stageTime('etcd', 'started'),
      totalMs,
      stopMs: performance.now() - stopStarted,
    };
  } finally {
    await controlPlane.stop().catch(() => undefined);
    abort.abort();
  }
}

/** Polls `probe` every 50 ms until it passes; fails when the process exits first or after 120 s. */
async function pollReady(what: string, child: ChildProcess, probe: ReadinessProbe): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited with ${child.exitCode ?? child.signalCode} before it was ready`);
    if (await probe(AbortSignal.timeout(2_000)).catch(() => false)) return;
    await sleep(floorPollMs);
  }
  throw new Error(`${what} was not ready within 120 s`);
}

/** Spawns with the parent-death signal when available, so a crashed benchmark leaves nothing behind; output is dropped. */
function spawnPlain(binary: string, args: string[], cwd: string): ChildProcess {
  const wrapper = defaultPdeathsigWrapper();
  const [command, commandArgs] = wrapper ? [wrapper, ['--pdeathsig', 'KILL', '--', binary, ...args]] : [binary, args];
  // The same Go runtime settings and API server environment as ours (etcd ignores the latter): the floor differs in orchestration only.
  return spawn(command, commandArgs, { cwd, stdio: 'ignore', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...goRuntimeEnv('temporary'), ...apiServerEnv() } });
}

async function terminate(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  if ((await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)])) === false) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** The floor: etcd and kube-apiserver by hand with our flags and a prepared PKI, then plain sequential applies. */
async function bootFloor(pkiDir: string, controllers: string[], dir: string, early: readonly KubeObject[], binaries: Record<string, string>): Promise<FloorBoot> {
  const pki = await ensureControlPlanePki(pkiDir, { controllers });
  const [client, peer, metrics, secure] = await allocatePorts(4);
  const dataDir = path.join(dir, 'etcd');
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const adminCert = await readFile(pki.admin.certFile, 'utf8');
  const adminKey = await readFile(pki.admin.keyFile, 'utf8');
  const kubeconfig = path.join(dir, 'kubeconfig');
  let etcd: ChildProcess | undefined;
  let apiServer: ChildProcess | undefined;
  let kube: KubeClient | undefined;
  try {
    const t0 = performance.now();
    etcd = spawnPlain(binaries.etcd!, renderArgs(etcdArgs(pki, dataDir, { client: client!, peer: peer!, metrics: metrics! })), dir);
    await pollReady('etcd', etcd, httpProbe(`http://${loopback}:${metrics}/readyz`));
    const t1 = performance.now();
    apiServer = spawnPlain(binaries['kube-apiserver']!, renderArgs(apiServerArgs(pki, client!, { secure: secure! }, { 'cert-dir': path.join(dir, 'apiserver-generated') })), dir);
    await pollReady('kube-apiserver', apiServer, httpProbe(`https://${loopback}:${secure}/readyz`, { ca: pki.caCertPem, cert: adminCert, key: adminKey }));
    const t2 = performance.now();
    await writeKubeconfig(kubeconfig, { server: `https://${loopback}:${secure}`, caCertPem: pki.caCertPem, clientCertPem: adminCert, clientKeyPem: adminKey });
    kube = KubeClient.fromFile(kubeconfig);
    for (const obj of early.filter((o) => o.kind === 'Namespace')) await kube.apply(obj);
    for (const obj of early.filter((o) => o.kind !== 'Namespace')) await kube.apply(obj);
    const crdNames = new Set(early.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name));
    type Crd = KubeObject & { status?: { conditions?: { type: string; status: string }[] } };
    for (;;) {
      const crds = await kube.list<Crd>('apiextensions.k8s.io/v1', 'CustomResourceDefinition');
      const established = crds.filter((c) => crdNames.has(c.metadata.name) && c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True'));
      if (established.length === crdNames.size) break;
      await sleep(floorPollMs);
    }
    const t3 = performance.now();
    return { etcdMs: t1 - t0, apiServerMs: t2 - t1, crdsMs: t3 - t2, windowMs: t3 - t0 };
  } finally {
    kube?.close();
    await terminate(apiServer);
    await terminate(etcd);
  }
}

/** What the CRD stage applies: every object but webhook configurations and the inventory, webhooks pointed at loopback, CRDs lightened as installCrds does. */
function earlyObjects(components: readonly ProviderComponents[], catalog: BundleCatalog, caPem: string): KubeObject[] {
  const endpoints = new Map(catalog.components.filter((c) => c.binary).map((c, i) => [c.namespace, { port: 40_000 + i }]));
  const late = new Set(['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'Provider']);
  return components.flatMap((c) => c.objects.filter((o) => !late.has(o.kind)).map((o) => lightenCrd(rewriteWebhooks(o, endpoints, caPem))));
}

/** Every process name the runs sampled, etcd and kube-apiserver first. */
function processNames(footprints: readonly Footprint[]): string[] {
  return [...new Set(footprints.flatMap((f) => f.flatMap((sample) => Object.keys(sample))))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** Median over the runs of one figure of one process at one sample; NaN when no run measured it. */
function processMedian(footprints: readonly Footprint[], name: string, at: number, pick: (p: ProcessSample) => number | undefined): number {
  return median(footprints.flatMap((f) => {
    const value = f[at]?.[name] ? pick(f[at][name]) : undefined;
    return value !== undefined ? [value] : [];
  }));
}

/** Median over the runs of the sum over processes (not the sum of medians). */
function totalMedian(footprints: readonly Footprint[], at: number, pick: (p: ProcessSample) => number | undefined): number {
  return median(footprints.map((f) => Object.values(f[at] ?? {}).reduce((sum, p) => sum + (pick(p) ?? 0), 0)));
}

/**
 * A set beside its peer measured in the same run (interleaved): VmRSS per process and in all at
 * 15 s and 60 s, the ratio, and the total against openshift-install's published 395 MB (a fixed
 * reference, not measured here).
 */
function comparePeer(set: FootprintSet, peer: FootprintSet, footprints: Record<FootprintSet, Footprint[]>): { ratios: Record<string, number>; table: BenchTable; note: string } {
  const ours = footprints[set];
  const theirs = footprints[peer];
  const names = processNames([...ours, ...theirs]);
  const rss = (f: readonly Footprint[], name: string, at: number) => processMedian(f, name, at, (p) => p.rssBytes);
  const total = (f: readonly Footprint[], at: number) => totalMedian(f, at, (p) => p.rssBytes);
  const cell = (bytes: number) => (Number.isNaN(bytes) ? 'not run' : mb(bytes));
  const ratio = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? '' : `${formatNumber(a / b)} x`);
  const [t15, t60, p15, p60] = [total(ours, 0), total(ours, 1), total(theirs, 0), total(theirs, 1)];
  const within = Math.max(t15, t60) / MB <= footprintBudgetMB;
  return {
    ratios: { [`${set}.rss15sTotalVs.${peer}`]: t15 / p15, [`${set}.rss60sTotalVs.${peer}`]: t60 / p60 },
    table: {
      title: `${set} beside ${peer}, the same start with the setting switched off, measured in the same run (VmRSS, median of ${ours.length}; openshift-install's 395 MB is its published figure, a fixed reference)`,
      columns: ['process', `${set} 15 s`, `${peer} 15 s`, 'ratio 15 s', `${set} 60 s`, `${peer} 60 s`, 'ratio 60 s'],
      rows: [
        ...names.map((n) => [n, cell(rss(ours, n, 0)), cell(rss(theirs, n, 0)), ratio(rss(ours, n, 0), rss(theirs, n, 0)), cell(rss(ours, n, 1)), cell(rss(theirs, n, 1)), ratio(rss(ours, n, 1), rss(theirs, n, 1))]),
        ['total', mb(t15), mb(p15), ratio(t15, p15), mb(t60), mb(p60), ratio(t60, p60)],
        ['openshift-install (published, fixed)', `${footprintBudgetMB} MB`, `${footprintBudgetMB} MB`, '', `${footprintBudgetMB} MB`, `${footprintBudgetMB} MB`, ''],
        ['total / 395 MB', ratio(t15 / MB, footprintBudgetMB), ratio(p15 / MB, footprintBudgetMB), '', ratio(t60 / MB, footprintBudgetMB), ratio(p60 / MB, footprintBudgetMB), ''],
      ],
    },
    note: `${set}: ${mb(t15)} at 15 s and ${mb(t60)} at 60 s against ${peer}'s ${mb(p15)} and ${mb(p60)} in the same run (${formatNumber(t60 / p60)} x at 60 s); budget <= ${footprintBudgetMB} MB: ${within ? 'met' : 'MISSED'}.`,
  };
}

/** One set's footprint: its figures and ratios (keys prefixed with the set), its table and its verdict against the budget. */
function summarizeFootprint(set: FootprintSet, footprints: readonly Footprint[]): { figures: Record<string, number>; ratios: Record<string, number>; table: BenchTable; note: string } {
  const names = processNames(footprints);
  const fp = (name: string, at: number, pick: (p: ProcessSample) => number | undefined) => processMedian(footprints, name, at, pick);
  const fpTotal = (at: number, pick: (p: ProcessSample) => number | undefined) => totalMedian(footprints, at, pick);
  const [early15, late60] = [0, 1] as const;
  const rss15 = (n: string) => fp(n, early15, (p) => p.rssBytes);
  const rss60 = (n: string) => fp(n, late60, (p) => p.rssBytes);
  const heap60 = (n: string) => fp(n, late60, (p) => p.heapInuseBytes);
  const pss60 = (n: string) => fp(n, late60, (p) => p.pssBytes);
  const file60 = (n: string) => fp(n, late60, (p) => p.rssFileBytes);
  const cpu60 = (n: string) => fp(n, late60, (p) => p.cpuSeconds);
  const idleCpu = (n: string) => fp(n, late60, (p) => p.cpuSeconds) - fp(n, early15, (p) => p.cpuSeconds);
  const totalRss15 = fpTotal(early15, (p) => p.rssBytes);
  const totalRss60 = fpTotal(late60, (p) => p.rssBytes);
  const totalHeap60 = fpTotal(late60, (p) => p.heapInuseBytes);
  const totalPss60 = fpTotal(late60, (p) => p.pssBytes);
  const totalFile60 = fpTotal(late60, (p) => p.rssFileBytes);
  const totalCpu60 = fpTotal(late60, (p) => p.cpuSeconds);
  const totalIdleCpu = totalCpu60 - fpTotal(early15, (p) => p.cpuSeconds);
  const budgetMet = totalRss15 / MB <= footprintBudgetMB && totalRss60 / MB <= footprintBudgetMB;
  const { title } = footprintSets[set];
  const openshift = (n: string): number | undefined => (footprintSets[set].openshift as Record<string, number>)[n];
  return {
    figures: {
      ...Object.fromEntries(names.flatMap((n) => [
        [`${set}.rss15s.${n}.Bytes`, rss15(n)],
        [`${set}.rss60s.${n}.Bytes`, rss60(n)],
        [`${set}.heapInuse60s.${n}.Bytes`, heap60(n)],
        [`${set}.pss60s.${n}.Bytes`, pss60(n)],
        [`${set}.rssFile60s.${n}.Bytes`, file60(n)],
        [`${set}.cpu0to60s.${n}.Seconds`, cpu60(n)],
      ])),
      [`${set}.processes`]: names.length,
      [`${set}.rss15sTotalBytes`]: totalRss15,
      [`${set}.rss60sTotalBytes`]: totalRss60,
      [`${set}.heapInuse60sTotalBytes`]: totalHeap60,
      [`${set}.pss60sTotalBytes`]: totalPss60,
      [`${set}.rssFile60sTotalBytes`]: totalFile60,
      [`${set}.cpu0to60sTotalSeconds`]: totalCpu60,
      [`${set}.cpu15to60sTotalSeconds`]: totalIdleCpu,
    },
    ratios: {
      ...Object.fromEntries(names.flatMap((n) => (openshift(n) !== undefined ? [[`${set}.rss60s.${n}.VsOpenshift`, rss60(n) / MB / openshift(n)!]] : []))),
      [`${set}.rss60sTotalVsBudget`]: totalRss60 / MB / footprintBudgetMB,
      [`${set}.rss15sTotalVsBudget`]: totalRss15 / MB / footprintBudgetMB,
    },
    table: {
      title: `footprint of ${title} (median of ${footprints.length} fresh dirs; MB = 10^6 bytes; CPU in seconds since the process started)`,
      columns: ['process', 'RSS at 15 s', 'RSS at 60 s', 'PSS at 60 s', 'of RSS, files at 60 s', 'Go heap in use at 60 s', 'CPU at 60 s', 'CPU 15-60 s', 'openshift (published)', 'RSS 60 s / openshift'],
      rows: [
        ...names.map((n) => [
          n,
          mb(rss15(n)),
          mb(rss60(n)),
          mb(pss60(n)),
          mb(file60(n)),
          Number.isNaN(heap60(n)) ? 'n/a' : mb(heap60(n)),
          cpu(cpu60(n)),
          cpu(idleCpu(n)),
          openshift(n) !== undefined ? `${openshift(n)} MB` : '',
          openshift(n) !== undefined ? `${formatNumber(rss60(n) / MB / openshift(n)!)} x` : '',
        ]),
        [`total (${names.length})`, mb(totalRss15), mb(totalRss60), mb(totalPss60), mb(totalFile60), mb(totalHeap60), cpu(totalCpu60), cpu(totalIdleCpu), `${footprintBudgetMB} MB`, `${formatNumber(totalRss60 / MB / footprintBudgetMB)} x`],
      ],
    },
    note: `footprint, ${set}: ${mb(totalRss15)} at 15 s and ${mb(totalRss60)} at 60 s for ${names.length} processes, budget <= ${footprintBudgetMB} MB (openshift's published total): ${budgetMet ? 'met' : 'MISSED'}.`,
  };
}

const ms = (value: number) => `${formatNumber(value)} ms`;
const s = (value: number) => `${(value / 1000).toFixed(2)} s`;
const mb = (bytes: number) => `${(bytes / MB).toFixed(0)} MB`;
const cpu = (seconds: number) => `${seconds.toFixed(1)} s`;

export async function run(): Promise<BenchRecord> {
  const catalog = await loadCatalog();
  const controllers = catalog.components.filter((c) => c.binary).map((c) => c.binary!);
  const binaries = await ensureBinaries(['etcd', 'kube-apiserver', forwarderName, ...controllers], { catalog });
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'provisioner-bench-controlplane-'));
  try {
    const parseStarted = performance.now();
    const components = await Promise.all(catalog.components.map((c) => loadComponents(c.provider, c.namespace, catalog.componentsPath(c))));
    const parseMs = performance.now() - parseStarted;

    const ours: OurBoot[] = [];
    const floor: FloorBoot[] = [];
    let early: KubeObject[] | undefined;
    for (let i = 0; i < boots; i++) {
      const dir = path.join(scratch, `ours-${i}`);
      process.stderr.write(`  boot ${i + 1}/${boots}: provisioner...\n`);
      ours.push(await bootOurs(dir));
      const pkiDir = controlPlaneLayout(dir).pkiDir;
      early ??= earlyObjects(components, catalog, (await ensureControlPlanePki(pkiDir, { controllers })).caCertPem);
      process.stderr.write(`  boot ${i + 1}/${boots}: floor...\n`);
      floor.push(await bootFloor(pkiDir, controllers, path.join(scratch, `floor-${i}`), early, binaries));
    }
    // Interleaved, so both sets see the same machine load.
    const footprints = Object.fromEntries(footprintSetNames.map((set) => [set, [] as Footprint[]])) as Record<FootprintSet, Footprint[]>;
    for (let i = 0; i < footprintRuns; i++) {
      for (const set of footprintSetNames) {
        process.stderr.write(`  footprint ${i + 1}/${footprintRuns}: ${set}, sampled at ${sampleAtMs.map((at) => `${at / 1000} s`).join(' and ')}...\n`);
        footprints[set].push(await measureFootprint(path.join(scratch, `${set}-${i}`), set, binaries[forwarderName]!));
      }
    }
    const summaries = footprintSetNames.map((set) => summarizeFootprint(set, footprints[set]));
    const peers = footprintSetNames.flatMap((set) => {
      const peer = footprintPeers[set] as FootprintSet | undefined;
      return peer ? [comparePeer(set, peer, footprints)] : [];
    });

    const med = (pick: (b: OurBoot) => number) => median(ours.map(pick));
    const fmed = (pick: (b: FloorBoot) => number) => median(floor.map(pick));
    const stage = Object.fromEntries(stages.map((st) => [st, med((b) => b.stageMs[st])])) as Record<Stage, number>;
    const window = med((b) => b.windowMs);
    const floorWindow = fmed((b) => b.windowMs);
    const floorEtcd = fmed((b) => b.etcdMs);
    const floorApi = fmed((b) => b.apiServerMs);
    const floorCrds = fmed((b) => b.crdsMs);
    const unstaged = med((b) => b.unstagedMs);
    const total = med((b) => b.totalMs);
    const overhead = window / floorWindow;

    const version = (name: string) => {
      const b = catalog.findBinary(name);
      return b ? `${b.module}@${b.moduleVersion}` : 'unknown';
    };
    const earlyCount = early?.length ?? 0;

    return {
      name: 'controlplane',
      figures: {
        boots,
        prepareMs: med((b) => b.prepareMs),
        ...Object.fromEntries(stages.map((st) => [`${camel(st)}StageMs`, stage[st]])),
        unstagedBeforeCrdsMs: unstaged,
        bootTotalMs: total,
        bootToCrdsWindowMs: window,
        stopMs: med((b) => b.stopMs),
        floorEtcdMs: floorEtcd,
        floorApiServerMs: floorApi,
        floorCrdsMs: floorCrds,
        floorWindowMs: floorWindow,
        componentsParseMs: parseMs,
        earlyObjects: earlyCount,
        footprintRuns,
        ...Object.assign({}, ...summaries.map((summary) => summary.figures)),
      },
      ratios: {
        windowVsFloor: overhead,
        etcdVsFloor: stage.etcd / floorEtcd,
        apiServerVsFloor: stage['kube-apiserver'] / floorApi,
        crdsVsFloor: stage.crds / floorCrds,
        ...Object.assign({}, ...summaries.map((summary) => summary.ratios)),
        ...Object.assign({}, ...peers.map((peer) => peer.ratios)),
      },
      versions: {
        provisioner: cliVersion,
        bundleRecipe: catalog.manifest.recipeHash.slice(0, 12),
        etcd: version('etcd'),
        'kube-apiserver': version('kube-apiserver'),
        ...Object.fromEntries(controllers.map((c) => [c, version(c)])),
      },
      tables: [
        {
          title: `boot of a temporary control plane (median of ${boots} fresh dirs; the floor interleaved, same binaries, flags and GOGC)`,
          columns: ['stage', 'provisioner', 'floor', 'ratio'],
          rows: [
            ['prepare (catalog, cached binaries)', ms(med((b) => b.prepareMs)), '', ''],
            ['PKI (fresh dir)', ms(stage.pki), 'reused', ''],
            ['etcd ready', ms(stage.etcd), ms(floorEtcd), `${formatNumber(stage.etcd / floorEtcd)} x`],
            ['API server ready', ms(stage['kube-apiserver']), ms(floorApi), `${formatNumber(stage['kube-apiserver'] / floorApi)} x`],
            ['kubeconfig + parse components (unstaged)', ms(unstaged), `before clock (${ms(parseMs)})`, ''],
            [`CRDs established (${earlyCount} objects)`, ms(stage.crds), ms(floorCrds), `${formatNumber(stage.crds / floorCrds)} x`],
            ['= etcd spawned -> CRDs established', ms(window), ms(floorWindow), `${formatNumber(overhead)} x`],
            [`controllers ready (${controllers.length})`, ms(stage.controllers), '', ''],
            ['webhooks + inventory installed', ms(stage.webhooks), '', ''],
            ['total boot', s(total), '', ''],
            ['stop (after settling)', ms(med((b) => b.stopMs)), '', ''],
          ],
        },
        ...summaries.map((summary) => summary.table),
        ...peers.map((peer) => peer.table),
      ],
      notes: [
        ...summaries.map((summary) => summary.note),
        ...peers.map((peer) => peer.note),
        `overhead over the floor (etcd spawned -> every CRD Established): ${formatNumber(overhead)} x, target <= ${targetRatio}: ${overhead <= targetRatio ? 'met' : 'MISSED'}.`,
        'the floor spawns etcd and kube-apiserver (through setpriv --pdeathsig, output dropped) with the flags etcdArgs/apiServerArgs render and the GOGC goRuntimeEnv gives a temporary control plane, polls /readyz every 50 ms, applies the same namespaces and (description-free) CRDs one by one with server-side apply, then polls until every CRD is Established; it parses the component YAML before its clock starts.',
        'ours probes every 100 ms, writes each process log through a pipe, writes the kubeconfig and parses the component YAML between the API server and the CRDs (the unstaged row), and applies 8 at a time.',
        "openshift figures are its published per-process memory (on macOS): 280 MB API server, 52 MB etcd, 28 MB CAPI core, 35 MB AWS provider (beside capi-manager, which serves core and in-memory providers in the in-memory set, and capa-manager). The other managers have no counterpart there; the budget is for the whole control plane. Go heap in use is go_memstats_heap_inuse_bytes from each process's own /metrics.",
        'each footprint run starts a lasting control plane on a fresh dir (detached processes, as a user gets them: what `create cluster` leaves running on the in-memory platform, and `management start`), the two sets interleaved; each total is the median of the per-run sums.',
        'ratios: above 1 means provisioner takes longer or uses more memory than the baseline.',
      ],
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

function rank(name: string): number {
  return name === 'etcd' ? 0 : name === 'kube-apiserver' ? 1 : 2;
}

function camel(name: string): string {
  return name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
}
