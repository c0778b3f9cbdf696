/**
 * Hosts benchmark (issue 16, "Measured"): `create cluster` on the `hosts` platform to 2 Ready
 * nodes, on one control-plane and one worker namespace test host with their own containerd
 * (test/support/netns.ts `runtime`, through test/e2e/support/hosts-lab.ts), run as
 * test/e2e/hosts-create-cluster.test.ts runs it: a hand-written install config (1 + 1,
 * bootstrap.listenAddress = the machine namespace's address), `create cluster --output json`
 * in the background, each host registered with the command printed for its role, its agent
 * started. Needs root, iproute2, util-linux, containerd, runc and the CNI plugins.
 *
 * Figures:
 *  - the create-cluster stages and their durations, from its `stage` events (`--output json`);
 *  - the timeline from the start of `create cluster`: registration commands printed, hosts
 *    registered, first node Ready, 2 nodes Ready (each from its kubelet's log, ms; where the
 *    log lacks it, the Ready condition's lastTransitionTime, whole seconds), exit;
 *  - each node's way to Ready on its host, from the kubelet's and containerd's logs (ms): the
 *    kubelet's start, its pods watched, the pod network's sandbox, Ready;
 *  - each bootstrap NodePlan split into artifact downloads (the preflight checks and the files
 *    phase: kubelet, kubeadm and the image archives fetched from the forwarder,
 *    digest-checked), image import (`ctr images import`), `kubeadm init`, `kubeadm join`, and
 *    the rest (waiting for the agent, the other instructions, probes). Times come from a watch
 *    on the NodePlans that stamps every status update as it arrives (ms; the agent writes as
 *    an attempt starts and before each instruction, each write carrying the results before
 *    it), and, as a cross-check, from
 *    the plans' own status times (status.startTime and each status.instructions entry's
 *    start and completion: whole seconds);
 *  - the bundle: the node binaries the platform added (kubelet, kubeadm,
 *    kube-controller-manager, kube-scheduler, kube-proxy, pause), raw and gzipped, against
 *    the whole shipped bundle; the image archives create cluster built from the bundle's
 *    binaries (not shipped: written to the cache at create time);
 *  - where our time goes: every interval of the timeline, each plan work (a plan from its
 *    creation to Applied) or a gap (ours to remove).
 *
 * The floor, measured in the same run on two more fresh hosts (after destroy, so on a quieter
 * machine), as a person with a shell does it with everything downloaded: the control-plane
 * image archives imported with the plan's own command, `kubeadm init` with the images present
 * and the kubelet supervised as the plan does it; then on the other host the worker's archives
 * imported and `kubeadm join` (the init's bootstrap token, the CA pinned by its public-key
 * hash). Ours is printed beside each step and beside the floor's sum, with the ratio and the
 * machine (cores, memory, load). PROVISIONER_BENCH_HOSTS_BASELINE=0 skips it.
 *
 * PROVISIONER_BENCH_HOSTS_WORKERS=N (default 1) makes the cluster 1 + N: every worker is
 * registered as soon as the commands print, the timeline has each worker plan and the last
 * node Ready, and the plan tables show the first worker. The floor stays one init and one
 * join: a person joins the other workers at the same time, from another shell.
 * PROVISIONER_BENCH_HOSTS_CONTROL_PLANES=N (default 1) makes it N + workers: the timeline has
 * each control-plane host's plans (Cluster API's KubeadmControlPlane joins the second and
 * third control planes one at a time); the floor stays one init and one join.
 *
 * Run: `npm run bench -- hosts` (one create, ~3-5 min on 2 cores; prints the table, writes
 * bench-results/hosts.json).
 */
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ResultPromise } from 'execa';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { loadBinaryCatalog, loadCatalog, packageRoot } from '../../src/embedded/catalog.js';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import { podNetworkNamespace } from '../../src/addons/pod-network.js';
import { nodeBinaryNames, nodeImageTag } from '../../src/nodeartifacts/node-images.js';
import { controllerManagerClientRate } from '../../src/platforms/generate.js';
import * as node from '../../src/platforms/hosts/node-settings.js';
import { cliVersion } from '../../src/version.js';
import { waitFor } from '../../test/integration/support/controlplane.js';
import { cliPath, ensureBuilt } from '../../test/e2e/support/cli.js';
import { HostsLab, hostsInstallConfig, type RunningAgent } from '../../test/e2e/support/hosts-lab.js';
import { containerdLogPath, type TestHost } from '../../test/support/netns.js';
import { formatNumber, MB, positiveEnv, round2, type BenchRecord, type BenchTable } from './record.js';

const withBaseline = positiveEnv('PROVISIONER_BENCH_HOSTS_BASELINE', 1, true) > 0;
/** Worker hosts of the cluster (PROVISIONER_BENCH_HOSTS_WORKERS). Default 1: the 1 + 1 the acceptance test makes. */
const workerCount = positiveEnv('PROVISIONER_BENCH_HOSTS_WORKERS', 1);
/** Control-plane hosts of the cluster (PROVISIONER_BENCH_HOSTS_CONTROL_PLANES). Default 1. */
const controlPlaneCount = positiveEnv('PROVISIONER_BENCH_HOSTS_CONTROL_PLANES', 1);
const nodeCount = controlPlaneCount + workerCount;
/** The cluster's shape, "1 + 1". */
const shape = `${controlPlaneCount} + ${workerCount}`;
/** The timeline's label for every node Ready. */
const allReady = `${nodeCount} nodes Ready`;
const clusterName = 'bench';
/** create cluster's own no-progress timeout (10 min) normally ends a stuck run first. */
const createLimitMs = 30 * 60_000;
/** The binaries the hosts platform added to the bundle: kubelet and kubeadm run on hosts, the rest become images (etcd and kube-apiserver were there for the local control plane). */
const addedBinaries = [...nodeBinaryNames, 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'pause'];

interface JsonEvent {
  type: string;
  stage?: string;
  state?: string;
  durationMs?: number;
  kind?: string;
  message?: string;
  data?: { commands?: { pool: string; role: string; command: string }[] };
}

/** One status update of a NodePlan as the watch saw it. */
interface PlanUpdate {
  /** ms since create cluster started. */
  at: number;
  phase: string;
  conditions: string[];
  instructions: string[];
  message: string;
}

interface PlanObject {
  metadata: { namespace: string; name: string; creationTimestamp: string; labels?: Record<string, string> };
  spec: { instructions?: { name: string; command: string; args?: string[] }[] };
  status?: { phase?: string; startTime?: string; completionTime?: string; instructions?: { name: string; startTime?: string; completionTime?: string }[] };
}

/** A host's name in the timeline: "worker", "worker 2", ... */
const roleLabel = (role: 'control-plane' | 'worker', index: number) => (index === 0 ? role : `${role} ${index + 1}`);

/** A machine's plans, in the order they run: prepare (at claim) and bootstrap (from the bootstrap data). */
const planPurposes = ['prepare', 'bootstrap'] as const;
type PlanPurpose = (typeof planPurposes)[number];

const categories = ['artifact downloads', 'image import', 'kubeadm init', 'kubeadm join', 'the rest'] as const;
type Category = (typeof categories)[number];
type Split = Record<Category, number> & { total: number };

/** What an instruction is, from its command line. */
function categoryOf(instruction: { command: string; args?: string[] }): Category {
  const line = [instruction.command, ...(instruction.args ?? [])].join(' ');
  if (line.includes('images import')) return 'image import';
  if (/kubeadm\S* init\b/.test(line)) return 'kubeadm init';
  if (/kubeadm\S* join\b/.test(line)) return 'kubeadm join';
  return 'the rest';
}

const emptySplit = (): Split => ({ 'artifact downloads': 0, 'image import': 0, 'kubeadm init': 0, 'kubeadm join': 0, 'the rest': 0, total: 0 });

/**
 * From the watch: first sighting → Applied; the preflight checks and the files phase (the
 * attempt's start → FilesApplied, which the agent writes with the first instruction's
 * "running" message); each instruction from its "running" message to its result.
 */
function splitFromWatch(updates: readonly PlanUpdate[], plan: PlanObject): Split | string {
  const first = (test: (u: PlanUpdate) => boolean) => updates.find(test)?.at;
  const seen = updates[0]?.at;
  const applied = first((u) => u.phase === 'Applied');
  const started = first((u) => u.phase === 'Executing');
  const files = first((u) => u.conditions.includes('FilesApplied'));
  const missing = Object.entries({ seen, applied, started, files }).filter(([, v]) => v === undefined).map(([k]) => k);
  if (missing.length > 0) return `${updates.length} updates, none with ${missing.join(', ')}`;
  const split = emptySplit();
  split.total = applied! - seen!;
  split['artifact downloads'] = files! - started!;
  for (const instruction of plan.spec.instructions ?? []) {
    // A short instruction's "running" message can be overwritten before the watch sees it:
    // only the timed categories need theirs (a long instruction's is seen as it starts).
    const category = categoryOf(instruction);
    if (category === 'the rest') continue;
    const started = first((u) => u.message.endsWith(`running ${instruction.name}`));
    const ended = first((u) => u.instructions.includes(instruction.name));
    if (started === undefined || ended === undefined) return `${updates.length} updates; instruction ${instruction.name}: start ${started ?? 'unseen'}, end ${ended ?? 'unseen'}`;
    split[category] += ended - started;
  }
  split['the rest'] = split.total - categories.filter((c) => c !== 'the rest').reduce((n, c) => n + split[c], 0);
  return split;
}

/** From the plan's own status times (whole seconds): downloads are start → first instruction. */
function splitFromStatus(plan: PlanObject): Split | undefined {
  const t = (value: string | undefined) => (value === undefined ? undefined : Date.parse(value));
  const created = t(plan.metadata.creationTimestamp);
  const started = t(plan.status?.startTime);
  const completed = t(plan.status?.completionTime);
  const results = plan.status?.instructions ?? [];
  const firstInstruction = t(results[0]?.startTime);
  if (created === undefined || started === undefined || completed === undefined || firstInstruction === undefined) return undefined;
  const split = emptySplit();
  split.total = completed - created;
  split['artifact downloads'] = firstInstruction - started;
  for (const result of results) {
    const spec = plan.spec.instructions?.find((i) => i.name === result.name);
    const category = spec ? categoryOf(spec) : 'the rest';
    const [from, to] = [t(result.startTime), t(result.completionTime)];
    if (category !== 'the rest' && from !== undefined && to !== undefined) split[category] += to - from;
  }
  split['the rest'] = split.total - categories.filter((c) => c !== 'the rest').reduce((n, c) => n + split[c], 0);
  return split;
}

/**
 * Watches every NodePlan of the cluster's control plane (`kubectl get --watch -o json`: one
 * indented object after another, each ending with a `}` line), stamping each update on arrival.
 * JSON rather than a jsonpath template: kubectl printed only the first object of the watch
 * with a template holding `{range}`.
 */
class PlanWatch {
  readonly updates = new Map<string, PlanUpdate[]>();
  lines = 0;
  private buffer = '';
  private object: string[] = [];
  private errors = '';

  constructor(
    readonly child: ResultPromise,
    private readonly started: number,
  ) {
    child.stderr?.on('data', (chunk: Buffer) => (this.errors += chunk.toString()));
    child.stdout?.on('data', (chunk: Buffer) => {
      const at = Date.now() - this.started;
      this.buffer += chunk.toString();
      const lines = this.buffer.split('\n');
      this.buffer = lines.pop() ?? '';
      for (const line of lines) {
        this.lines += 1;
        this.object.push(line);
        if (line !== '}') continue;
        const plan = JSON.parse(this.object.join('\n')) as PlanObject & { status?: { message?: string; conditions?: { type: string }[] } };
        this.object = [];
        const key = `${plan.metadata.namespace}/${plan.metadata.name}`;
        const updates = this.updates.get(key) ?? [];
        updates.push({
          at,
          phase: plan.status?.phase ?? '',
          conditions: (plan.status?.conditions ?? []).map((c) => c.type),
          instructions: (plan.status?.instructions ?? []).map((i) => i.name),
          message: plan.status?.message ?? '',
        });
        this.updates.set(key, updates);
      }
    });
  }

  stderr(): string {
    return this.errors;
  }
}

const registerCommand = /^PROVISIONER_AGENT_TOKEN=(\S+) provisioner-agent register --server (https:\/\/\S+) --ca-checksum ([0-9a-f]{64}) --roles (\S+)/;

interface NodeObject {
  metadata: { name: string; creationTimestamp: string };
  status: { conditions?: { type: string; status: string; lastTransitionTime: string }[] };
}

interface TimedObject {
  metadata: { name: string; creationTimestamp: string; namespace?: string; ownerReferences?: { name: string }[] };
  spec?: { nodeName?: string };
  status?: { conditions?: { type: string; status: string; lastTransitionTime?: string }[]; startTime?: string };
}

/**
 * The first Ready node's way there, each event from an object's own time (ms from create's
 * start; whole seconds): the control-plane Machine and HostMachine from the
 * KubeadmControlPlane to the claim; the Cluster's ControlPlaneInitialized (Cluster API, management side),
 * the ClusterResourceSetBinding (the add-ons applied), the Node's creation (the kubelet
 * registered), the pod network's DaemonSet and its pod on that node (created, scheduled,
 * initialized: the CNI config copied), the Node's Ready.
 */
async function firstReadyPath(lab: HostsLab, dir: string, started: number): Promise<[string, number][]> {
  const get = async (kubeconfig: string, args: string[]): Promise<TimedObject[]> => {
    const run = await lab.kubectlWith(path.join(dir, 'auth', kubeconfig), ['get', ...args, '-o', 'json']);
    return run.exitCode === 0 ? (JSON.parse(run.stdout) as { items: TimedObject[] }).items : [];
  };
  const t = (value: string | undefined) => (value === undefined ? undefined : Date.parse(value) - started);
  const condition = (o: TimedObject | undefined, type: string) => t(o?.status?.conditions?.find((c) => c.type === type && c.status === 'True')?.lastTransitionTime);
  const nodes = await get('kubeconfig', ['nodes']);
  const node = nodes.map((n) => ({ n, ready: condition(n, 'Ready') })).filter((x) => x.ready !== undefined).sort((a, b) => a.ready! - b.ready!)[0]?.n;
  const clusters = await get('management.kubeconfig', ['clusters.cluster.x-k8s.io', '-A']);
  const bindings = await get('management.kubeconfig', ['clusterresourcesetbindings', '-A']);
  const daemonSets = await get('kubeconfig', ['daemonsets', '-A']);
  const pods = await get('kubeconfig', ['pods', '-A']);
  const onNode = (prefix: string) => pods.find((p) => p.metadata.name.startsWith(prefix) && p.spec?.nodeName === node?.metadata.name);
  const flannel = onNode('kube-flannel-ds-');
  const proxy = onNode('kube-proxy-');
  // The control-plane Machine's way to its prepare plan (the HostMachine claims its Host once the Machine owns it).
  const machines = await get('management.kubeconfig', ['machines.cluster.x-k8s.io', '-A', '-l', 'cluster.x-k8s.io/control-plane']);
  const cpMachine = machines.sort((a, b) => Date.parse(a.metadata.creationTimestamp) - Date.parse(b.metadata.creationTimestamp))[0];
  const hostMachines = await get('management.kubeconfig', ['hostmachines', '-A']);
  const cpHostMachine = hostMachines.find((h) => h.metadata.ownerReferences?.some((o) => o.name === cpMachine?.metadata.name));
  const kcps = await get('management.kubeconfig', ['kubeadmcontrolplanes', '-A']);
  const rows: [string, number | undefined][] = [
    ['KubeadmControlPlane created', t(kcps[0]?.metadata.creationTimestamp)],
    ['Cluster InfrastructureReady', condition(clusters[0], 'InfrastructureReady')],
    ['control-plane HostMachine created', t(cpHostMachine?.metadata.creationTimestamp)],
    ['control-plane Machine created', t(cpMachine?.metadata.creationTimestamp)],
    ['control-plane HostMachine HostClaimed', condition(cpHostMachine, 'HostClaimed')],
    ['control-plane HostMachine PreparePlanApplied', condition(cpHostMachine, 'PreparePlanApplied')],
    ['control-plane Machine BootstrapConfigReady', condition(cpMachine, 'BootstrapConfigReady')],
    ['Cluster ControlPlaneInitialized', condition(clusters[0], 'ControlPlaneInitialized')],
    ['ClusterResourceSetBinding created (add-ons applied)', t(bindings[0]?.metadata.creationTimestamp)],
    [`Node ${node?.metadata.name ?? '?'} created (kubelet registered)`, t(node?.metadata.creationTimestamp)],
    ['kube-proxy pod created', t(proxy?.metadata.creationTimestamp)],
    ['kube-proxy pod Ready', condition(proxy, 'Ready')],
    ['pod network DaemonSet created', t(daemonSets.find((d) => d.metadata.name === 'kube-flannel-ds')?.metadata.creationTimestamp)],
    ['pod network pod created', t(flannel?.metadata.creationTimestamp)],
    ['pod network pod scheduled', condition(flannel, 'PodScheduled')],
    ['pod network pod initialized (CNI config copied)', condition(flannel, 'Initialized')],
    ['pod network pod Ready', condition(flannel, 'Ready')],
    ['Node Ready', condition(node, 'Ready')],
  ];
  return rows.filter((r): r is [string, number] => r[1] !== undefined).sort((a, b) => a[1] - b[1]);
}

/** The steps of a node's way to Ready on its host, in order, each found in the kubelet's or containerd's log. */
const onHostSteps = ['kubelet started', 'kubelet watches its pods', 'pod network sandbox up', 'Node Ready'] as const;
type OnHostStep = (typeof onHostSteps)[number];

/**
 * A node's way to Ready on its host, in ms from `started`, from the logs the host keeps (the
 * whole-second Node and pod times cannot show where a second goes): the kubelet's (klog
 * lines, microseconds, local time: this machine's; the supervisor's log,
 * provider/internal/agent/supervise.go) for its start, the moment it watches its pods (after
 * its TLS bootstrap) and its Ready status; containerd's (RFC 3339) for the pod network's
 * sandbox. A step not found is left out.
 */
async function readyOnHost(host: TestHost, started: number): Promise<Partial<Record<OnHostStep, number>>> {
  const readLines = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n');
  const kubelet = await readLines(path.join(host.rootDir, 'run/provisioner/supervise', `${node.kubeletSupervisedName}.log`));
  const containerd = await readLines(containerdLogPath(host));
  const year = new Date(started).getFullYear();
  /** A klog line's time: `I1205 13:02:14.210020 ...` (no year: the run's). */
  const klogAt = (marker: string) => {
    const line = kubelet.find((l) => l.includes(marker));
    const m = line?.match(/^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3})/);
    if (!m) return undefined;
    const [, month, day, h, min, sec, ms] = m.map(Number) as [number, number, number, number, number, number, number];
    return new Date(year, month - 1, day, h, min, sec, ms).getTime() - started;
  };
  const sandbox = containerd.find((l) => l.includes('RunPodSandbox for') && l.includes(`Namespace:${podNetworkNamespace},`) && l.includes('returns sandbox id'));
  const sandboxTime = sandbox?.match(/time="([^"]+)"/)?.[1];
  const steps: Record<OnHostStep, number | undefined> = {
    'kubelet started': klogAt('"Kubelet version"'),
    'kubelet watches its pods': klogAt('"Watching apiserver"'),
    'pod network sandbox up': sandboxTime === undefined ? undefined : Date.parse(sandboxTime) - started,
    'Node Ready': klogAt('"Fast updating node status as it just became ready"'),
  };
  return Object.fromEntries(Object.entries(steps).filter(([, at]) => at !== undefined));
}

/** The bundle's node binaries (raw: the extracted file; gzipped: the bundle's archive), and the whole shipped bundle. */
async function bundleSizes() {
  const catalog = await loadCatalog();
  // Each binary once: kubelet, kubeadm and the three image components are links of the one multi-call kube.
  const binaries = [...new Set(addedBinaries.map((name) => catalog.binary(name).name))];
  const paths = await ensureBinaries(binaries);
  const rows: { name: string; raw: number; gz: number }[] = [];
  for (const name of binaries) {
    rows.push({ name, raw: (await stat(paths[name]!)).size, gz: (await stat(catalog.archivePath(catalog.binary(name)))).size });
  }
  let shippedRaw = 0;
  let shippedGz = 0;
  for (const binary of catalog.binaries.filter((b) => b.shipped)) {
    shippedRaw += binary.size;
    shippedGz += (await stat(catalog.archivePath(binary))).size;
  }
  return { rows, shippedRaw, shippedGz };
}

/** What the hosts downloaded as image archives: the files create cluster served, by name. */
async function imageArchives(dir: string): Promise<{ name: string; bytes: number; file: string }[]> {
  const imagesDir = path.join(controlPlaneLayout(dir).artifactsDir, 'node', 'images');
  const out: { name: string; bytes: number; file: string }[] = [];
  for (const file of (await readdir(imagesDir)).filter((f) => f.endsWith('.tar')).sort()) {
    out.push({ name: file.replace(/\.tar$/, ''), bytes: (await stat(path.join(imagesDir, file))).size, file: path.join(imagesDir, file) });
  }
  return out;
}

/** What a plan would have downloaded, put on the baseline host: kubelet, kubeadm and the image archives (destroy removes the served copies). */
async function placeBaselineFiles(host: TestHost, archives: readonly { name: string; file: string }[]): Promise<void> {
  const paths = await ensureBinaries(['kubelet', 'kubeadm']);
  await mkdir(path.join(host.rootDir, 'usr/local/bin'), { recursive: true });
  for (const name of ['kubelet', 'kubeadm']) await copyFile(paths[name]!, path.join(host.rootDir, 'usr/local/bin', name));
  const imagesDir = path.join(host.rootDir, node.imageArchiveDirectory);
  await mkdir(imagesDir, { recursive: true });
  for (const archive of archives) await copyFile(archive.file, path.join(imagesDir, `${archive.name}.tar`));
}

/** The floor's steps, each timed by hand (ms). */
interface Floor {
  importMs: number;
  initMs: number;
  workerImportMs: number;
  joinMs: number;
}

/** Starts the kubelet on a baseline host as the plan does (the agent's supervisor, the platform's run script). */
async function superviseKubelet(lab: HostsLab, host: TestHost): Promise<void> {
  const runScript = path.join(host.dir, 'kubelet-run.sh');
  await writeFile(runScript, node.kubeletRunScript.content, { mode: 0o755 });
  const kubelet = await lab.net.run(host.namespace, lab.agentPath, ['supervise', 'start', '--name', node.kubeletSupervisedName, '--', runScript], { timeout: 60_000 });
  if (kubelet.exitCode !== 0) throw new Error(`baseline: supervise start on ${host.name} exited ${kubelet.exitCode}: ${kubelet.stderr}`);
}

/** kubeadm's `extraArgs` list (name, quoted value), each entry indented two spaces under its key. */
function extraArgsYaml(args: readonly { name: string; value: string }[]): string {
  return args.map((a) => `  - name: ${a.name}\n    value: "${a.value}"`).join('\n');
}

/** The platform's nodeRegistration settings, with the host's values where its cloud-config has variables. */
function nodeRegistration(host: TestHost): string {
  const value = (v: string) => v.replaceAll(node.hostAddress, host.address).replaceAll(node.hostName, host.name);
  return `nodeRegistration:
  name: ${host.name}
  criSocket: unix://${node.containerdSocket}
  imagePullPolicy: ${node.imagePullPolicy}
  ignorePreflightErrors: [${node.ignoredPreflightErrors.join(', ')}]
  kubeletExtraArgs:
${extraArgsYaml(node.kubeletExtraArgs.map((a) => ({ name: a.name, value: value(a.value) })))}`;
}

/**
 * The floor, as a person with a shell does it with everything downloaded: on a fresh host
 * the control-plane archives imported with the plan's own command, `kubeadm init` with the
 * images present, the kubelet supervised as the plan starts it, and the platform's kubeadm
 * settings (with the controller manager's client rate every generated control plane has);
 * then on a second fresh host the worker's archives imported and `kubeadm join` with a
 * bootstrap token the init made and the CA's public-key hash. Files are in place already
 * (`placeBaselineFiles`). Both hosts are reset afterwards.
 */
async function floorByHand(lab: HostsLab, host: TestHost, worker: TestHost): Promise<Floor> {
  const catalog = await loadBinaryCatalog();
  const sh = (on: TestHost, script: string, timeout = 600_000) => lab.net.run(on.namespace, '/bin/sh', ['-c', script], { timeout });
  let started = Date.now();
  const imported = await sh(host, node.importImages('controlPlane'));
  const importMs = Date.now() - started;
  if (imported.exitCode !== 0) throw new Error(`baseline: image import on ${host.name} exited ${imported.exitCode}: ${imported.stderr}`);

  await superviseKubelet(lab, host);
  // The token the join below uses (a person copies it from init's output).
  const token = `${randomBytes(3).toString('hex')}.${randomBytes(8).toString('hex')}`;
  const config = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: ${token}
  ttl: 10m0s
localAPIEndpoint:
  advertiseAddress: ${host.address}
  bindPort: 6443
${nodeRegistration(host)}
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ${catalog.binary('kubeadm').version}
clusterName: baseline
imageRepository: ${node.imageRepository}
encryptionAlgorithm: ${node.encryptionAlgorithm}
controlPlaneEndpoint: ${host.address}:6443
etcd:
  local:
    imageTag: ${nodeImageTag('etcd', catalog.binary('etcd').version)}
controllerManager:
  extraArgs:
${extraArgsYaml(controllerManagerClientRate)}
`;
  const configFile = path.join(host.dir, 'kubeadm.yaml');
  await writeFile(configFile, config, { mode: 0o600 });
  started = Date.now();
  const init = await lab.net.run(host.namespace, '/usr/local/bin/kubeadm', ['init', '--config', configFile], { timeout: 600_000 });
  const initMs = Date.now() - started;
  if (init.exitCode !== 0) throw new Error(`baseline: kubeadm init on ${host.name} exited ${init.exitCode}: ${init.stderr.slice(-2000)}`);

  // The join's CA pin, as init prints it: sha256 of the CA's public key (SubjectPublicKeyInfo).
  const ca = new X509Certificate(await readFile(path.join(host.rootDir, 'etc/kubernetes/pki/ca.crt')));
  const caHash = `sha256:${createHash('sha256').update(ca.publicKey.export({ type: 'spki', format: 'der' })).digest('hex')}`;
  started = Date.now();
  const workerImported = await sh(worker, node.importImages('worker'));
  const workerImportMs = Date.now() - started;
  if (workerImported.exitCode !== 0) throw new Error(`baseline: image import on ${worker.name} exited ${workerImported.exitCode}: ${workerImported.stderr}`);
  await superviseKubelet(lab, worker);
  const joinConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: ${host.address}:6443
    token: ${token}
    caCertHashes: [${caHash}]
${nodeRegistration(worker)}
`;
  const joinFile = path.join(worker.dir, 'kubeadm-join.yaml');
  await writeFile(joinFile, joinConfig, { mode: 0o600 });
  started = Date.now();
  const join = await lab.net.run(worker.namespace, '/usr/local/bin/kubeadm', ['join', '--config', joinFile], { timeout: 600_000 });
  const joinMs = Date.now() - started;
  if (join.exitCode !== 0) throw new Error(`baseline: kubeadm join on ${worker.name} exited ${join.exitCode}: ${join.stderr.slice(-2000)}`);

  // Undone before the lab goes (it would kill what is left anyway).
  for (const h of [worker, host]) {
    await lab.net.run(h.namespace, lab.agentPath, ['supervise', 'stop', '--name', node.kubeletSupervisedName], { timeout: 60_000 });
    await lab.net.run(h.namespace, '/usr/local/bin/kubeadm', ['reset', '-f', '--cri-socket', `unix://${node.containerdSocket}`], { timeout: 180_000 });
  }
  return { importMs, initMs, workerImportMs, joinMs };
}

export async function run(): Promise<BenchRecord> {
  await ensureBuilt();
  const lab = await HostsLab.create(nodeCount + (withBaseline ? 2 : 0), { runtime: true });
  const agents: RunningAgent[] = [];
  let create: ResultPromise | undefined;
  let watch: PlanWatch | undefined;
  const dir = path.join(lab.net.root, 'cluster');
  let destroyed = false;
  const notes: string[] = [];
  try {
    await lab.writeKubeletCgroupRoots();
    const controlPlanes = lab.hosts.slice(0, controlPlaneCount);
    const workers = lab.hosts.slice(controlPlaneCount, nodeCount);
    const [h0, h1] = [controlPlanes[0]!, workers[0]!];
    const floorHosts = [lab.hosts[nodeCount]!, lab.hosts[nodeCount + 1]!] as const;
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'install-config.yaml'), hostsInstallConfig(clusterName, lab.net.machine.address, workerCount, undefined, controlPlaneCount));
    const loadBefore = os.loadavg()[0] ?? 0;

    // create cluster, its JSON events stamped as they arrive.
    const events: { at: number; event: JsonEvent }[] = [];
    const started = Date.now();
    create = lab.net.spawn(lab.net.machine.namespace, process.execPath, [cliPath, 'create', 'cluster', '--dir', dir, '--output', 'json'], { cwd: packageRoot, buffer: true, reject: false, timeout: createLimitMs });
    let pending = '';
    create.stdout?.on('data', (chunk: Buffer) => {
      const at = Date.now() - started;
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim().startsWith('{')) events.push({ at, event: JSON.parse(line) as JsonEvent });
    });
    let ended = false;
    void create.finally(() => (ended = true)).catch(() => undefined);

    const commands = await waitFor('the registration commands', () => {
      if (ended) throw new Error(`create cluster ended before printing the registration commands: ${JSON.stringify(events.slice(-5).map((e) => e.event))}`);
      return events.find((e) => e.event.type === 'result' && e.event.kind === 'registration-commands');
    }, 600_000);
    const commandsAt = commands.at;
    // The control plane runs: watch the plans from now on (they are created once hosts are claimed).
    watch = new PlanWatch(lab.spawnKubectl(['get', 'nodeplans', '-A', '--watch', '-o', 'json'], path.join(dir, 'auth', 'management.kubeconfig')), started);

    // One-use tokens: the i-th host of a role takes that role's i-th command.
    const hostRoles = [...controlPlanes.map((c) => [c, 'control-plane'] as const), ...workers.map((w) => [w, 'worker'] as const)];
    for (const [host, role] of hostRoles) {
      const index = hostRoles.filter(([, r]) => r === role).findIndex(([h]) => h === host);
      const parsed = (commands.event.data?.commands ?? []).map((c) => registerCommand.exec(c.command)).filter((m) => m?.[4] === role)[index];
      if (!parsed) throw new Error(`no registration command for role ${role}: ${JSON.stringify(commands.event.data)}`);
      const registered = await lab.register(host, { token: parsed[1]!, server: parsed[2]!, checksum: parsed[3]! }, ['--roles', role]);
      if (registered.exitCode !== 0) throw new Error(`${host.name} did not register: ${registered.stdout}\n${registered.stderr}`);
      agents.push(lab.startAgent(host));
    }
    const registeredAt = Date.now() - started;

    const done = await create;
    const exitedAt = Date.now() - started;
    const loadAfter = os.loadavg()[0] ?? 0;
    if (done.exitCode !== 0) {
      const failed = events.filter((e) => e.event.type === 'stage' && e.event.state === 'failed').map((e) => `${e.event.stage}: ${e.event.message ?? ''}`);
      throw new Error(`create cluster exited ${done.exitCode ?? done.signal}: ${failed.join('; ')}\n${String(done.stderr).slice(-2000)}\n${agents.map((a) => a.output().slice(-1500)).join('\n')}`);
    }

    // Each node's way to Ready on its host, from the host's logs (ms); a node is named after its host.
    const onHostOf = new Map<string, Partial<Record<OnHostStep, number>>>();
    for (const host of [...controlPlanes, ...workers]) onHostOf.set(host.name, await readyOnHost(host, started));
    const onHost = { cp: onHostOf.get(h0.name)!, worker: onHostOf.get(h1.name)! };
    // Nodes: when each became Ready, from create's start: the kubelet's log where it has the
    // moment (ms), else the Ready condition's transition (whole seconds, so up to 1 s early).
    const nodesRun = await lab.kubectlWith(path.join(dir, 'auth', 'kubeconfig'), ['get', 'nodes', '-o', 'json']);
    if (nodesRun.exitCode !== 0) throw new Error(`kubectl get nodes: ${nodesRun.stderr}`);
    const nodes = (JSON.parse(nodesRun.stdout) as { items: NodeObject[] }).items;
    const readyAt = nodes
      .map((n) => {
        const transition = n.status.conditions?.find((c) => c.type === 'Ready' && c.status === 'True')?.lastTransitionTime;
        return transition === undefined ? undefined : (onHostOf.get(n.metadata.name)?.['Node Ready'] ?? Date.parse(transition) - started);
      })
      .filter((at): at is number => at !== undefined)
      .sort((a, b) => a - b);
    if (readyAt.length < nodeCount) throw new Error(`${readyAt.length} Ready nodes after create cluster: ${nodesRun.stdout.slice(0, 2000)}`);
    const firstReady = readyAt[0]!;
    // The last node Ready (with one worker, the second): named secondReady as the 1 + 1 figures are.
    const secondReady = readyAt[readyAt.length - 1]!;

    // The first node's way to Ready, from objects' own times (whole seconds): what the gap after the control-plane bootstrap plan holds.
    const readyPath = await firstReadyPath(lab, dir, started);
    // Plans: their final objects, split by the watch and by their own status times.
    const plansRun = await lab.kubectlWith(path.join(dir, 'auth', 'management.kubeconfig'), ['get', 'nodeplans', '-A', '-o', 'json']);
    if (plansRun.exitCode !== 0) throw new Error(`kubectl get nodeplans: ${plansRun.stderr}`);
    const plans = (JSON.parse(plansRun.stdout) as { items: PlanObject[] }).items.filter((p) => p.metadata.namespace.startsWith('host-'));
    // Each host's machine has a prepare plan (written at claim: downloads, image imports) and a bootstrap plan (kubeadm).
    const planOf = (host: TestHost, purpose: PlanPurpose) =>
      plans.find((p) => p.metadata.namespace === `host-${host.name}` && p.metadata.labels?.['infrastructure.provisioner.dev/purpose'] === purpose);
    const splitOne = (plan: PlanObject, from: 'watch' | 'status'): Split | undefined => {
      if (from === 'status') return splitFromStatus(plan);
      const result = splitFromWatch(watch!.updates.get(`${plan.metadata.namespace}/${plan.metadata.name}`) ?? [], plan);
      if (typeof result === 'string') {
        notes.push(`The plan watch missed updates of ${plan.metadata.namespace}/${plan.metadata.name} (${result}; ${watch!.lines} lines for ${[...watch!.updates.keys()].join(', ') || 'no plan'}; kubectl: ${watch!.stderr().slice(-300) || 'no error'}): its split is "-", the status columns stand.`);
        return undefined;
      }
      return result;
    };
    /** A host's plans together: each part summed over its prepare and bootstrap plans. */
    const split = (host: TestHost, from: 'watch' | 'status'): Split | undefined => {
      const parts = planPurposes.map((purpose) => planOf(host, purpose)).filter((p): p is PlanObject => p !== undefined).map((p) => splitOne(p, from));
      if (parts.length === 0 || parts.some((p) => p === undefined)) return undefined;
      const sum = emptySplit();
      for (const part of parts) for (const k of [...categories, 'total' as const]) sum[k] += part![k];
      return sum;
    };
    const splits = { cpWatch: split(h0, 'watch'), workerWatch: split(h1, 'watch'), cpStatus: split(h0, 'status'), workerStatus: split(h1, 'status') };

    const archives = await imageArchives(dir);
    const bundle = await bundleSizes();

    if (withBaseline) for (const host of floorHosts) await placeBaselineFiles(host, archives);
    // Destroy while the agents still run (they run the reset plans), then the floor on the third host.
    const destroyStarted = Date.now();
    const destroy = await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000);
    const destroyMs = Date.now() - destroyStarted;
    destroyed = destroy.exitCode === 0;
    if (!destroyed) notes.push(`destroy cluster exited ${destroy.exitCode}: ${destroy.stderr.split('\n').slice(-3).join(' / ')}`);
    const loadBaseline = os.loadavg()[0] ?? 0;
    const baseline = withBaseline ? await floorByHand(lab, floorHosts[0], floorHosts[1]) : undefined;

    // Figures.
    const s = (ms: number | undefined) => (ms === undefined ? '-' : `${formatNumber(ms / 1000)} s`);
    const pct = (part: number | undefined, whole: number | undefined) => (part === undefined || !whole ? '-' : `${formatNumber((100 * part) / whole)} %`);
    const stageEvents = events.filter((e) => e.event.type === 'stage' && e.event.state === 'succeeded' && e.event.durationMs !== undefined);
    const stageRows = stageEvents.map((e) => [e.event.stage!, s(e.event.durationMs), s(e.at), pct(e.event.durationMs, exitedAt)]);
    // When each prepare plan (written when the host is claimed) and bootstrap plan (written from Cluster API's bootstrap data,
    // after the prepare plan) appeared and was Applied, as the watch saw it.
    const planTimes = (host: TestHost, role: string): [string, number][] =>
      planPurposes.flatMap((purpose) => {
        const plan = planOf(host, purpose);
        const updates = plan ? watch!.updates.get(`${plan.metadata.namespace}/${plan.metadata.name}`) ?? [] : [];
        const appliedAt = updates.find((u) => u.phase === 'Applied')?.at;
        return [
          ...(updates[0] ? [[`${role} ${purpose} plan created`, updates[0].at] as [string, number]] : []),
          ...(appliedAt !== undefined ? [[`${role} ${purpose} plan Applied`, appliedAt] as [string, number]] : []),
        ];
      });
    // Where the stages hand over: the Cluster API objects applied, the wait's end (the hand-off follows).
    const stageEnd = (stage: string, label: string): [string, number][] => stageEvents.filter((e) => e.event.stage === stage).map((e) => [label, e.at] as [string, number]);
    const timeline: [string, number][] = [
      ['registration commands printed', commandsAt],
      [nodeCount === 2 ? 'both hosts registered, agents started' : 'every host registered, agents started', registeredAt],
      ...stageEnd('workers', 'control plane and workers applied'),
      ...stageEnd('wait-cluster', 'wait-cluster ended'),
      ...controlPlanes.flatMap((c, i) => planTimes(c, roleLabel('control-plane', i))),
      ...workers.flatMap((w, i) => planTimes(w, roleLabel('worker', i))),
      ['first node Ready', firstReady],
      [allReady, secondReady],
      ['create cluster exited', exitedAt],
    ];
    timeline.sort((a, b) => a[1] - b[1]);
    const figures: Record<string, number> = {
      createMs: exitedAt,
      commandsPrintedMs: commandsAt,
      hostsRegisteredMs: registeredAt,
      firstNodeReadyMs: firstReady,
      twoNodesReadyMs: secondReady,
      destroyMs,
      loadAverage1mBefore: round2(loadBefore),
      loadAverage1mAfterCreate: round2(loadAfter),
      loadAverage1mAtBaseline: round2(loadBaseline),
    };
    for (const e of stageEvents) figures[`stage:${e.event.stage}Ms`] = e.event.durationMs!;
    for (const [label, at] of timeline) figures[`at:${label}Ms`] = at;
    const key = (c: Category) => c.replace(/ (\w)/g, (_, l: string) => l.toUpperCase());
    for (const [label, sp] of Object.entries(splits)) {
      if (!sp) continue;
      figures[`${label}PlanMs`] = sp.total;
      for (const c of categories) figures[`${label}:${key(c)}Ms`] = sp[c];
    }
    const addedRaw = bundle.rows.reduce((n, r) => n + r.raw, 0);
    const addedGz = bundle.rows.reduce((n, r) => n + r.gz, 0);
    const archiveBytes = archives.reduce((n, a) => n + a.bytes, 0);
    Object.assign(figures, { nodeBinariesBytes: addedRaw, nodeBinariesGzBytes: addedGz, shippedBundleGzBytes: bundle.shippedGz, imageArchivesBytes: archiveBytes });
    const ratios: Record<string, number> = {
      nodeBinariesShareOfBundleGz: round2(addedGz / bundle.shippedGz),
      nodeBinariesGzOverRaw: round2(addedGz / addedRaw),
    };
    // Where our time goes: every interval of the timeline, plan work (inside a plan's creation → Applied) or a gap (waiting that is ours).
    const at = (label: string) => timeline.find(([l]) => l === label)?.[1];
    const windows = [...controlPlanes.map((_, i) => roleLabel('control-plane', i)), ...workers.map((_, i) => roleLabel('worker', i))]
      .flatMap((role) => planPurposes.map((purpose) => [at(`${role} ${purpose} plan created`), at(`${role} ${purpose} plan Applied`)] as const))
      .filter((w): w is readonly [number, number] => w[0] !== undefined && w[1] !== undefined);
    const intervals = timeline.map(([label, end], i) => {
      const [fromLabel, from] = i === 0 ? ['create cluster started', 0] : timeline[i - 1]!;
      return { name: `${fromLabel} -> ${label}`, ms: end - from, work: windows.some(([s0, s1]) => from >= s0 && end <= s1) };
    });
    const gapsMs = intervals.filter((g) => !g.work).reduce((n, g) => n + Math.max(0, g.ms), 0);
    figures.gapsMs = gapsMs;
    for (const g of intervals) figures[`gap:${g.name}Ms`] = g.ms;
    let floorMs: number | undefined;
    if (baseline) {
      floorMs = baseline.importMs + baseline.initMs + baseline.workerImportMs + baseline.joinMs;
      Object.assign(figures, { floorMs, baselineImageImportMs: baseline.importMs, baselineKubeadmInitMs: baseline.initMs, baselineWorkerImageImportMs: baseline.workerImportMs, baselineKubeadmJoinMs: baseline.joinMs });
      ratios.createOverFloor = round2(exitedAt / floorMs);
      ratios.twoReadyOverFloor = round2(secondReady / floorMs);
      if (splits.cpWatch) {
        ratios.imageImportInPlanOverByHand = round2(splits.cpWatch['image import'] / baseline.importMs);
        ratios.kubeadmInitInPlanOverByHand = round2(splits.cpWatch['kubeadm init'] / baseline.initMs);
      }
      if (splits.workerWatch) ratios.kubeadmJoinInPlanOverByHand = round2(splits.workerWatch['kubeadm join'] / baseline.joinMs);
    }
    // Shares of the whole: the plans' parts over create → 2 Ready (the worker's prepare plan runs beside the control plane's plans, so the shares may overlap).
    const sum = (c: Category) => (splits.cpWatch?.[c] ?? Number.NaN) + (splits.workerWatch?.[c] ?? Number.NaN);
    for (const c of categories.filter((c) => c !== 'the rest')) ratios[`${key(c)}ShareOfTwoReady`] = round2(sum(c) / secondReady);

    const planRows = [...categories, 'total' as const].map((c) => [
      c,
      s(splits.cpWatch?.[c]), pct(splits.cpWatch?.[c], splits.cpWatch?.total),
      s(splits.workerWatch?.[c]), pct(splits.workerWatch?.[c], splits.workerWatch?.total),
      c === 'total' ? '' : pct(c === 'the rest' ? undefined : sum(c), secondReady),
      s(splits.cpStatus?.[c]), s(splits.workerStatus?.[c]),
    ]);
    const tables: BenchTable[] = [
      { title: `create cluster stages (stage events of --output json; create cluster took ${s(exitedAt)})`, columns: ['stage', 'duration', 'ended at', 'share of create'], rows: stageRows },
      { title: 'timeline from the start of create cluster', columns: ['event', 'at'], rows: timeline.map(([label, at]) => [label, s(at)]) },
      {
        title: 'prepare + bootstrap NodePlans: where the time goes (each part summed over a host\'s two plans; watch: each status update stamped on arrival; status: the plan\'s own times, whole seconds)',
        columns: ['part', 'control-plane plan', 'share', 'worker plan', 'share', `both over create -> ${allReady}`, 'cp plan (status)', 'worker plan (status)'],
        rows: planRows,
      },
    ];
    tables.push({
      title: 'the first node\'s way to Ready (objects\' own times, whole seconds: Cluster API\'s objects and conditions in the management cluster, the workload\'s Node, the pod network\'s DaemonSet and its pod on that node)',
      columns: ['event', 'at'],
      rows: readyPath.map(([label, at]) => [label, s(at)]),
    });
    for (const [label, at] of readyPath) figures[`readyPath:${label}Ms`] = at;
    const sinceLast = (steps: Partial<Record<OnHostStep, number>>, step: OnHostStep) => {
      const earlier = onHostSteps.slice(0, onHostSteps.indexOf(step)).map((e) => steps[e]).filter((at): at is number => at !== undefined);
      const at = steps[step];
      return at === undefined || earlier.length === 0 ? '' : ` (+${s(at - earlier[earlier.length - 1]!)})`;
    };
    tables.push({
      title: 'each node\'s way to Ready on its host (the kubelet\'s and containerd\'s logs, ms; in brackets: since the step before)',
      columns: ['step', 'control plane', 'worker'],
      rows: onHostSteps.map((step) => [
        step,
        onHost.cp[step] === undefined ? '-' : `${s(onHost.cp[step])}${sinceLast(onHost.cp, step)}`,
        onHost.worker[step] === undefined ? '-' : `${s(onHost.worker[step])}${sinceLast(onHost.worker, step)}`,
      ]),
    });
    for (const [role, steps] of Object.entries(onHost)) for (const [step, at] of Object.entries(steps)) figures[`onHost:${role}:${step}Ms`] = at;
    const machine = `${os.availableParallelism()} cores, ${formatNumber(os.totalmem() / 2 ** 30)} GiB, load ${loadAfter.toFixed(2)} after create, ${loadBaseline.toFixed(2)} at the floor`;
    const x = (ours: number | undefined, floor: number | undefined) => (ours === undefined || !floor ? '-' : `${formatNumber(ours / floor)} x`);
    if (baseline) {
      tables.push({
        title: `ours beside the floor: by hand on two fresh hosts after destroy, everything downloaded (${machine})`,
        columns: ['step', 'by hand', 'ours', 'ratio'],
        rows: [
          [`control-plane image import (the same ${archives.length} archives, the plan's command)`, s(baseline.importMs), s(splits.cpWatch?.['image import']), x(splits.cpWatch?.['image import'], baseline.importMs)],
          ['kubeadm init (images present, kubelet supervised)', s(baseline.initMs), s(splits.cpWatch?.['kubeadm init']), x(splits.cpWatch?.['kubeadm init'], baseline.initMs)],
          ['worker image import (the plan\'s command)', s(baseline.workerImportMs), s(splits.workerWatch?.['image import']), x(splits.workerWatch?.['image import'], baseline.workerImportMs)],
          ['kubeadm join (bootstrap token, CA pinned)', s(baseline.joinMs), s(splits.workerWatch?.['kubeadm join']), x(splits.workerWatch?.['kubeadm join'], baseline.joinMs)],
          [`${shape} from nothing running: the floor; ours to ${allReady}`, s(floorMs), s(secondReady), x(secondReady, floorMs)],
          [`${shape} from nothing running: the floor; ours, create cluster to its exit`, s(floorMs), s(exitedAt), x(exitedAt, floorMs)],
        ],
      });
    }
    tables.push({
      title: `where our time goes: each interval of the timeline (plan work: inside a plan's creation -> Applied; the rest is gaps, ${s(gapsMs)} of ${s(exitedAt)})`,
      columns: ['interval', 'took', 'share of create', 'kind'],
      rows: intervals.map((g) => [g.name, s(g.ms), pct(g.ms, exitedAt), g.work ? 'plan work' : 'gap']),
    });
    const mb = (bytes: number) => `${formatNumber(bytes / MB)} MB`;
    tables.push({
      title: 'bundle size added by the node binaries (raw: extracted; gz: the bundle\'s archive) and the image archives create cluster built',
      columns: ['file', 'raw', 'gzipped', 'gz/raw'],
      rows: [
        ...bundle.rows.map((r) => [`bin/${r.name}`, mb(r.raw), mb(r.gz), `${formatNumber((100 * r.gz) / r.raw)} %`]),
        ['node binaries, total', mb(addedRaw), mb(addedGz), `${formatNumber((100 * addedGz) / addedRaw)} %`],
        ['whole shipped bundle (baseline)', mb(bundle.shippedRaw), mb(bundle.shippedGz), `node binaries: ${formatNumber((100 * addedGz) / bundle.shippedGz)} % of it`],
        ...archives.map((a) => [`image ${a.name}.tar (not shipped)`, mb(a.bytes), '(gzip layer)', '']),
        ['image archives, total (written at create time)', mb(archiveBytes), '', ''],
      ],
    });
    notes.push(
      `One run on ${os.availableParallelism()} cores, shared with other work: 1-minute load ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after create cluster, ${loadBaseline.toFixed(2)} at the baseline. Single figures, not medians: read the shares and ratios.`,
      'The hosts are registered by this benchmark as soon as the commands print, so pre-provision holds the registration, not a person walking to a machine. Node Ready times are the kubelet\'s own (its log, ms), or where its log lacks the line the Ready condition\'s lastTransitionTime (whole seconds, so up to 1 s early).',
      'Plan parts, summed over a host\'s prepare plan (written when the host is claimed) and bootstrap plan: downloads = the preflight checks and the files phases (kubelet, kubeadm and the role\'s image archives from the forwarder, digest-checked, in the prepare plan; the cloud-config\'s files in the bootstrap plan); the rest = the time from the plan\'s creation to the agent taking it, the other instructions (the prepare plan\'s ip_forward check; the kubelet\'s start, a worker\'s undo of an unfinished join, a control plane\'s kube-proxy settings) and probes. The status columns have whole-second times, so a part there is off by up to a second.',
      baseline
        ? 'Floor: on two fresh hosts after destroy cluster (the machine quieter than during create): the plan\'s image-import command by hand, kubeadm init with the platform\'s settings, then on the second host the worker\'s import and kubeadm join, one after the other as a person types them; no downloads (everything is in place). Ours includes the local control plane\'s start and the downloads; the floor has neither.'
        : 'No baseline (PROVISIONER_BENCH_HOSTS_BASELINE=0).',
      'Bundle: etcd and kube-apiserver were in the bundle before the hosts platform (the local control plane runs them); the image archives are built at create time from the bundle\'s binaries into the cache (one gzip layer each), so they add to the cache on disk, not to the package.',
    );
    return { name: 'hosts', figures, ratios, versions: { provisioner: cliVersion, kubernetes: (await loadBinaryCatalog()).binary('kubeadm').version }, tables, notes };
  } finally {
    create?.kill('SIGKILL');
    if (!destroyed) await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000).catch(() => undefined);
    watch?.child.kill('SIGKILL');
    for (const agent of agents) agent.process.kill('SIGKILL');
    await lab.remove();
  }
}
