/**
 * Issue 28, item 1, run as a new user would: a 1 control-plane + 1 worker cluster on two
 * namespace test hosts (each with its own containerd), then `management install --kubeconfig
 * <dir>/auth/kubeconfig --dir <dir>` into it: the images built from the bundled binaries are
 * loaded onto both nodes without a registry; every provider Deployment (core, kubeadm
 * bootstrap, kubeadm control plane, the hosts provider's agent manager) becomes Available; the
 * webhooks answer through their in-cluster Services (a server-side dry-run create of an
 * invalid Machine is refused by Cluster API's webhook); clusterctl's inventory is there with
 * clusterctl's labels, and the bundled clusterctl (built from its own module) reads it; a
 * second run changes nothing; `--dry-run` prints and changes nothing; `destroy cluster` leaves
 * nothing on the hosts. Prints the time of the install and the resident memory of the
 * providers as pods against the same set as the install's local processes.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import { waitFor } from '../integration/support/controlplane.js';
import { cliPath, ensureBuilt } from './support/cli.js';
import { HostsLab, type RunningAgent } from './support/hosts-lab.js';

const name = 'selfmanaged';
let lab: HostsLab;
let dir = '';
let destroyed = false;
const agents: RunningAgent[] = [];
const figures: Record<string, number | string> = {};

const providerDeployments = [
  ['capi-system', 'capi-controller-manager'],
  ['capi-kubeadm-bootstrap-system', 'capi-kubeadm-bootstrap-controller-manager'],
  ['capi-kubeadm-control-plane-system', 'capi-kubeadm-control-plane-controller-manager'],
  ['provisioner-agent-system', 'provisioner-agent-controller-manager'],
] as const;

const kubeconfig = () => path.join(dir, 'auth', 'kubeconfig');

const json = <T>(args: readonly string[], config = kubeconfig()): Promise<T> => lab.kubectlJson<T>(config, args);

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(2, { runtime: true });
  await lab.writeKubeletCgroupRoots();
  dir = path.join(lab.net.root, 'cluster');
}, 300_000);

afterAll(async () => {
  process.stderr.write(`management install figures: ${JSON.stringify(figures)}\n`);
  if (dir && !destroyed) await lab?.cli(['destroy', 'cluster', '--dir', dir], 600_000).catch(() => undefined);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 900_000);

describe('issue 28 item 1: management install into a hosts cluster', () => {
  it('a 1 + 1 cluster on namespace hosts', async () => {
    agents.push(...(await lab.createCluster(dir, name, 1)).agents);
  }, 1_800_000);

  it('--dry-run prints what it would create and creates nothing', async () => {
    const run = await lab.cli(['management', 'install', '--kubeconfig', kubeconfig(), '--dir', dir, '--dry-run'], 300_000);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    for (const [ns, deployment] of providerDeployments) expect(run.stdout).toContain(`create Deployment ${ns}/${deployment}`);
    expect(run.stdout).toContain('create CustomResourceDefinition clusters.cluster.x-k8s.io');
    expect(run.stdout).toContain('create Provider capi-system/cluster-api');
    const namespaces = await json<{ items: { metadata: { name: string } }[] }>(['get', 'namespaces']);
    expect(namespaces.items.map((n) => n.metadata.name)).not.toContain('capi-system');
  }, 600_000);

  it('management install SIGKILLed once it has started applying leaves a cluster the next run finishes', async () => {
    const killed = lab.net.spawn(lab.net.machine.namespace, process.execPath, [cliPath, 'management', 'install', '--kubeconfig', kubeconfig(), '--dir', dir], { cwd: packageRoot, all: true, buffer: true, reject: false });
    let output = '';
    killed.all?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    let ended = false;
    void killed.finally(() => (ended = true)).catch(() => undefined);
    // Killed once its first objects are there (after the images are loaded): mid-apply.
    await waitFor('the first provider namespace', async () => {
      if (ended) throw new Error(`management install ended before it was killed:\n${output}`);
      return (await lab.kubectlWith(kubeconfig(), ['get', 'namespace', 'capi-system'])).exitCode === 0 || undefined;
    }, 600_000);
    killed.kill('SIGKILL');
    await killed;
    figures['killed after (objects present)'] = (await lab.kubectlWith(kubeconfig(), ['get', 'deployments,crds', '-A', '-l', 'clusterctl.cluster.x-k8s.io', '--no-headers'])).stdout.split('\n').filter(Boolean).length;
  }, 900_000);

  it('management install: images loaded, every provider Deployment Available, webhooks answering, the inventory clusterctl reads', async () => {
    const started = Date.now();
    const run = await lab.cli(['management', 'install', '--kubeconfig', kubeconfig(), '--dir', dir], 900_000);
    figures['management install (s)'] = (Date.now() - started) / 1000;
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    figures['its own summary'] = run.stdout.trim().split('\n').at(-1) ?? '';

    for (const [ns, deploymentName] of providerDeployments) {
      const deployment = await json<{ status: { conditions?: { type: string; status: string }[]; availableReplicas?: number } }>(['get', 'deployment', deploymentName, '-n', ns]);
      expect(deployment.status.conditions?.some((c) => c.type === 'Available' && c.status === 'True'), `${ns}/${deploymentName}: ${JSON.stringify(deployment.status)}`).toBe(true);
    }

    // The webhooks answer through their Services. Cluster API's Machine webhook refuses a Machine with no bootstrap
    // (a rule its CRD does not carry: only the webhook says this) and defaults a valid one (label and version: only a
    // mutating webhook changes an object), both on a server-side dry-run.
    const machine = (spec: Record<string, unknown>) => JSON.stringify({
      apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', metadata: { name: 'probe', namespace: 'default' },
      spec: { clusterName: 'none', infrastructureRef: { apiGroup: 'infrastructure.provisioner.dev', kind: 'HostMachine', name: 'none' }, ...spec },
    });
    const refused = await lab.kubectlWith(kubeconfig(), ['create', '--dry-run=server', '-f', '-'], machine({ bootstrap: {} }));
    expect(refused.exitCode, refused.stdout).not.toBe(0);
    expect(refused.stderr).toContain('expected either spec.bootstrap.dataSecretName or spec.bootstrap.configRef to be populated');
    const defaulted = await lab.kubectlWith(kubeconfig(), ['create', '--dry-run=server', '-o', 'json', '-f', '-'], machine({ bootstrap: { dataSecretName: 'none' }, version: '1.36.3' }));
    expect(defaulted.exitCode, defaulted.stderr).toBe(0);
    const view = JSON.parse(defaulted.stdout) as { metadata: { labels?: Record<string, string> }; spec: { version?: string } };
    expect(view.spec.version).toBe('v1.36.3');
    expect(view.metadata.labels?.['cluster.x-k8s.io/cluster-name']).toBe('none');
    // And ours: a HostCluster reaches the agent provider's webhook (allowed or denied, never unreachable).
    const hostCluster = { apiVersion: 'infrastructure.provisioner.dev/v1alpha1', kind: 'HostCluster', metadata: { name: 'probe', namespace: 'default' }, spec: {} };
    const ours = await lab.kubectlWith(kubeconfig(), ['create', '--dry-run=server', '-f', '-'], JSON.stringify(hostCluster));
    expect(`${ours.stdout}${ours.stderr}`).not.toMatch(/failed calling webhook|connection refused|no endpoints/i);

    const providers = await json<{ items: { metadata: { namespace: string; name: string; labels: Record<string, string> }; type: string; version: string }[] }>(['get', 'providers.clusterctl.cluster.x-k8s.io', '-A']);
    expect(providers.items.map((p) => `${p.metadata.namespace}/${p.metadata.name} ${p.type}`).sort()).toEqual([
      'capi-kubeadm-bootstrap-system/bootstrap-kubeadm BootstrapProvider',
      'capi-kubeadm-control-plane-system/control-plane-kubeadm ControlPlaneProvider',
      'capi-system/cluster-api CoreProvider',
      'provisioner-agent-system/agent-provisioner InfrastructureProvider',
    ]);
    for (const p of providers.items) {
      expect(p.metadata.labels).toMatchObject({ 'clusterctl.cluster.x-k8s.io': '', 'clusterctl.cluster.x-k8s.io/core': 'inventory' });
    }

    // clusterctl (bundled, built from its own module) reads both inventories: a dry-run move from the install's local control plane into this cluster.
    const { clusterctl } = await ensureBinaries(['clusterctl']);
    const move = await lab.net.run(lab.net.machine.namespace, clusterctl!, [
      'move', '--kubeconfig', path.join(dir, 'auth', 'management.kubeconfig'), '--to-kubeconfig', kubeconfig(), '--namespace', name, '--dry-run', '--v', '2',
    ], { timeout: 120_000, all: true });
    figures['clusterctl move --dry-run'] = `exit ${move.exitCode}: ${`${move.stdout}\n${move.stderr}`.split('\n').slice(-3).join(' | ')}`;
    expect(move.exitCode, `${move.stdout}\n${move.stderr}`).toBe(0);

    const processes = await lab.processesOf(['capi-manager'], dir);
    const kib = (list: { rssKiB: number }[]) => list.reduce((sum, p) => sum + p.rssKiB, 0);
    const rss = { pods: kib(processes.pods), local: kib(processes.local), podCount: processes.pods.length, localCount: processes.local.length };
    figures['RSS as pods (MiB)'] = Math.round(rss.pods / 1024);
    figures['pod processes'] = rss.podCount;
    figures['RSS as local processes (MiB)'] = Math.round(rss.local / 1024);
    figures['local processes'] = rss.localCount;
    // Four capi-managers as pods (one per provider namespace, the agent provider's included); one locally, serving all four (docs/architecture.md).
    expect(rss.podCount).toBe(4);
    expect(rss.localCount).toBe(1);
  }, 1_200_000);

  it('a second run changes nothing', async () => {
    const started = Date.now();
    const run = await lab.cli(['management', 'install', '--kubeconfig', kubeconfig(), '--dir', dir, '--output', 'json'], 900_000);
    figures['second run (s)'] = (Date.now() - started) / 1000;
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    const result = run.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type: string; data?: { created: string[]; changed: string[]; unchanged: string[]; certificatesIssued: string[] } }).find((e) => e.type === 'result');
    expect(result?.data?.created).toEqual([]);
    expect(result?.data?.changed).toEqual([]);
    expect(result?.data?.certificatesIssued).toEqual([]);
    expect(result?.data?.unchanged.length).toBeGreaterThan(40);
  }, 900_000);

  it('a cluster with another version of one of these providers is refused, naming it, before anything changes', async () => {
    const patched = await lab.kubectlWith(kubeconfig(), ['patch', 'providers.clusterctl.cluster.x-k8s.io', 'cluster-api', '-n', 'capi-system', '--type', 'merge', '-p', '{"version":"v1.13.4"}']);
    expect(patched.exitCode, patched.stderr).toBe(0);
    const run = await lab.cli(['management', 'install', '--kubeconfig', kubeconfig(), '--dir', dir], 300_000);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(8);
    expect(run.stderr).toContain('capi-system/cluster-api CoreProvider v1.13.4');
  }, 600_000);

  it('destroy cluster leaves nothing on the hosts', async () => {
    const run = await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    destroyed = true;
    for (const host of lab.hosts) {
      const containers = await lab.net.run(host.namespace, 'ctr', ['--address', '/run/containerd/containerd.sock', '-n', 'k8s.io', 'containers', 'ls', '-q']);
      expect(containers.stdout.trim(), `${host.name}'s containers`).toBe('');
      const images = await lab.net.run(host.namespace, 'ctr', ['--address', '/run/containerd/containerd.sock', '-n', 'k8s.io', 'images', 'ls', '-q']);
      expect(images.stdout.trim(), `${host.name}'s images`).toBe('');
      expect(await readdir(path.join(host.rootDir, 'etc/kubernetes')), `${host.name}'s /etc/kubernetes`).toEqual([]);
    }
  }, 900_000);
});
