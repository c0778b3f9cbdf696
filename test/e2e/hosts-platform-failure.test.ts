/**
 * The `hosts` platform when a host lacks what kubeadm needs: a namespace test host without
 * containerd registers, its bootstrap plan fails the preflight check for containerd's
 * socket, and `create cluster` exits 6 (machines) naming the host and the check, without
 * waiting for the no-progress timeout. Its own file: the namespace test hosts are named
 * after the test process, one set per process.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/embedded/catalog.js';
import { waitFor } from '../integration/support/controlplane.js';
import { cliPath, ensureBuilt } from './support/cli.js';
import { HostsLab, type RunningAgent } from './support/hosts-lab.js';

describe('a host that lacks containerd', () => {
  let bare: HostsLab;
  let bareDir = '';
  const bareAgents: RunningAgent[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    bare = await HostsLab.create(1);
    bareDir = path.join(bare.net.root, 'cluster');
  }, 300_000);

  afterAll(async () => {
    // Destroy while the agent runs: the host's reset plan needs it.
    if (bareDir) await bare?.cli(['destroy', 'cluster', '--dir', bareDir], 900_000).catch(() => undefined);
    for (const agent of bareAgents) agent.process.kill('SIGKILL');
    await bare?.remove();
  }, 900_000);

  it('fails its plan\'s preflight, and create cluster exits 6 naming the host and the check', async () => {
    const config = await bare.cli(['create', 'install-config', '--dir', bareDir, '--name', 'bare', '--platform', 'hosts', '--listen-address', bare.net.machine.address, '--control-plane-replicas', '1', '--workers', '0']);
    expect(config.exitCode, config.stderr).toBe(0);
    let output = '';
    const run = bare.net.spawn(bare.net.machine.namespace, process.execPath, [cliPath, 'create', 'cluster', '--dir', bareDir], { cwd: packageRoot, all: true, buffer: true, reject: false });
    run.all?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const command = await waitFor('a registration command', () => /^PROVISIONER_AGENT_TOKEN=(\S+) provisioner-agent register --server (https:\/\/\S+) --ca-checksum ([0-9a-f]{64})/m.exec(output) ?? undefined, 600_000);
    const host = bare.hosts[0]!;
    const registered = await bare.register(host, { token: command[1]!, server: command[2]!, checksum: command[3]!, stdout: '' });
    expect(registered.exitCode, `${registered.stdout}\n${registered.stderr}`).toBe(0);
    bareAgents.push(bare.startAgent(host));
    const done = await run;
    expect(done.exitCode, output).toBe(6);
    expect(output).toContain(`Host ${host.name} failed the bootstrap plan of HostMachine bare/`);
    expect(output).toMatch(/containerd-socket/);
  }, 1_800_000);
});
