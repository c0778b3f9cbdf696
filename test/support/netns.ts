/**
 * Test hosts as network namespaces: machines to try `provisioner hosts` on without any.
 *
 * Layout (all namespaces of a run named `provisioner-test-<pid>-…`, pid: the test process):
 *
 * ```
 *   hub       a bridge `br0` and one veth end per member (`veth-m`, `veth-h0`, …)
 *   machine   eth0 198.18.0.1/15: runs the provisioner control plane (its loopback is its own)
 *   h<i>      eth0 198.18.0.<10+i>/15: one host each, running a real provisioner-agent
 * ```
 *
 * Addresses come from 198.18.0.0/15 (RFC 2544, benchmarking), and every link is inside a
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
 * Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2; the hosts need no mount namespace
 * of their own because each agent gets its own data directory and lock file by flag.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa, type Options, type ResultPromise } from 'execa';

/** Every namespace and scratch directory of a run starts with this and the run's pid. */
const runPrefix = 'provisioner-test-';
/** The test network: 198.18.0.0/15; the machine is .1, host i is .10+i. */
export const machineAddress = '198.18.0.1';
const networkPrefixLength = 15;
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
}

export interface TestNetwork {
  /** `provisioner-test-<pid>`: the run's namespaces start with it. */
  prefix: string;
  /** Scratch directory of the run, removed with it. */
  root: string;
  machine: { namespace: string; address: string };
  hosts: TestHost[];
  /** Runs a command to its end inside `namespace` (never rejects on a non-zero exit). */
  run(namespace: string, command: string, args: readonly string[], options?: Options): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }>;
  /** Starts a command inside `namespace`; the pid is the command's own (`ip netns exec` execs it). */
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

function removeRun(prefix: string): void {
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
export async function createTestNetwork(options: { hosts: number }): Promise<TestNetwork> {
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
    return { name, namespace: `${prefix}-h${i}`, address: hostAddress(i), dir: path.join(root, name) };
  });
  const network: TestNetwork = {
    prefix,
    root,
    machine,
    hosts,
    run: async (namespace, command, args, runOptions = {}) => {
      const result = await execa('ip', ['netns', 'exec', namespace, command, ...args], { reject: false, ...(runOptions.input === undefined ? { stdin: 'ignore' as const } : {}), ...runOptions });
      return { exitCode: result.exitCode, stdout: String(result.stdout ?? ''), stderr: String(result.stderr ?? '') };
    },
    spawn: (namespace, command, args, spawnOptions = {}) => execa('ip', ['netns', 'exec', namespace, command, ...args], { reject: false, stdin: 'ignore', ...spawnOptions }),
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
    for (const host of hosts) await mkdir(host.dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    network.remove();
    throw error;
  }
  return network;
}
