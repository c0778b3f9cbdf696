/**
 * Issue 16's pivot of a hosts cluster, with real parts: `management start --listen-address`
 * in the machine namespace (the lasting management cluster), then `create cluster
 * --pivot-to` its kubeconfig for a kubeadm cluster on one namespace test host with its own
 * containerd (test/support/netns.ts, `runtime`). The host registers with the local control
 * plane through the printed command; after the cluster is up the move takes the Host and its
 * plans to the management cluster, and the host's agent follows there with a fresh credential
 * (the old one revoked, the local control plane stopped). A day-2 plan applied through the
 * management cluster then runs on the host, and `destroy cluster` resets it from there.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../../src/lifecycle/journal.js';
import { waitFor } from '../integration/support/controlplane.js';
import { ensureBuilt } from './support/cli.js';
import { HostsLab, hostsInstallConfig, type BackgroundRun, type RunningAgent } from './support/hosts-lab.js';

const name = 'moved';
let lab: HostsLab;
let dir = '';
const agents: RunningAgent[] = [];
let create: BackgroundRun | undefined;

interface HostView { metadata: { labels?: Record<string, string> }; status?: { registration?: string; lastHeartbeatTime?: string; conditions?: { type: string; status: string }[] } }
interface PlanList { items: { metadata: { name: string }; status?: { phase?: string } }[] }

async function json<T>(args: readonly string[], kubeconfig = lab.kubeconfig): Promise<T | undefined> {
  const run = await lab.kubectlWith(kubeconfig, [...args, '-o', 'json']);
  return run.exitCode === 0 ? (JSON.parse(run.stdout) as T) : undefined;
}

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(1, { runtime: true });
  await lab.writeKubeletCgroupRoots();
  dir = path.join(lab.net.root, 'cluster');
  const started = await lab.startManagement();
  expect(started.exitCode, started.stderr).toBe(0);
}, 900_000);

afterAll(async () => {
  create?.child.kill('SIGKILL');
  // Destroy while the agent runs: the reset plan needs it (from the management cluster after the pivot).
  if (dir) await lab?.cli(['destroy', 'cluster', '--dir', dir], 900_000).catch(() => undefined);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 900_000);

describe('pivot of a hosts cluster into management start', () => {
  it('moves the Host and its plans; the agent follows with a fresh credential, the old one goes with the local control plane; a day-2 plan applied in the new manager runs on the host', async () => {
    const [h0] = lab.hosts;
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'install-config.yaml'), hostsInstallConfig(name, lab.net.machine.address, 0));
    const started = Date.now();
    create = lab.spawnCli(['create', 'cluster', '--dir', dir, '--pivot-to', lab.kubeconfig]);
    const [printed] = await lab.waitForHostCommands(create, 1);
    const { server } = printed!;
    const registered = await lab.register(h0!, printed!, ['--roles', printed!.role]);
    expect(registered.exitCode, `${registered.stdout}\n${registered.stderr}`).toBe(0);
    const files = HostsLab.files(h0!);
    const first = JSON.parse(await readFile(path.join(files.data, 'credential.json'), 'utf8')) as { server: string };
    const firstToken = await readFile(path.join(files.data, 'token'), 'utf8');
    expect(first.server).toBe(server);
    agents.push(lab.startAgent(h0!));
    const done = await create.child;
    const createOutput = create.output();
    process.stderr.write(`hosts pivot: create cluster --pivot-to took ${Math.round((Date.now() - started) / 1000)} s\n`);
    expect(done.exitCode, `${createOutput}\n${agents[0]!.output()}`).toBe(0);
    expect(createOutput).toMatch(/Handing 1 host agent\(s\) over to https:\/\/\S+: h\S+/);
    expect(createOutput).toMatch(/manages no cluster any more and was stopped/);
    const journal = JSON.parse(await readFile(Journal.path(dir), 'utf8')) as { stages: Record<string, { durationMs?: number }> };
    process.stderr.write(`hosts pivot: create cluster stages: ${Object.entries(journal.stages).map(([stage, s]) => `${stage} ${((s.durationMs ?? 0) / 1000).toFixed(1)} s`).join(', ')}\n`);

    // The Host and its plans are the management cluster's now, its agent registered there anew and reporting.
    const host = await json<HostView>(['get', 'hosts.agent.provisioner.dev', h0!.name]);
    expect(host?.metadata.labels?.['cluster.x-k8s.io/cluster-name']).toBe(name);
    expect(host?.status?.registration).toBe(`follow-${h0!.name}`);
    expect(host?.status?.conditions?.find((c) => c.type === 'Registered')?.status).toBe('True');
    const plans = await json<PlanList>(['get', 'nodeplans', '-n', `host-${h0!.name}`]);
    expect(plans?.items.length, JSON.stringify(plans)).toBeGreaterThan(0);
    expect(plans!.items.every((p) => p.status?.phase === 'Applied'), JSON.stringify(plans!.items.map((p) => [p.metadata.name, p.status?.phase]))).toBe(true);

    // The pod network's ClusterResourceSet and its objects moved with the cluster: the new manager keeps applying them.
    const sets = await json<{ items: { metadata: { name: string }; spec: { resources: { name: string }[] } }[] }>(['get', 'clusterresourcesets.addons.cluster.x-k8s.io', '-n', name]);
    expect(sets?.items.map((x) => x.metadata.name)).toEqual([`${name}-pod-network`]);
    const resources = await lab.kubectl(['get', 'configmap', `${name}-pod-network`, '-n', name, '-o', 'name']);
    expect(resources.exitCode, resources.stderr).toBe(0);

    // The agent's stored server is the management cluster's listen address; its token is a new one.
    const published = await lab.kubectl(['get', 'configmap', 'agent-server', '-n', 'provisioner-registration', '-o', 'jsonpath={.data.server}']);
    const credential = JSON.parse(await readFile(path.join(files.data, 'credential.json'), 'utf8')) as { server: string; host: string };
    expect(credential).toEqual(expect.objectContaining({ server: published.stdout, host: h0!.name }));
    expect(credential.server).not.toBe(first.server);
    expect(await readFile(path.join(files.data, 'token'), 'utf8')).not.toBe(firstToken);
    // The old server is gone: nothing answers there any more.
    const old = await lab.net.run(lab.net.machine.namespace, 'curl', ['-sk', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '5', `${first.server}/readyz`], { timeout: 20_000, reject: false });
    expect(old.stdout).toBe('000');

    // A day-2 plan applied in the new manager runs on the host.
    const day2 = path.join('/var/lib/provisioner', 'day-2');
    const applied = await lab.applyPlan(h0!, 'day-2', { files: [{ path: day2, content: 'after the pivot\n' }] });
    expect(applied.exitCode, applied.stderr).toBe(0);
    await waitFor('the day-2 plan Applied', async () => ((await lab.plan(h0!, 'day-2'))?.status?.phase === 'Applied' ? true : undefined), 120_000);
    expect(await readFile(path.join(h0!.rootDir, day2), 'utf8')).toBe('after the pivot\n');
    expect(existsSync(path.join(files.data, 'handover.json'))).toBe(false);
    // The cluster is still there, from the workload side.
    const nodes = await lab.kubectlWith(path.join(dir, 'auth', 'kubeconfig'), ['get', 'nodes', '-o', 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}']);
    expect(nodes.stdout).toBe('True');
  }, 1_800_000);

  it('destroy cluster resets and releases the host from the management cluster', async () => {
    const run = await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/Hosts reset and released \(free for another cluster\): h\S+/);
    dir = '';
  }, 900_000);
});
