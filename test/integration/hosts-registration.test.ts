/**
 * The hosts platform's wait for hosts (src/platforms/hosts/registration.ts) against a real
 * local control plane running the platform's controllers (capi-manager serving the agent provider with
 * Cluster API's), with real provisioner-agents
 * registering through the printed commands. The control plane listens on loopback only
 * here, so the agents run on this machine (test/e2e covers hosts in network namespaces);
 * what is under test is the commands, the per-pool progress and the timeout. Then the
 * other hooks read what the provider records, written here by hand on a control plane
 * whose controllers do not run: a HostMachine whose plan failed, hosts released.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateInstallConfigText, type InstallConfig } from '../../src/config/index.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { loadCatalog } from '../../src/embedded/catalog.js';
import { InfrastructureError, MachinesError } from '../../src/errors.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { type ProgressEvent, type ResultEvent } from '../../src/events.js';
import { RecordingSink } from '../support/recording-sink.js';
import { installConfigSchema, platformNamed } from '../../src/platforms/registry.js';
import { destroyHostsCluster, waitForHosts, watchHostPlans } from '../../src/platforms/hosts/registration.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { tempInstallDir, waitFor } from './support/controlplane.js';

const config = (workers: number, clusterName: string): InstallConfig =>
  validateInstallConfigText(
    `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: ${clusterName}
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
  - name: gpu
    quantity: ${workers}
    roles: [worker]
    platform:
      hosts:
        hostSelector:
          matchLabels:
            example.com/gpu: "true"
platform:
  hosts: {}
bootstrap:
  listenAddress: 198.18.0.1
`,
    { schema: installConfigSchema },
  ).config;

interface PrintedCommand {
  pool: string;
  role: string;
  command: string;
}

describe('create cluster waits until registered hosts can fill every pool', () => {
  const abort = new AbortController();
  let dir: string;
  let agentsDir: string;
  let agent: string;
  let cp: LocalControlPlane | undefined;

  beforeAll(async () => {
    dir = await tempInstallDir('hosts-registration');
    agentsDir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-it-agents-'));
    agent = (await ensureBinaries(['provisioner-agent']))['provisioner-agent']!;
    cp = await prepareLocalControlPlane({ dir, detached: false, controllers: platformNamed('hosts').controllers, sink: new RecordingSink(), signal: abort.signal });
    await cp.start();
  }, 300_000);

  afterAll(async () => {
    await cp?.stop().catch(() => undefined);
    abort.abort();
    await rm(dir, { recursive: true, force: true });
    await rm(agentsDir, { recursive: true, force: true });
  }, 120_000);

  const context = (installConfig: InstallConfig, sink: RecordingSink, noProgressTimeoutMs: number) => ({
    config: installConfig,
    dir,
    kubeconfig: cp!.kubeconfig,
    signal: abort.signal,
    log: (message: string) => sink.emit({ type: 'log', level: 'info', message }),
    events: sink,
    noProgressTimeoutMs,
  });

  /** Runs a printed command's `provisioner-agent register` part as a host named `name` (token from the environment, as printed). */
  async function register(printed: PrintedCommand, name: string): Promise<void> {
    const parsed = /^PROVISIONER_AGENT_TOKEN=(\S+) provisioner-agent register (.*)$/.exec(printed.command);
    expect(parsed, printed.command).not.toBeNull();
    const args = parsed![2]!.split(' ');
    const run = await execa(agent, ['register', ...args, '--data-dir', path.join(agentsDir, name), '--host-name', name], { env: { PROVISIONER_AGENT_TOKEN: parsed![1]! }, reject: false });
    expect(run.exitCode, run.stderr).toBe(0);
  }

  it('prints one command per missing host with the pool\'s role and labels, reports each pool, and returns once both are filled', async () => {
    const sink = new RecordingSink();
    const waiting = waitForHosts(context(config(1, 'fill'), sink, 120_000));
    const printed = await waitFor('the registration commands', () => sink.ofType('result').find((r: ResultEvent) => r.kind === 'registration-commands'), 90_000);
    expect(printed.secret).toBe(true);
    const commands = (printed.data as { commands: PrintedCommand[] }).commands;
    expect(commands.map((c) => [c.pool, c.role])).toEqual([['control-plane', 'control-plane'], ['gpu', 'worker']]);
    expect(commands[0]!.command).toMatch(/ --roles control-plane$/);
    expect(commands[1]!.command).toMatch(/ --roles worker --labels example\.com\/gpu=true$/);
    expect(printed.text).toContain('only an agent on this machine reaches it');

    const progress = (pool: string) => sink.ofType('progress').filter((p: ProgressEvent) => p.task === `hosts:${pool}`).at(-1);
    expect(progress('control-plane')).toMatchObject({ current: 0, total: 1, unit: 'machines' });

    await register(commands[0]!, 'cp-0');
    await waitFor('control-plane filled', () => progress('control-plane')?.current === 1, 60_000);
    expect(progress('control-plane')?.done).toBe(true);
    expect(progress('gpu')).toMatchObject({ current: 0, total: 1 });
    expect(sink.ofType('log').map((l) => l.message)).toContain('1 of 1 control-plane hosts registered (pool control-plane)');

    await register(commands[1]!, 'gpu-0');
    await waiting;
    expect(progress('gpu')).toMatchObject({ current: 1, total: 1, done: true });
    expect(sink.ofType('log').at(-1)?.message).toBe('Every pool can be filled: control-plane ← cp-0; gpu ← gpu-0');
  }, 300_000);

  it('returns at once when the registered hosts already fill every pool (a resumed create): no command is printed', async () => {
    const sink = new RecordingSink();
    await waitForHosts(context(config(1, 'again'), sink, 10_000));
    expect(sink.ofType('result')).toEqual([]);
  }, 60_000);

  it('fails with exit 5 after the no-progress timeout, naming how many hosts each pool still lacks', async () => {
    const sink = new RecordingSink();
    // cp-0 and gpu-0 are registered: 2 more gpu hosts are missing.
    const failure = await waitForHosts(context(config(3, 'short'), sink, 3_000)).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(InfrastructureError);
    expect((failure as InfrastructureError).message).toMatch(/^Not enough hosts registered for short after 3 s without a new one: pool gpu lacks 2 worker host\(s\) labelled example\.com\/gpu=true$/);
    expect((failure as InfrastructureError).details).toContain('1 of 3 worker hosts registered (pool gpu, labels example.com/gpu=true)');
    const printed = sink.ofType('result').find((r) => r.kind === 'registration-commands');
    expect((printed?.data as { commands: PrintedCommand[] }).commands).toHaveLength(2);
  }, 120_000);
});

describe('the hosts platform reads what its provider records', () => {
  const abort = new AbortController();
  let dir: string;
  let cp: LocalControlPlane | undefined;
  let kube: KubeClient;
  const infra = 'infrastructure.provisioner.dev/v1alpha1';
  const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

  beforeAll(async () => {
    dir = await tempInstallDir('hosts-records');
    // No controller runs (the provider would reconcile what this test writes by hand): the agent provider's CRDs, applied here.
    cp = await prepareLocalControlPlane({ dir, detached: false, reconcile: false, sink: new RecordingSink(), signal: abort.signal });
    await cp.start();
    kube = KubeClient.fromFile(cp.kubeconfig);
    const catalog = await loadCatalog();
    const components = parseAllDocuments(await readFile(catalog.componentsPath(catalog.provider('agent-provisioner')), 'utf8')).map((d) => d.toJSON() as KubeObject);
    const crds = components.filter((o) => o?.kind === 'CustomResourceDefinition');
    expect(crds.length).toBeGreaterThanOrEqual(6);
    for (const crd of crds) await kube.apply(crd);
    await waitFor('the CRDs established', async () => {
      for (const crd of crds) {
        const live = await kube.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(crd);
        if (!live?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return false;
      }
      return true;
    }, 60_000);
    kube.resetDiscovery();
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'plans' } });
  }, 300_000);

  afterAll(async () => {
    kube?.close();
    await cp?.stop().catch(() => undefined);
    abort.abort();
    await rm(dir, { recursive: true, force: true });
  }, 120_000);

  const hostMachine = (name: string): KubeObject => ({ apiVersion: infra, kind: 'HostMachine', metadata: { name, namespace: 'plans' } });
  const setStatus = (name: string, status: Record<string, unknown>) => kube.applyStatus({ ...hostMachine(name), status } as KubeObject);
  const context = (sink: RecordingSink, signal: AbortSignal) => ({
    config: config(1, 'plans'),
    dir,
    kubeconfig: cp!.kubeconfig,
    signal,
    log: (message: string) => sink.emit({ type: 'log', level: 'info', message }),
    events: sink,
  });

  it('a HostMachine whose plan failed fails the wait for machines (exit 6), naming the host and the check', async () => {
    await kube.apply({ ...hostMachine('m-1'), spec: {} } as KubeObject);
    await setStatus('m-1', { hostRef: { name: 'h2' }, conditions: [{ type: 'BootstrapPlanApplied', status: 'False', reason: 'PlanPending', message: 'waiting for the agent', lastTransitionTime: now() }] });
    const stop = new AbortController();
    const watching = watchHostPlans(context(new RecordingSink(), stop.signal)).then(
      () => undefined,
      (error: unknown) => error,
    );
    // A pending plan is no failure.
    expect(await Promise.race([watching, new Promise((resolve) => setTimeout(() => resolve('pending'), 3000))])).toBe('pending');
    const message = 'host h2: plan host-h2/m-1 failed: attempt 1 of 1 failed: required preflight check failed: containerd-socket: /run/containerd/containerd.sock does not exist';
    await setStatus('m-1', { hostRef: { name: 'h2' }, conditions: [{ type: 'BootstrapPlanApplied', status: 'False', reason: 'PlanFailed', message, lastTransitionTime: now() }] });
    const failure = await watching;
    stop.abort();
    expect(failure).toBeInstanceOf(MachinesError);
    expect((failure as MachinesError).message).toBe(`Host h2 failed the bootstrap plan of HostMachine plans/m-1: ${message}`);
  }, 60_000);

  it('destroy says which hosts were reset and released, which only after their reset timed out, and which stay claimed', async () => {
    const claim = (host: string, machine: string) => ({ 'infrastructure.provisioner.dev/claimed-by': `plans.${machine}`, 'cluster.x-k8s.io/cluster-name': 'demo' });
    for (const [host, machine] of [['h1', 'm-1'], ['h2', 'm-2'], ['h3', 'm-3']] as const) {
      await kube.apply({ apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name: host, labels: claim(host, machine) }, spec: { address: '198.18.0.10' } } as KubeObject);
    }
    // Same cluster name, another namespace: another cluster's host.
    await kube.apply({ apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name: 'h4', labels: { 'infrastructure.provisioner.dev/claimed-by': 'elsewhere.m-1', 'cluster.x-k8s.io/cluster-name': 'demo' } }, spec: { address: '198.18.0.13' } } as KubeObject);
    const sink = new RecordingSink();
    const after = await destroyHostsCluster({ ...context(sink, abort.signal), clusterName: 'demo', namespace: 'plans' });
    expect(sink.ofType('log').map((l) => l.message)).toEqual(['Deleting the cluster resets and releases its hosts: h1, h2, h3']);

    // What the provider does on deletion: h2's reset times out, h1's is applied; both claims go; h3 keeps its claim.
    await kube.apply({ ...hostMachine('m-2'), spec: {} } as KubeObject);
    await setStatus('m-2', { hostRef: { name: 'h2' }, conditions: [{ type: 'HostReleased', status: 'False', reason: 'ResetTimedOut', message: 'the reset plan was not Applied within 10m0s', lastTransitionTime: now() }] });
    await new Promise((resolve) => setTimeout(resolve, 3000));
    for (const host of ['h1', 'h2']) await kube.mergePatch({ apiVersion: 'agent.provisioner.dev/v1alpha1', kind: 'Host', metadata: { name: host } }, { metadata: { labels: { 'infrastructure.provisioner.dev/claimed-by': null, 'cluster.x-k8s.io/cluster-name': null } } });
    await after();
    expect(sink.ofType('log').map((l) => l.message).slice(1)).toEqual([
      'Hosts reset and released (free for another cluster): h1',
      'Hosts released after their reset plan timed out, which may still run a kubelet or containers of the cluster: h2 (`provisioner plan status` on them shows the reset plan)',
      'Hosts still claimed by demo: h3 (`provisioner hosts list`)',
    ]);
  }, 60_000);
});
