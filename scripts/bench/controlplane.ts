/**
 * Local control-plane benchmark, with the real bundle built by `npm run bundle`:
 *
 *  - boot time of a temporary control plane (`prepareLocalControlPlane`, detached: false),
 *    split by its `controlplane/*` stage events: PKI, etcd ready, API server ready, CRDs
 *    established, controllers ready, webhooks installed; median of 3 boots on fresh dirs.
 *  - the floor, measured in the same run and interleaved with our boots: the same etcd and
 *    kube-apiserver binaries spawned by hand with the same flags (`etcdArgs`/`apiServerArgs`)
 *    and the PKI of a prepared dir, polled on /readyz every 50 ms, then the same namespaces
 *    and CRDs applied one by one and polled until Established. Our overhead is the ratio of
 *    the comparable window (etcd spawned → every CRD Established) over that floor.
 *  - memory: VmRSS of every process 10 s after the boot, against openshift's published figures.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { apiServerArgs, etcdArgs, loopback } from '../../src/controlplane/components.js';
import { loadComponents, type ProviderComponents } from '../../src/controlplane/install.js';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { rewriteWebhooks } from '../../src/controlplane/webhooks.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { loadCatalog, type BundleCatalog } from '../../src/embedded/catalog.js';
import type { EventSink, ProvisionerEvent } from '../../src/events.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { ensureControlPlanePki, writeKubeconfig } from '../../src/pki/index.js';
import { renderArgs } from '../../src/process/args.js';
import { defaultPdeathsigWrapper } from '../../src/process/managed-process.js';
import { isAlive, readPidfiles } from '../../src/process/pidfile.js';
import { allocatePorts } from '../../src/process/ports.js';
import { httpProbe, type ReadinessProbe } from '../../src/process/probes.js';
import { prepareLocalControlPlane } from '../../src/services/local-controlplane.js';
import { cliVersion } from '../../src/version.js';
import { formatNumber, MB, median, type BenchRecord } from './record.js';

/** openshift-install's local control plane, as published (see ../reference/004_…): resident memory per process. */
const openshift = { kubeApiServerMB: 280, etcdMB: 52, capiCoreMB: 28 } as const;

const boots = 3;
/** Wait after a boot before reading memory: the managers' caches fill in the first seconds. */
const settleMs = 10_000;
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
  /** VmRSS per process name after settling, bytes. */
  rssBytes: Record<string, number>;
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

async function rssOf(pid: number): Promise<number | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  const kb = status ? /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] : undefined;
  return kb ? Number(kb) * 1024 : undefined;
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
    await sleep(settleMs);
    const rssBytes: Record<string, number> = {};
    for (const entry of await readPidfiles(controlPlaneLayout(dir).stateDir)) {
      const rss = isAlive(entry) ? await rssOf(entry.pid) : undefined;
      if (rss !== undefined) rssBytes[entry.name] = rss;
    }
    const stopStarted = performance.now();
    await controlPlane.stop();
    return {
      stageMs,
      prepareMs: prepared - started,
      unstagedMs: sink.stageTime('crds', 'started') - sink.stageTime('kube-apiserver', 'succeeded'),
      windowMs: sink.stageTime('crds', 'succeeded') - sink.stageTime('etcd', 'started'),
      totalMs,
      stopMs: performance.now() - stopStarted,
      rssBytes,
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
  return spawn(command, commandArgs, { cwd, stdio: 'ignore', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
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

/** What the CRD stage applies: every object but webhook configurations and the inventory, webhooks pointed at loopback. */
function earlyObjects(components: readonly ProviderComponents[], catalog: BundleCatalog, caPem: string): KubeObject[] {
  const endpoints = new Map(catalog.components.filter((c) => c.binary).map((c, i) => [c.namespace, { port: 40_000 + i }]));
  const late = new Set(['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'Provider']);
  return components.flatMap((c) => c.objects.filter((o) => !late.has(o.kind)).map((o) => rewriteWebhooks(o, endpoints, caPem)));
}

const ms = (value: number) => `${formatNumber(value)} ms`;
const s = (value: number) => `${(value / 1000).toFixed(2)} s`;
const mb = (bytes: number) => `${(bytes / MB).toFixed(0)} MB`;

export async function run(): Promise<BenchRecord> {
  const catalog = await loadCatalog();
  const controllers = catalog.components.filter((c) => c.binary).map((c) => c.binary!);
  const binaries = await ensureBinaries(['etcd', 'kube-apiserver', ...controllers], { catalog });
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

    const names = [...new Set(ours.flatMap((b) => Object.keys(b.rssBytes)))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const rss = Object.fromEntries(names.map((n) => [n, median(ours.flatMap((b) => (b.rssBytes[n] !== undefined ? [b.rssBytes[n]] : [])))]));
    const published: Record<string, number> = { etcd: openshift.etcdMB, 'kube-apiserver': openshift.kubeApiServerMB, 'capi-manager': openshift.capiCoreMB };
    const totalRss = Object.values(rss).reduce((a, b) => a + b, 0);
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
        ...Object.fromEntries(names.map((n) => [`rss.${n}.Bytes`, rss[n]!])),
        rssTotalBytes: totalRss,
      },
      ratios: {
        windowVsFloor: overhead,
        etcdVsFloor: stage.etcd / floorEtcd,
        apiServerVsFloor: stage['kube-apiserver'] / floorApi,
        crdsVsFloor: stage.crds / floorCrds,
        ...Object.fromEntries(Object.entries(published).filter(([n]) => rss[n] !== undefined).map(([n, pub]) => [`rss.${n}.VsOpenshift`, rss[n]! / MB / pub])),
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
          title: `boot of a temporary control plane (median of ${boots} fresh dirs; the floor interleaved, same binaries and flags)`,
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
        {
          title: `resident memory ${settleMs / 1000} s after boot (VmRSS, median of ${boots}; MB = 10^6 bytes)`,
          columns: ['process', 'provisioner', 'openshift (published)', 'ratio'],
          rows: [
            ...names.map((n) => [n, mb(rss[n]!), published[n] !== undefined ? `${published[n]} MB` : '', published[n] !== undefined ? `${formatNumber(rss[n]! / MB / published[n])} x` : '']),
            ['total', mb(totalRss), '', ''],
          ],
        },
      ],
      notes: [
        `overhead over the floor (etcd spawned -> every CRD Established): ${formatNumber(overhead)} x, target <= ${targetRatio}: ${overhead <= targetRatio ? 'met' : 'MISSED'}.`,
        'the floor spawns etcd and kube-apiserver (through setpriv --pdeathsig, output dropped) with the flags etcdArgs/apiServerArgs render, polls /readyz every 50 ms, applies the same namespaces and CRDs one by one with server-side apply, then polls until every CRD is Established; it parses the component YAML before its clock starts.',
        'ours probes every 100 ms, writes each process log through a pipe, writes the kubeconfig and parses the component YAML between the API server and the CRDs (the unstaged row), and applies 8 at a time.',
        'openshift figures are its published per-process resident memory; capi-manager is compared with its CAPI core figure. Other managers have no published figure.',
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
