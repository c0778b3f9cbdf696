/**
 * The hosts platform's wait for hosts (src/platforms/hosts/registration.ts) against a real
 * local control plane running the platform's controllers (provisioner-agent-manager with
 * Cluster API's), with real provisioner-agents
 * registering through the printed commands. The control plane listens on loopback only
 * here, so the agents run on this machine (test/e2e covers hosts in network namespaces);
 * what is under test is the commands, the per-pool progress and the timeout.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateInstallConfigText, type InstallConfig } from '../../src/config/index.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { InfrastructureError } from '../../src/errors.js';
import { RecordingSink, type ProgressEvent, type ResultEvent } from '../../src/events.js';
import { installConfigSchema, platformNamed } from '../../src/platforms/registry.js';
import { waitForHosts } from '../../src/platforms/hosts/registration.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { prepareLocalControlPlane } from '../../src/services/local-controlplane.js';
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
