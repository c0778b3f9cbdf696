/**
 * A management cluster and hosts on one machine, for the hosts e2e test and the `agent`
 * benchmark: test/support/netns.ts's namespaces, `provisioner management start
 * --listen-address 198.18.0.1` inside the machine namespace, and real provisioner-agents
 * inside the host namespaces, registered with the line `hosts registration-command` prints.
 * Everything the machine namespace serves is reached by running a command inside it (the
 * CLI, the bundled kubectl): its loopback is its own.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResultPromise } from 'execa';
import { ensureBinaries } from '../../../src/embedded/cache.js';
import { packageRoot } from '../../../src/embedded/catalog.js';
import { GiveUp, waitFor } from '../../integration/support/controlplane.js';
import { createTestNetwork, testClusterNetworking, type TestHost, type TestNetwork } from '../../support/netns.js';
import { cliPath } from './cli.js';

export interface CommandRun {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
}

/** What `hosts registration-command` printed, parsed. */
export interface PrintedRegistration {
  token: string;
  server: string;
  checksum: string;
  stdout: string;
}

/** A registration command `create cluster` printed for a missing host, parsed. */
export interface PrintedHostCommand {
  token: string;
  server: string;
  checksum: string;
  role: string;
}

/** Every registration command in `output`, in the order printed. */
export function printedHostCommands(output: string): PrintedHostCommand[] {
  return [...output.matchAll(/^PROVISIONER_AGENT_TOKEN=(\S+) provisioner-agent register --server (https:\/\/\S+) --ca-checksum ([0-9a-f]{64}) --roles (\S+)/gm)].map(
    ([, token, server, checksum, role]) => ({ token: token!, server: server!, checksum: checksum!, role: role! }),
  );
}

/** A CLI command running in the background inside the machine namespace, its output collected as it comes. */
export interface BackgroundRun {
  child: ResultPromise;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  ended(): boolean;
}

export interface RunningAgent {
  host: TestHost;
  process: ResultPromise;
  /** Everything it logged so far. */
  output(): string;
}

export class HostsLab {
  readonly mgmt: string;
  readonly kubeconfig: string;
  /** What spawnCli started: killed by remove() if still running (a test that failed or timed out mid-command). */
  private readonly background: BackgroundRun[] = [];

  private constructor(
    readonly net: TestNetwork,
    private readonly binaries: { agent: string; kubectl: string },
  ) {
    this.mgmt = path.join(net.root, 'mgmt');
    this.kubeconfig = path.join(this.mgmt, 'auth', 'management.kubeconfig');
  }

  /**
   * The namespaces (machine and `hosts` hosts) and the binaries; nothing runs yet but, with
   * `runtime`, each host's containerd.
   */
  static async create(hosts: number, options: { runtime?: boolean } = {}): Promise<HostsLab> {
    const found = await ensureBinaries(['provisioner-agent', 'kubectl']);
    const net = await createTestNetwork({ hosts, runtime: options.runtime ?? false });
    return new HostsLab(net, { agent: found['provisioner-agent']!, kubectl: found.kubectl! });
  }

  /**
   * Gives each host's kubelet its own cgroup root (several kubelets share this kernel's
   * cgroups) through /var/lib/provisioner/kubelet.env, which the hosts platform's kubelet
   * run script reads: the one thing a test host needs beyond a real one.
   */
  async writeKubeletCgroupRoots(): Promise<void> {
    for (const host of this.hosts) {
      const env = path.join(host.rootDir, 'var/lib/provisioner/kubelet.env');
      await mkdir(path.dirname(env), { recursive: true });
      await writeFile(env, `KUBELET_EXTRA_ARGS=--cgroup-root=${host.cgroup}\n`);
    }
  }

  /** The bundled provisioner-agent (a path the hosts' mount namespaces see too). */
  get agentPath(): string {
    return this.binaries.agent;
  }

  get hosts(): TestHost[] {
    return this.net.hosts;
  }

  /** The CLI, run inside the machine namespace. */
  cli(args: readonly string[], timeoutMs = 120_000): Promise<CommandRun> {
    return this.net.run(this.net.machine.namespace, process.execPath, [cliPath, ...args], { cwd: packageRoot, timeout: timeoutMs });
  }

  /** The CLI in the background inside the machine namespace: `create cluster`, which waits for the hosts it prints commands for. */
  spawnCli(args: readonly string[]): BackgroundRun {
    const child = this.net.spawn(this.net.machine.namespace, process.execPath, [cliPath, ...args], { cwd: packageRoot, all: true, buffer: true, reject: false });
    let output = '';
    let ended = false;
    child.all?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void child.finally(() => (ended = true)).catch(() => undefined);
    const run = { child, output: () => output, ended: () => ended };
    this.background.push(run);
    return run;
  }

  /** Waits until `run` has printed `count` registration commands; gives up at once, with its output, if it ends first. */
  async waitForHostCommands(run: BackgroundRun, count: number, timeoutMs = 600_000): Promise<PrintedHostCommand[]> {
    return waitFor(`${count} registration command(s)`, () => {
      const found = printedHostCommands(run.output());
      if (found.length >= count) return found;
      if (run.ended()) throw new GiveUp(`the command ended after printing ${found.length} of ${count} registration commands:\n${run.output()}`);
      return undefined;
    }, timeoutMs);
  }

  /**
   * Registers each host with a printed command of its role, as a user copies it (the token through
   * a file, `--roles` as printed; each command used once), and starts its agent. Throws, with the
   * agent's output, when a registration fails.
   */
  async registerWithPrinted(assignments: readonly (readonly [TestHost, string])[], commands: readonly PrintedHostCommand[]): Promise<RunningAgent[]> {
    const unused = [...commands];
    const agents: RunningAgent[] = [];
    for (const [host, role] of assignments) {
      const index = unused.findIndex((command) => command.role === role);
      if (index < 0) throw new Error(`no printed registration command left for role ${role} (host ${host.name}); printed: ${commands.map((c) => c.role).join(', ')}`);
      const [command] = unused.splice(index, 1);
      const registered = await this.register(host, command!, ['--roles', role]);
      if (registered.exitCode !== 0) throw new Error(`provisioner-agent register on ${host.name} exited ${registered.exitCode}:\n${registered.stdout}\n${registered.stderr}`);
      agents.push(this.startAgent(host));
    }
    return agents;
  }

  /**
   * A cluster made as a user makes one: `hostsInstallConfig(name, …, workers)` written into `dir`,
   * `create cluster` (with `args`) in the background, the first host (of `hosts`, default the lab's) registered as the control plane and the
   * next `workers` as workers with the commands it prints. Throws, with its output, unless it exits 0.
   */
  async createCluster(dir: string, name: string, workers: number, args: readonly string[] = [], hosts?: readonly TestHost[]): Promise<{ output: string; agents: RunningAgent[] }> {
    const { run, agents } = await this.startCluster(dir, name, workers, args, hosts);
    const done = await run.child;
    if (done.exitCode !== 0) throw new Error(`create cluster exited ${done.exitCode}:\n${run.output()}\n${agents.map((a) => a.output().slice(-3000)).join('\n')}`);
    return { output: run.output(), agents };
  }

  /**
   * `create cluster` of a hosts install in the background (with `args` after `--dir`), its hosts registered as it prints their commands:
   * the lab's first 1 + `workers` hosts, or those of `hosts` (the first the control plane).
   */
  async startCluster(dir: string, name: string, workers: number, args: readonly string[] = [], hosts: readonly TestHost[] = this.hosts.slice(0, 1 + workers)): Promise<{ run: BackgroundRun; agents: RunningAgent[] }> {
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'install-config.yaml'), hostsInstallConfig(name, this.net.machine.address, workers));
    const run = this.spawnCli(['create', 'cluster', '--dir', dir, ...args]);
    const roles = hosts.map((host, i) => [host, i === 0 ? 'control-plane' : 'worker'] as const);
    return { run, agents: await this.registerWithPrinted(roles, await this.waitForHostCommands(run, roles.length)) };
  }

  /**
   * The processes whose program is one of `binaries`, with their resident memory (KiB), split by
   * whether they run in a host's cgroup (pods) or are the local processes of the install in
   * `installDir` (their command line names it: other tests' control planes may run beside).
   */
  async processesOf(binaries: readonly string[], installDir: string): Promise<Record<'pods' | 'local', { pid: number; rssKiB: number }[]>> {
    const out: Record<'pods' | 'local', { pid: number; rssKiB: number }[]> = { pods: [], local: [] };
    for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
      const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
      if (!binaries.includes(path.basename(argv[0] ?? ''))) continue;
      const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''))?.[1] ?? 0);
      const cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
      if (this.hosts.some((h) => cgroup.includes(h.cgroup))) out.pods.push({ pid: Number(pid), rssKiB });
      else if (argv.some((arg) => arg.includes(installDir))) out.local.push({ pid: Number(pid), rssKiB });
    }
    return out;
  }

  /** The bundled kubectl against the management cluster, inside the machine namespace. */
  kubectl(args: readonly string[], input?: string): Promise<CommandRun> {
    return this.net.run(this.net.machine.namespace, this.binaries.kubectl, ['--kubeconfig', this.kubeconfig, ...args], { timeout: 60_000, ...(input !== undefined ? { input } : {}) });
  }

  /** The bundled kubectl with another kubeconfig (a workload cluster's), inside the machine namespace. */
  kubectlWith(kubeconfig: string, args: readonly string[], input?: string): Promise<CommandRun> {
    return this.net.run(this.net.machine.namespace, this.binaries.kubectl, ['--kubeconfig', kubeconfig, ...args], { timeout: 60_000, ...(input !== undefined ? { input } : {}) });
  }

  /** `kubectl get … -o json` with another kubeconfig, parsed; throws with kubectl's stderr when it fails. */
  async kubectlJson<T>(kubeconfig: string, args: readonly string[]): Promise<T> {
    const run = await this.kubectlWith(kubeconfig, [...args, '-o', 'json']);
    if (run.exitCode !== 0) throw new Error(`kubectl ${args.join(' ')}: ${run.stderr}`);
    return JSON.parse(run.stdout) as T;
  }

  /** The bundled kubectl in the background (a watch), inside the machine namespace; against the management cluster unless another kubeconfig is given. */
  spawnKubectl(args: readonly string[], kubeconfig = this.kubeconfig): ResultPromise {
    return this.net.spawn(this.net.machine.namespace, this.binaries.kubectl, ['--kubeconfig', kubeconfig, ...args]);
  }

  async startManagement(): Promise<CommandRun> {
    return this.cli(['management', 'start', '--dir', this.mgmt, '--listen-address', this.net.machine.address], 600_000);
  }

  /** `hosts registration-command` of `dir` (default: the lab's management install), its printed line parsed (throws when it printed none). */
  async registrationCommand(ttl = '10m', dir = this.mgmt): Promise<PrintedRegistration> {
    const run = await this.cli(['hosts', 'registration-command', '--dir', dir, '--ttl', ttl], 300_000);
    const parsed = /^PROVISIONER_AGENT_TOKEN=(\S+) provisioner-agent register --server (https:\/\/\S+) --ca-checksum ([0-9a-f]{64})$/m.exec(run.stdout);
    if (run.exitCode !== 0 || !parsed) throw new Error(`hosts registration-command exited ${run.exitCode}:\n${run.stdout}\n${run.stderr}`);
    return { token: parsed[1]!, server: parsed[2]!, checksum: parsed[3]!, stdout: run.stdout };
  }

  /** Paths of a host's agent state. */
  static files(host: TestHost) {
    return { data: path.join(host.dir, 'agent'), lock: path.join(host.dir, 'plan.lock'), tokenFile: path.join(host.dir, 'bootstrap-token') };
  }

  /**
   * `provisioner-agent register` inside the host's namespace with the printed server and
   * checksum (and `extra` flags, e.g. `--roles worker`); the token goes through `--token-file`,
   * which a successful registration deletes.
   */
  async register(host: TestHost, printed: Pick<PrintedRegistration, 'token' | 'server' | 'checksum'> & { stdout?: string }, extra: readonly string[] = []): Promise<CommandRun> {
    const files = HostsLab.files(host);
    await writeFile(files.tokenFile, printed.token, { mode: 0o600 });
    return this.net.run(host.namespace, this.binaries.agent, [
      'register', '--server', printed.server, '--ca-checksum', printed.checksum, '--token-file', files.tokenFile, '--data-dir', files.data, '--host-name', host.name, ...extra,
    ], { timeout: 180_000, all: true });
  }

  /** `provisioner-agent run` inside the host's namespace, with its own data dir and lock file. */
  startAgent(host: TestHost, extra: readonly string[] = []): RunningAgent {
    const files = HostsLab.files(host);
    const child = this.net.spawn(host.namespace, this.binaries.agent, ['run', '--data-dir', files.data, '--lock-file', files.lock, '--heartbeat-interval', '2s', ...extra], { all: true, buffer: true });
    let output = '';
    child.all?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    return { host, process: child, output: () => output };
  }

  /** A NodePlan of a host as the API server has it (kubectl get -o json), undefined when absent. */
  async plan(host: TestHost, name: string): Promise<NodePlanView | undefined> {
    const run = await this.kubectl(['get', 'nodeplan', name, '-n', `host-${host.name}`, '-o', 'json']);
    return run.exitCode === 0 ? (JSON.parse(run.stdout) as NodePlanView) : undefined;
  }

  /** Writes a NodePlan for `host` to a file and runs `plan apply -f` on it. */
  async applyPlan(host: TestHost, name: string, spec: Record<string, unknown>, annotations: Record<string, string> = {}): Promise<CommandRun> {
    const file = path.join(this.net.root, `${host.name}-${name}.json`);
    await writeFile(file, JSON.stringify({
      apiVersion: 'agent.provisioner.dev/v1alpha1',
      kind: 'NodePlan',
      metadata: { name, labels: { 'agent.provisioner.dev/host': host.name }, annotations },
      spec,
    }));
    return this.cli(['plan', 'apply', '--dir', this.mgmt, '-f', file]);
  }

  /**
   * Stops the management cluster when one was started (its data goes with the network's scratch directory), then
   * removes the namespaces. A lab whose test never ran `management start` has no such directory, and `management stop`
   * refuses a missing one.
   */
  async remove(): Promise<void> {
    for (const run of this.background) if (!run.ended()) run.child.kill('SIGKILL');
    try {
      if (existsSync(this.mgmt)) {
        const stop = await this.cli(['management', 'stop', '--dir', this.mgmt], 180_000);
        if (stop.exitCode !== 0) process.stderr.write(`cleanup: management stop exited ${stop.exitCode}: ${stop.stderr}\n`);
      }
    } finally {
      this.net.remove();
    }
  }
}

/**
 * An install config for the hosts platform as a user writes it by hand: `controlPlanes`
 * control-plane hosts (default 1), `workers` worker hosts, the control plane listening on `listenAddress` for them, the
 * pod and Service blocks carved from the test range (the bundled pod network by default).
 */
export function hostsInstallConfig(name: string, listenAddress: string, workers: number, cni?: 'flannel' | 'none', controlPlanes = 1): string {
  return `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: ${name}
kubernetesVersion: v1.36.3
networking:
  podCIDRs: [${testClusterNetworking.podCIDR}]
  serviceCIDRs: [${testClusterNetworking.serviceCIDR}]
${cni ? `  cni: ${cni}\n` : ''}machinePools:
  - name: control-plane
    quantity: ${controlPlanes}
    roles: [etcd, controlPlane]
  - name: worker
    quantity: ${workers}
    roles: [worker]
platform:
  hosts: {}
bootstrap:
  listenAddress: ${listenAddress}
`;
}

export interface NodePlanView {
  metadata: { name: string; generation: number; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
  status?: {
    phase?: string;
    message?: string;
    attempts?: number;
    observedGeneration?: number;
    lockHolder?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    probeStatuses?: { name: string; healthy: boolean; successCount?: number; failureCount?: number; lastMessage?: string }[];
    instructions?: { name: string; exitCode: number; output?: string; attempt: number }[];
  };
}
