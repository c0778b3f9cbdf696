/**
 * Test hosts as network namespaces: machines to try `provisioner hosts` on without any.
 *
 * Layout (all namespaces of a run named `provisioner-test-<pid>-…`, pid: the test process):
 *
 * ```
 *   hub       a bridge `br0` and one veth end per member (`veth-m`, `veth-h0`, …)
 *   machine   eth0 198.18.0.1/16: runs the provisioner control plane (its loopback is its own)
 *   h<i>      eth0 198.18.0.<10+i>/16: one host each, running a real provisioner-agent
 * ```
 *
 * Addresses come from 198.18.0.0/15 (RFC 2544, benchmarking): the hosts' link is its lower
 * half, 198.18.0.0/16, and a test cluster's pod and Service blocks are carved from the upper
 * half (`testClusterNetworking`), so no packet of a test is ever addressed elsewhere. Every
 * link is inside a
 * namespace of the run: nothing is created, changed or routed in the machine's own network
 * namespace — no bridge, veth end, address or route there — so traffic goes only to
 * loopback and between these namespaces.
 *
 * Removal is guaranteed three ways: `remove()` (afterAll), SIGINT/SIGTERM handlers that
 * remove synchronously, and `sweepStaleTestNetworks()` at every creation, which removes the
 * namespaces (and scratch directories) of runs whose process is gone (a SIGKILLed test).
 * Removing a namespace first SIGKILLs every process in it (`ip netns pids`), since a
 * process keeps its namespace alive after `ip netns del`.
 *
 * Each host is also a machine of its own for a node runtime: a holder process (`hold`) keeps
 * a mount namespace alive, entered with the network namespace by `nsenter` (never `ip netns
 * exec`, which mounts a fresh /sys and so hides the cgroup mounts). In it the directories a
 * node writes (`hostDirectories`) are bind mounts of the host's own `<dir>/root/...`, so two
 * hosts' kubelets, containerds and kubeadms never share state, and the mounts go when the
 * namespace's last process does. Every process of a host, the holder's children and whatever
 * `run`/`spawn` start there, joins the host's cgroup `/<namespace>` in every v1 hierarchy:
 * containerd shims and containers (which live in pod network namespaces, invisible to `ip
 * netns pids`) are found and killed through it, and it is the kubelet's cgroupRoot.
 * `runtime: true` starts a containerd per host (its config: `containerdConfig`).
 *
 * Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2 and util-linux (nsenter, unshare);
 * with `runtime`, containerd, runc and the CNI plugins (Debian: containerd, runc,
 * containernetworking-plugins). Creating a host makes the empty mount points of
 * `hostDirectories` and `hostFiles` on the machine where they are missing (mkdir -p, touch),
 * nothing else outside the run's directory.
 */
import { execFileSync, spawn as spawnChild } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { lstat, mkdir, readdir, readlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa, type Options, type ResultPromise } from 'execa';

/** Every namespace and scratch directory of a run starts with this and the run's pid. */
const runPrefix = 'provisioner-test-';
/** The hosts' link: 198.18.0.0/16; the machine is .1, host i is .10+i. */
export const machineAddress = '198.18.0.1';
const networkPrefixLength = 16;
/**
 * A test cluster's pod and Service blocks, from the other half of 198.18.0.0/15 than the
 * hosts' link: pods 198.19.0.0/17 (a /24 per node), Services 198.19.128.0/20.
 */
export const testClusterNetworking = { podCIDR: '198.19.0.0/17', serviceCIDR: '198.19.128.0/20' } as const;
const hostAddress = (index: number) => `198.18.${Math.floor((10 + index) / 256)}.${(10 + index) % 256}`;
/** Time a namespace's processes get to die after SIGKILL before the namespace is deleted anyway. */
const killWaitMs = 5_000;

export interface TestHost {
  /** Host name the agent registers with (`h<i>-<pid>`): a DNS label. */
  name: string;
  namespace: string;
  address: string;
  /** Its own state: `<root>/<name>` (data dir, lock file, files plans write). */
  dir: string;
  /** Pid of the process holding the host's mount namespace (its network namespace's too). */
  holder: number;
  /** The host's cgroup in every v1 hierarchy (`/<namespace>`): a kubelet's cgroupRoot. */
  cgroup: string;
  /** Where the host's `hostDirectories` live on the machine: `<dir>/root`. */
  rootDir: string;
}

/**
 * Directories a node's runtime, kubelet and kubeadm write, each a bind mount of the host's
 * own `<dir>/root/<path>` inside its mount namespace. /run/netns holds containerd's pod
 * network namespace pins (machine-wide otherwise); /var/lib/cni the CNI plugins' address
 * leases and state; /usr/local/bin is where plans put the
 * kubelet and kubeadm, /usr/local/lib/provisioner the kubelet's run script; /run/kubeadm and
 * /run/cluster-api are Cluster API's bootstrap files; /run/flannel is where the pod network's
 * daemon leaves the node's subnet for its CNI plugin; /opt/cni/bin is where a CNI's DaemonSet
 * installs its plugin (filled with links to the machine's plugins at creation); /lib/modules is
 * mounted by kube-proxy's DaemonSet and this machine has none.
 */
export const hostDirectories = [
  '/etc/kubernetes', '/etc/cni/net.d', '/etc/containerd', '/var/lib/kubelet', '/var/lib/etcd', '/var/lib/containerd',
  '/var/lib/provisioner', '/var/lib/cni', '/var/log/pods', '/var/log/containers', '/run/containerd', '/run/provisioner', '/run/netns',
  '/run/kubeadm', '/run/cluster-api', '/run/flannel',
  '/usr/local/bin', '/usr/local/lib/provisioner', '/opt/cni/bin', '/lib/modules',
] as const;
/**
 * Files a node writes or reads that must be the host's own, each a bind mount of
 * `<dir>/root/<path>`: /etc/resolv.conf names a nameserver on the test network (the machine
 * namespace's address, where nothing answers), so the cluster's DNS never forwards a query to
 * the machine's own resolver; /run/xtables.lock is mounted by kube-proxy's and the CNI's
 * DaemonSets (created on the machine otherwise).
 */
export const hostFiles = { '/etc/resolv.conf': `nameserver ${machineAddress}\n`, '/run/xtables.lock': '' } as const;
/**
 * Where a plan, the agent or a node's runtime could write on a real host besides
 * `hostDirectories`: the agent's default data directory, the kubelet flags file kubeadm's unit
 * reads, upstream flannel's binary directory. A test host never writes them (its agent gets a
 * --data-dir under the run's directory); `machineFootprint` watches them with the others.
 */
export const machinePathsWatched = ['/var/lib/provisioner-agent', '/etc/default/kubelet', '/opt/bin'] as const;

/**
 * The machine's own view (this process's mount namespace, not a host's) of every path a host
 * binds (`hostDirectories`) and of `machinePathsWatched`: one line per entry below them,
 * `<path> <type> <size> <mtime>`, sorted; not the test networks' namespace files in /run/netns.
 * The empty mount points a host's creation makes are in it; anything a test host's plan, agent or node wrote through to the machine's disk, or
 * changed there, shows as a difference between two calls.
 */
export async function machineFootprint(): Promise<string[]> {
  const entries: string[] = [];
  const walk = async (at: string): Promise<void> => {
    // The test networks' own namespaces (ip netns add: /run/netns/<runPrefix><pid>-…), this run's and other runs', come and go.
    if (path.dirname(at) === '/run/netns' && path.basename(at).startsWith(runPrefix)) return;
    const info = await lstat(at).catch(() => undefined);
    if (!info) return;
    const type = info.isDirectory() ? 'dir' : info.isSymbolicLink() ? `link->${await readlink(at).catch(() => '?')}` : 'file';
    entries.push(`${at} ${type} ${info.isDirectory() ? '-' : info.size} ${info.isDirectory() ? '-' : Math.round(info.mtimeMs)}`);
    if (info.isDirectory()) for (const name of await readdir(at).catch(() => [] as string[])) await walk(path.join(at, name));
  };
  for (const root of [...hostDirectories, ...machinePathsWatched]) await walk(root);
  return entries.sort();
}

/** Debian's containernetworking-plugins install here; each host's /opt/cni/bin links to them. */
export const cniBinDir = '/usr/lib/cni';
/** The sandbox (pause) image every host's containerd uses. */
export const defaultSandboxImage = 'provisioner.local/pause:3.10.2';

/**
 * A host's containerd configuration: its own root, state and socket (paths inside the host's
 * mount namespace, so per host), runc's state root per host, OOM score adjustments kept
 * within what the process has (no CAP_SYS_RESOURCE for root here), the cgroupfs driver.
 */
export function containerdConfig(sandboxImage = defaultSandboxImage): string {
  return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      Root = "/run/containerd/runc"
`;
}

export interface TestNetwork {
  /** `provisioner-test-<pid>`: the run's namespaces start with it. */
  prefix: string;
  /** Scratch directory of the run, removed with it. */
  root: string;
  machine: { namespace: string; address: string };
  hosts: TestHost[];
  /**
   * Runs a command to its end inside `namespace` (never rejects on a non-zero exit); for a
   * host, inside its mount namespace and cgroup too.
   */
  run(namespace: string, command: string, args: readonly string[], options?: Options): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }>;
  /** Starts a command inside `namespace`; the pid is the command's own (`ip netns exec`, `nsenter` exec it). */
  spawn(namespace: string, command: string, args: readonly string[], options?: Options): ResultPromise;
  /** Kills every process in the run's namespaces, deletes them and the scratch directory. Idempotent. */
  remove(): void;
}

const ip = (args: readonly string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();

function namespacesOf(prefix: string): string[] {
  return ip(['netns', 'list'])
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name.startsWith(`${prefix}-`));
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGKILLs what runs in `namespace`, waits briefly for it to go, and deletes the namespace. */
function removeNamespace(namespace: string): void {
  const pids = () => {
    try {
      return ip(['netns', 'pids', namespace]).split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  for (const pid of pids()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  const deadline = Date.now() + killWaitMs;
  while (pids().length > 0 && Date.now() < deadline) execFileSync('sleep', ['0.1']);
  try {
    ip(['netns', 'del', namespace]);
  } catch {
    // Deleted meanwhile.
  }
}

const cgroupRoot = '/sys/fs/cgroup';

/** The mounted cgroup v1 hierarchies (`/sys/fs/cgroup/<name>` with a cgroup.procs), or v2's one. */
function cgroupHierarchies(): string[] {
  if (!existsSync(cgroupRoot)) return [];
  if (existsSync(path.join(cgroupRoot, 'cgroup.procs'))) return [cgroupRoot];
  return readdirSync(cgroupRoot).map((name) => path.join(cgroupRoot, name)).filter((dir) => existsSync(path.join(dir, 'cgroup.procs')));
}

/** Creates `/<name>` in every hierarchy (cpuset's cpus and mems copied from the root: a new cpuset has none). */
function createCgroup(name: string): void {
  for (const hierarchy of cgroupHierarchies()) {
    const dir = path.join(hierarchy, name);
    execFileSync('mkdir', ['-p', dir]);
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(path.join(hierarchy, file))) writeFileSync(path.join(dir, file), readFileSync(path.join(hierarchy, file)));
    }
  }
}

/** The cgroup directories of `name` in every hierarchy, deepest first. */
function cgroupTree(name: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // Removed meanwhile: the kubelet or containerd of a host still running deletes pods' cgroups as we walk.
    }
    for (const entry of entries) if (entry.isDirectory()) walk(path.join(dir, entry.name));
    found.push(dir);
  };
  for (const hierarchy of cgroupHierarchies()) if (existsSync(path.join(hierarchy, name))) walk(path.join(hierarchy, name));
  return found;
}

/** SIGKILLs every process in cgroup `name` (and below) until none is left, then removes the cgroups. */
function removeCgroup(name: string): void {
  const pids = () => {
    const all = new Set<number>();
    for (const dir of cgroupTree(name)) {
      try {
        for (const pid of readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) all.add(Number(pid));
      } catch {
        // Removed meanwhile.
      }
    }
    return [...all];
  };
  killContainerdTasks(pids());
  // Repeated: a supervisor or containerd may start a process between the read and the kill.
  const deadline = Date.now() + killWaitMs;
  for (let left = pids(); left.length > 0 && Date.now() < deadline; left = pids()) {
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    execFileSync('sleep', ['0.1']);
  }
  for (const dir of cgroupTree(name)) {
    try {
      rmdirSync(dir);
    } catch {
      // Still busy (a process in uninterruptible sleep); the next sweep takes it.
    }
  }
}

/**
 * SIGKILLs the tasks of every containerd among `pids`, asked inside its namespaces: a
 * container started without a kubelet (whose pods are below the host's cgroup) gets a
 * cgroup of containerd's choosing and a network namespace of its own, so neither the
 * cgroup nor `ip netns pids` finds it.
 */
function killContainerdTasks(pids: readonly number[]): void {
  for (const pid of pids) {
    const comm = (() => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        return '';
      }
    })();
    if (comm !== 'containerd') continue;
    const ctr = (args: readonly string[]) => {
      try {
        return execFileSync('nsenter', ['-t', String(pid), '--mount', '--net', '--', 'ctr', ...args], { stdio: ['ignore', 'pipe', 'ignore'], timeout: 5_000 }).toString();
      } catch {
        return '';
      }
    };
    for (const namespace of ctr(['namespaces', 'ls', '-q']).split('\n').filter(Boolean)) {
      // `tasks ls`: TASK PID STATUS; the pid is the machine's.
      for (const line of ctr(['-n', namespace, 'tasks', 'ls']).split('\n').slice(1)) {
        const task = Number(line.trim().split(/\s+/)[1]);
        if (task > 0) {
          try {
            process.kill(task, 'SIGKILL');
          } catch {
            // Gone already.
          }
        }
      }
    }
  }
}

/** Names of the run's cgroups (`<prefix>-h<i>`) in any hierarchy. */
function cgroupsOf(prefix: string): string[] {
  const names = new Set<string>();
  for (const hierarchy of cgroupHierarchies()) for (const entry of readdirSync(hierarchy)) if (entry.startsWith(`${prefix}-`)) names.add(entry);
  return [...names];
}

function removeRun(prefix: string): void {
  // The hosts' cgroups first: containers in pod network namespaces are found only there.
  for (const name of cgroupsOf(prefix)) removeCgroup(name);
  // Members before the hub: a veth pair dies with either end, the bridge with the hub.
  for (const namespace of namespacesOf(prefix).sort((a, b) => Number(a.endsWith('-hub')) - Number(b.endsWith('-hub')))) removeNamespace(namespace);
  rmSync(path.join(os.tmpdir(), prefix), { recursive: true, force: true });
}

/**
 * Removes every run's namespaces and scratch directories whose test process is gone.
 * Returns the prefixes removed.
 */
export function sweepStaleTestNetworks(): string[] {
  const runs = new Set<string>();
  for (const name of ip(['netns', 'list']).split('\n').map((l) => l.split(' ')[0] ?? '')) {
    const match = new RegExp(`^(${runPrefix}(\\d+))-`).exec(name);
    if (match && !pidAlive(Number(match[2]))) runs.add(match[1]!);
  }
  for (const hierarchy of cgroupHierarchies()) {
    for (const entry of readdirSync(hierarchy)) {
      const match = new RegExp(`^(${runPrefix}(\\d+))-`).exec(entry);
      if (match && !pidAlive(Number(match[2]))) runs.add(match[1]!);
    }
  }
  for (const entry of existsSync(os.tmpdir()) ? readdirSync(os.tmpdir()) : []) {
    const match = new RegExp(`^(${runPrefix}(\\d+))$`).exec(entry);
    if (match && !pidAlive(Number(match[2]))) runs.add(match[1]!);
  }
  for (const prefix of runs) removeRun(prefix);
  return [...runs];
}

const signalHandlers = new Map<string, () => void>();

/**
 * Creates the hub, the machine and `hosts` host namespaces of this process's run (after
 * removing stale runs, and any earlier network of this run: creating twice is creating once).
 */
/** The values a kubelet wants of machine-wide sysctls (k8s.io/kubernetes pkg/kubelet/cm setupKernelTunables). */
const kubeletSysctls = {
  'vm.overcommit_memory': 1, 'vm.panic_on_oom': 0, 'kernel.panic': 10, 'kernel.panic_on_oops': 1,
  'kernel.keys.root_maxkeys': 1000000, 'kernel.keys.root_maxbytes': 25000000,
} as const;

/** Joins the cgroup named by $1 in every hierarchy, then execs the rest of the arguments. */
const joinCgroup = 'cg=$1; shift; for f in /sys/fs/cgroup/"$cg"/cgroup.procs /sys/fs/cgroup/*/"$cg"/cgroup.procs; do [ -f "$f" ] && echo $$ > "$f"; done; exec "$@"';

/**
 * The holder, inside a fresh mount namespace (private propagation: nothing mounted here
 * reaches the machine's): binds the host's own directories over `hostDirectories` and its own
 * files over `hostFiles`, links the machine's CNI plugins into its /opt/cni/bin, writes the
 * ready file and sleeps until killed.
 */
const holdScript = [
  'set -e', 'root=$1; ready=$2; shift 2',
  'for d in "$@"; do mkdir -p "$root$d" "$d"; mount --bind "$root$d" "$d"; done',
  ...Object.entries(hostFiles).map(([file, content]) =>
    `mkdir -p "$(dirname "$root${file}")"; printf '${content}' > "$root${file}"; [ -e ${file} ] || touch ${file}; mount --bind "$root${file}" ${file}`),
  `for p in ${cniBinDir}/*; do ln -sf "$p" /opt/cni/bin/; done`,
  // The machine-wide sysctls a kubelet sets at start (vm.overcommit_memory=1, kernel.panic=10, …) read as
  // already set: a test host must not change the machine's; writing them fails (read-only files).
  'mkdir -p "$root/.sysctl"',
  ...Object.entries(kubeletSysctls).map(([key, value]) => {
    const file = `/proc/sys/${key.replaceAll('.', '/')}`;
    return `echo ${value} > "$root/.sysctl/${key}"; mount --bind "$root/.sysctl/${key}" ${file}; mount -o remount,bind,ro ${file}`;
  }),
  'touch "$ready"', "trap 'exit 0' TERM", 'while :; do sleep 3600 & wait $!; done',
].join('\n');

/** Starts a host's holder and waits for its mounts. */
async function startHolder(host: TestHost): Promise<number> {
  const ready = path.join(host.dir, 'holder.ready');
  const child = spawnChild('/bin/sh', ['-c', joinCgroup, 'sh', host.namespace,
    'nsenter', `--net=/run/netns/${host.namespace}`, 'unshare', '--mount', '--propagation', 'private',
    '/bin/sh', '-c', holdScript, 'hold', host.rootDir, ready, ...hostDirectories], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.unref();
  const deadline = Date.now() + 10_000;
  while (!existsSync(ready)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the mount namespace holder of ${host.name} did not start (exit ${child.exitCode}): ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  (child.stderr as NodeJS.ReadableStream & { unref?: () => void } | null)?.unref?.();
  return child.pid!;
}

/** The command line that runs `command` inside a host: its cgroup, network and mount namespaces. */
function inHost(host: TestHost, command: string, args: readonly string[]): [string, string[]] {
  return ['/bin/sh', ['-c', joinCgroup, 'sh', host.namespace, 'nsenter', '-t', String(host.holder), '--net', '--mount', '--', command, ...args]];
}

/**
 * Starts a host's containerd (config: `containerdConfig`, log: `<dir>/containerd.log`) and
 * waits for its socket; the host's network namespace forwards (kubeadm's preflight and pod
 * traffic need it).
 */
/** Where a `runtime` host's containerd writes (on the machine: the host's own directory). */
export const containerdLogPath = (host: TestHost): string => path.join(host.dir, 'containerd.log');

async function startContainerd(network: TestNetwork, host: TestHost, sandboxImage: string): Promise<void> {
  for (const [key, value] of [['net.ipv4.ip_forward', '1'], ['net.bridge.bridge-nf-call-iptables', '1'], ['net.bridge.bridge-nf-call-ip6tables', '1']] as const) {
    const set = await network.run(host.namespace, 'sysctl', ['-qw', `${key}=${value}`]);
    if (set.exitCode !== 0) throw new Error(`${host.name}: sysctl ${key}=${value}: ${set.stderr}`);
  }
  await mkdir(path.join(host.rootDir, 'etc/containerd'), { recursive: true });
  await writeFile(path.join(host.rootDir, 'etc/containerd/config.toml'), containerdConfig(sandboxImage));
  const log = containerdLogPath(host);
  const [command, args] = inHost(host, '/bin/sh', ['-c', `exec containerd --config /etc/containerd/config.toml >>${log} 2>&1`]);
  const child = spawnChild(command, args, { stdio: 'ignore', detached: true });
  child.unref();
  const socket = path.join(host.rootDir, 'run/containerd/containerd.sock');
  const deadline = Date.now() + 30_000;
  while (!existsSync(socket)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${host.name}: containerd did not start (exit ${child.exitCode}); see ${log}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function createTestNetwork(options: {
  hosts: number;
  /** Start a containerd in every host (default false: the agent alone needs none). */
  runtime?: boolean;
  /** The hosts' containerd sandbox image (default `defaultSandboxImage`). */
  sandboxImage?: string;
}): Promise<TestNetwork> {
  const prefix = `${runPrefix}${process.pid}`;
  if (prefix.length > 60) throw new Error(`namespace prefix ${prefix} is too long`);
  sweepStaleTestNetworks();
  removeRun(prefix);
  const root = path.join(os.tmpdir(), prefix);
  await mkdir(root, { recursive: true, mode: 0o700 });

  const hub = `${prefix}-hub`;
  const machine = { namespace: `${prefix}-machine`, address: machineAddress };
  const hosts: TestHost[] = Array.from({ length: options.hosts }, (_, i) => {
    const name = `h${i}-${process.pid}`;
    const dir = path.join(root, name);
    // holder: set once started.
    return { name, namespace: `${prefix}-h${i}`, address: hostAddress(i), dir, holder: 0, cgroup: `/${prefix}-h${i}`, rootDir: path.join(dir, 'root') };
  });
  // A host's commands enter its holder's namespaces once it runs; the machine's `ip netns exec`.
  const enter = (namespace: string, command: string, args: readonly string[]): [string, string[]] => {
    const host = hosts.find((h) => h.namespace === namespace && h.holder > 0);
    return host ? inHost(host, command, args) : ['ip', ['netns', 'exec', namespace, command, ...args]];
  };
  const network: TestNetwork = {
    prefix,
    root,
    machine,
    hosts,
    run: async (namespace, command, args, runOptions = {}) => {
      const [file, fileArgs] = enter(namespace, command, args);
      const result = await execa(file, fileArgs, { reject: false, ...(runOptions.input === undefined ? { stdin: 'ignore' as const } : {}), ...runOptions });
      return { exitCode: result.exitCode, stdout: String(result.stdout ?? ''), stderr: String(result.stderr ?? '') };
    },
    spawn: (namespace, command, args, spawnOptions = {}) => {
      const [file, fileArgs] = enter(namespace, command, args);
      return execa(file, fileArgs, { reject: false, stdin: 'ignore', ...spawnOptions });
    },
    remove: () => {
      removeRun(prefix);
      for (const [signal, handler] of signalHandlers) process.off(signal, handler);
      signalHandlers.clear();
    },
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const handler = () => {
      network.remove();
      process.kill(process.pid, signal);
    };
    signalHandlers.set(signal, handler);
    process.once(signal, handler);
  }

  try {
    ip(['netns', 'add', hub]);
    ip(['-n', hub, 'link', 'add', 'br0', 'type', 'bridge']);
    ip(['-n', hub, 'link', 'set', 'br0', 'up']);
    const members = [{ namespace: machine.namespace, address: machine.address, port: 'veth-m' }, ...hosts.map((h, i) => ({ namespace: h.namespace, address: h.address, port: `veth-h${i}` }))];
    for (const member of members) {
      ip(['netns', 'add', member.namespace]);
      ip(['-n', member.namespace, 'link', 'set', 'lo', 'up']);
      // Both ends are made inside the hub, the member's end moved straight into its namespace.
      ip(['-n', hub, 'link', 'add', 'name', member.port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', member.namespace]);
      ip(['-n', hub, 'link', 'set', member.port, 'master', 'br0', 'up']);
      ip(['-n', member.namespace, 'addr', 'add', `${member.address}/${networkPrefixLength}`, 'dev', 'eth0']);
      ip(['-n', member.namespace, 'link', 'set', 'eth0', 'up']);
    }
    // A host's default route is the machine namespace, which forwards nothing: a Service's
    // ClusterIP needs a route before kube-proxy rewrites it (as on any real host), and a
    // packet to anywhere else ends there, never leaving the test network.
    for (const host of hosts) ip(['-n', host.namespace, 'route', 'add', 'default', 'via', machine.address]);
    for (const host of hosts) {
      await mkdir(host.rootDir, { recursive: true, mode: 0o700 });
      createCgroup(host.namespace);
      host.holder = await startHolder(host);
    }
    if (options.runtime) for (const host of hosts) await startContainerd(network, host, options.sandboxImage ?? defaultSandboxImage);
  } catch (error) {
    network.remove();
    throw error;
  }
  return network;
}
