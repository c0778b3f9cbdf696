/**
 * Issue 28, item 2, run as a new user would: a 1 control-plane + 1 worker cluster on two
 * namespace test hosts made by `create cluster --pivot-to self`, SIGKILLed during its
 * management-install stage, then the same command again: the providers installed into the
 * cluster, the journaled move into it, the hosts' agents following to the in-cluster agent
 * manager through the cluster's own API endpoint, the local control plane stopped and its data
 * removed. Afterwards the cluster's own API holds its Cluster, Machines and Hosts, the nodes
 * stay Ready and no Machine is replaced for a minute (same UIDs), the agents heartbeat to the
 * in-cluster manager, no process of ours runs on the machine but the host emulation, and
 * `pivot --to self` says there is nothing to move. Prints the time of the finishing run and the
 * providers' memory. Not covered yet (issue 28 items 3-4): hosts registered after the pivot,
 * destroy of a self-managed cluster; the hosts are reset by removing the test network.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../integration/support/controlplane.js';
import { ensureBuilt } from './support/cli.js';
import { HostsLab, type RunningAgent } from './support/hosts-lab.js';

const name = 'itself';
let lab: HostsLab;
let dir = '';
const agents: RunningAgent[] = [];
const figures: Record<string, number | string> = {};

const kubeconfig = () => path.join(dir, 'auth', 'kubeconfig');

const json = <T>(args: readonly string[]): Promise<T> => lab.kubectlJson<T>(kubeconfig(), args);

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(2, { runtime: true });
  await lab.writeKubeletCgroupRoots();
  dir = path.join(lab.net.root, 'cluster');
}, 300_000);

afterAll(async () => {
  process.stderr.write(`pivot --to self figures: ${JSON.stringify(figures)}\n`);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 900_000);

interface MachineView { metadata: { name: string; uid: string }; status?: { phase?: string; nodeRef?: { name: string } } }
interface NodeView { metadata: { name: string }; status: { conditions?: { type: string; status: string }[] } }
interface HostView { metadata: { name: string }; status?: { lastHeartbeatTime?: string } }

describe('issue 28 item 2: create cluster --pivot-to self', () => {
  it('create cluster --pivot-to self on a 1 + 1 cluster, SIGKILLed during its provider install', async () => {
    const started = await lab.startCluster(dir, name, 1, ['--pivot-to', 'self']);
    agents.push(...started.agents);
    await waitFor('the first provider namespace in the cluster', async () => started.run.ended() || (await lab.kubectlWith(kubeconfig(), ['get', 'namespace', 'capi-system'])).exitCode === 0 || undefined, 1_500_000);
    expect(started.run.ended(), `create cluster ended before its provider install:\n${started.run.output()}`).toBe(false);
    expect(started.run.output()).toContain('stage management-install started');
    started.run.child.kill('SIGKILL');
    await started.run.child;
    // Killed before the move began: the Cluster is still only in the local control plane.
    const clusters = await lab.kubectlWith(kubeconfig(), ['get', 'clusters.cluster.x-k8s.io', '-A', '--no-headers']);
    expect(clusters.stdout.trim()).toBe('');
  }, 1_800_000);

  it('create cluster --pivot-to self again: the cluster holds its own objects, its agents follow, nothing of ours runs or stays on the machine', async () => {
    const started = Date.now();
    const run = await lab.cli(['create', 'cluster', '--dir', dir, '--pivot-to', 'self'], 1_200_000);
    figures['create cluster --pivot-to self, resumed (s)'] = (Date.now() - started) / 1000;
    expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${agents.map((a) => a.output().slice(-2000)).join('\n')}`).toBe(0);

    const machines = await json<{ items: MachineView[] }>(['get', 'machines.cluster.x-k8s.io', '-n', name]);
    expect(machines.items).toHaveLength(2);
    const clusters = await json<{ items: { metadata: { name: string } }[] }>(['get', 'clusters.cluster.x-k8s.io', '-n', name]);
    expect(clusters.items.map((c) => c.metadata.name)).toEqual([name]);
    const hosts = await json<{ items: HostView[] }>(['get', 'hosts.agent.provisioner.dev']);
    expect(hosts.items.map((h) => h.metadata.name).sort()).toEqual(lab.hosts.map((h) => h.name).sort());

    // No process of ours runs on the machine any more (only the pods in the hosts), and the local control plane's data is gone.
    const after = await lab.processesOf(['capi-manager', 'provisioner-agent-manager', 'kube-apiserver', 'etcd', 'provisioner-forwarder', 'kube-controller-manager', 'node'], dir);
    expect(after.local, 'local provider and control-plane processes').toEqual([]);
    expect(existsSync(path.join(dir, '.provisioner', 'controlplane')), 'the local control plane data').toBe(false);
    expect(existsSync(path.join(dir, 'auth', 'management.kubeconfig')), 'the local control plane kubeconfig').toBe(false);
    const pods = (await lab.processesOf(['capi-manager', 'provisioner-agent-manager'], dir)).pods;
    figures['provider pods RSS (MiB)'] = Math.round(pods.reduce((sum, p) => sum + p.rssKiB, 0) / 1024);

    // The agents heartbeat to the in-cluster manager: each Host's heartbeat moves on there.
    const beat = (items: HostView[]) => Object.fromEntries(items.map((h) => [h.metadata.name, h.status?.lastHeartbeatTime ?? '']));
    const first = beat(hosts.items);
    await waitFor('a newer heartbeat of every Host in the cluster itself', async () => {
      const now = beat((await json<{ items: HostView[] }>(['get', 'hosts.agent.provisioner.dev'])).items);
      return Object.entries(first).every(([host, at]) => (now[host] ?? '') > at) || undefined;
    }, 180_000);

    // A minute later: the same Machines (UIDs), Running, and every node Ready.
    const uids = machines.items.map((m) => m.metadata.uid).sort();
    await new Promise((resolve) => setTimeout(resolve, 60_000));
    const later = await json<{ items: MachineView[] }>(['get', 'machines.cluster.x-k8s.io', '-n', name]);
    expect(later.items.map((m) => m.metadata.uid).sort()).toEqual(uids);
    expect(later.items.map((m) => m.status?.phase)).toEqual(['Running', 'Running']);
    const nodes = await json<{ items: NodeView[] }>(['get', 'nodes']);
    for (const node of nodes.items) expect(node.status.conditions?.find((c) => c.type === 'Ready')?.status, node.metadata.name).toBe('True');
  }, 1_500_000);

  it('pivot --to self afterwards has nothing to move', async () => {
    const run = await lab.cli(['pivot', '--dir', dir, '--to', 'self'], 300_000);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain('already manages itself');
  }, 300_000);
});
