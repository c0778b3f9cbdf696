/**
 * The `hosts` platform as a new user runs it, on two namespace test hosts with containerd
 * (test/support/netns.ts, `runtime`): `create install-config --platform hosts`, then
 * `create cluster`, which prints the registration commands and waits; the hosts register
 * with them and run their agents; the cluster comes up with real kubeadm, kubelet and
 * containerd (one control-plane node, one worker) and `destroy cluster` resets and
 * releases both hosts (a host without containerd, scaling a pool onto a third host: hosts-create-cluster.test.ts). The
 * only thing a test host needs beyond a real one is its own
 * cgroup root for the kubelet (several kubelets share this kernel), given in its
 * /var/lib/provisioner/kubelet.env.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadBinaryCatalog } from '../../src/embedded/catalog.js';
import { Journal } from '../../src/lifecycle/journal.js';
import { ensureBuilt } from './support/cli.js';
import { HostsLab, type BackgroundRun, type RunningAgent } from './support/hosts-lab.js';

let lab: HostsLab;
let dir: string;
const agents: RunningAgent[] = [];
let create: BackgroundRun | undefined;

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(2, { runtime: true });
  await lab.writeKubeletCgroupRoots();
  dir = path.join(lab.net.root, 'cluster');
}, 300_000);

afterAll(async () => {
  create?.child.kill('SIGKILL');
  // Destroy while the agents run: the hosts' reset plans need them.
  if (dir) await lab?.cli(['destroy', 'cluster', '--dir', dir], 900_000).catch(() => undefined);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 900_000);

describe('a kubeadm cluster on registered hosts', () => {
  it('create install-config --platform hosts writes the listen address', async () => {
    const run = await lab.cli(['create', 'install-config', '--dir', dir, '--name', 'hosts', '--platform', 'hosts', '--listen-address', lab.net.machine.address, '--control-plane-replicas', '1', '--workers', '1']);
    expect(run.exitCode, run.stderr).toBe(0);
  });

  it('create cluster prints a registration command per host, waits for them, and ends with 2 Ready nodes at the bundled kubelet version', async () => {
    const started = Date.now();
    create = lab.spawnCli(['create', 'cluster', '--dir', dir]);
    const commands = await lab.waitForHostCommands(create, 2);
    expect(commands.map((c) => c.role)).toEqual(['control-plane', 'worker']);
    expect(create.output()).toContain('0 of 1 control-plane hosts registered (pool control-plane)');
    agents.push(...(await lab.registerWithPrinted([[lab.hosts[0]!, 'control-plane'], [lab.hosts[1]!, 'worker']], commands)));
    const done = await create.child;
    const createOutput = create.output();
    process.stderr.write(`hosts platform: create cluster took ${Math.round((Date.now() - started) / 1000)} s\n`);
    expect(done.exitCode, `${createOutput}\n${agents.map((a) => a.output()).join('\n')}`).toBe(0);
    expect(createOutput).toContain('Every pool can be filled');
    // The measure: where the time goes, stage by stage (the wait for hosts includes registering them here).
    const journal = JSON.parse(await readFile(Journal.path(dir), 'utf8')) as { stages: Record<string, { durationMs?: number }> };
    const stages = Object.entries(journal.stages).map(([name, s]) => `${name} ${((s.durationMs ?? 0) / 1000).toFixed(1)} s`);
    process.stderr.write(`hosts platform: create cluster stages: ${stages.join(', ')}\n`);

    const kubeletVersion = (await loadBinaryCatalog()).binary('kubelet').version;
    const nodes = await lab.kubectlWith(path.join(dir, 'auth', 'kubeconfig'), ['get', 'nodes', '-o', 'json']);
    expect(nodes.exitCode, nodes.stderr).toBe(0);
    const items = (JSON.parse(nodes.stdout) as { items: { metadata: { name: string }; spec: { providerID?: string }; status: { nodeInfo: { kubeletVersion: string }; conditions: { type: string; status: string }[] } }[] }).items;
    expect(items.map((n) => n.metadata.name).sort()).toEqual(lab.hosts.map((h) => h.name).sort());
    for (const node of items) {
      expect(node.status.conditions.find((c) => c.type === 'Ready')?.status, node.metadata.name).toBe('True');
      expect(node.status.nodeInfo.kubeletVersion).toBe(kubeletVersion);
      expect(node.spec.providerID).toBe(`provisioner-host://${node.metadata.name}`);
    }
  }, 1_800_000);

  it('destroy cluster resets and releases both hosts', async () => {
    const run = await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/Hosts reset and released \(free for another cluster\): h\S+, h\S+/);
    dir = '';
  }, 900_000);
});
