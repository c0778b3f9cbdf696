/**
 * vSphere end to end against the vCenter simulator: the bundled test-only `vcsim` (govmomi
 * v0.55.1's simulator, on loopback, with a user and password) stands in for vCenter, and
 * `create cluster` on vsphere runs the real CAPV manager (v1.16.1) against it over SOAP.
 *
 * What is real here, and asserted: the credentials file reaches CAPV by path and it logs
 * in (the VSphereCluster gets VCenterAvailable and the infrastructure becomes ready); the
 * control-plane machine's VM is cloned from a simulator VM and powered on (its VSphereVM
 * gets the clone's BIOS UUID and a managed-object reference). What is not: vcsim runs no
 * guest, so the VM never reports an IP and CAPV waits in WaitingForIPAllocation; the wait
 * then fails on the one-minute no-progress deadline with exit 6 naming that machine and
 * condition. CAPV's own simulator controller, which would fake the guests, could not be
 * built (docs/architecture.md, "Bundle"). `destroy cluster` then deletes the VMs through
 * CAPV (its finalizers wait for vCenter's Destroy_Task) and leaves nothing running.
 *
 * Fails (never skips) without the bundle: ensureBinaries throws for a missing vcsim.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { ExitCode } from '../../src/errors.js';
import { aliveRecorded, killRecorded, waitFor } from '../integration/support/controlplane.js';
import { cli, ensureBuilt, kubectl, processesMentioning, readJournal, startCli, type BackgroundCli } from './support/cli.js';

/** Longest the control plane's start and the stages before the VM is powered on may take on a loaded 2-core machine. */
const bootTimeoutMs = 600_000;
/** From the VM waiting for its IP to the CLI's exit: the one-minute deadline, the log bundle and the ordered stop. */
const stallExitMs = 180_000;
const vcenterUser = { username: 'capv-e2e', password: 'e2e-vcsim-password-0000' };

interface SimulatorInfo {
  host: string;
  thumbprint: string;
}

let dir = '';
/** vcsim's own directory, outside the install directory whose processes must all be gone at the end. */
let simulatorDir = '';
let simulator: ChildProcess | undefined;
let run: BackgroundCli | undefined;

beforeAll(async () => {
  await ensureBuilt();
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-e2e-vsphere-'));
  simulatorDir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-e2e-vcsim-'));
});

afterAll(async () => {
  if (run && !run.ended()) run.child.kill('SIGKILL');
  await stopSimulator();
  if (simulatorDir) await rm(simulatorDir, { recursive: true, force: true });
  if (!dir) return;
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

/** Stops vcsim: SIGTERM, and SIGKILL if it has not exited within 5 s, so no simulator outlives the test. */
async function stopSimulator(): Promise<void> {
  const child = simulator;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const stopped = await Promise.race([exited.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5_000))]);
  if (!stopped) {
    process.stderr.write('e2e vsphere: vcsim did not stop on SIGTERM within 5 s; killed\n');
    child.kill('SIGKILL');
    await exited;
  }
}

/** Starts vcsim on a free loopback port; resolves with its address and certificate fingerprint once it serves. */
async function startSimulator(): Promise<SimulatorInfo> {
  const { vcsim } = await ensureBinaries(['vcsim']);
  const infoFile = path.join(simulatorDir, 'vcsim.json');
  simulator = spawn(vcsim!, ['--listen', '127.0.0.1:0', '--username', vcenterUser.username, '--password', vcenterUser.password, '--info-file', infoFile], { stdio: 'ignore' });
  return waitFor('vcsim to serve', async () => JSON.parse(await readFile(infoFile, 'utf8').catch(() => 'null')) as SimulatorInfo | null ?? undefined, 30_000);
}

async function managementGet(kind: string): Promise<{ metadata: { name: string }; spec?: Record<string, unknown>; status?: Record<string, unknown> }[]> {
  const out = await execa(await kubectl(), ['--kubeconfig', path.join(dir, 'auth', 'management.kubeconfig'), 'get', kind, '-A', '-o', 'json'], { reject: false });
  return out.exitCode === 0 ? (JSON.parse(out.stdout) as { items: [] }).items : [];
}

describe('create cluster on vsphere against vcsim (1 + 1)', () => {
  it('CAPV logs in, clones and powers on the control-plane VM; the wait fails on WaitingForIPAllocation with exit 6; destroy deletes it', async () => {
    const vcenter = await startSimulator();
    const credentials = path.join(dir, 'vcenter.yaml');
    await writeFile(credentials, `username: ${vcenterUser.username}\npassword: ${vcenterUser.password}\n`);
    await chmod(credentials, 0o600);
    // vcsim's default inventory: datacenter DC0, cluster DC0_C0, datastore LocalDS_0, and VMs to clone from.
    const config = await cli(
      ['create', 'install-config', '--dir', dir, '--name', 'vs', '--platform', 'vsphere', '--server', vcenter.host, '--thumbprint', vcenter.thumbprint,
        '--datacenter', 'DC0', '--datastore', 'LocalDS_0', '--network', 'VM Network', '--resource-pool', '/DC0/host/DC0_C0/Resources', '--folder', '/DC0/vm',
        '--template', 'DC0_C0_RP0_VM0', '--endpoint-host', '127.0.0.1', '--vsphere-credentials-file', 'vcenter.yaml', '--control-plane-replicas', '1', '--workers', '1'],
      60_000,
    );
    expect(config.exitCode, config.stderr).toBe(0);

    run = startCli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '1'], bootTimeoutMs + stallExitMs);
    // CAPV reached vCenter with the file's user: the infrastructure is ready.
    await run.waitForStderr(/stage wait-infrastructure succeeded/, bootTimeoutMs);
    await run.waitForStderr(/VirtualMachineProvisioned: WaitingForIPAllocation/, bootTimeoutMs);
    // Cloned and powered on in vcsim: the VSphereVM carries the clone's BIOS UUID and its managed-object reference.
    const vms = await managementGet('vspherevms');
    expect(vms).toHaveLength(1);
    // CAPV writes the clone's BIOS UUID into the spec (it becomes the providerID once the VM has an IP) and its reference into the status.
    expect(vms[0]!.spec?.biosUUID).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(vms[0]!.status?.vmRef).toMatch(/^VirtualMachine:vm-\d+$/);
    // The simulator's VMs have no snapshot, so the provider falls back to a full clone.
    expect(vms[0]!.status?.cloneMode).toBe('fullClone');
    const clusters = await managementGet('vsphereclusters');
    const conditions = (clusters[0]?.status?.conditions ?? []) as { type: string; status: string }[];
    expect(conditions.find((c) => c.type === 'VCenterAvailable')?.status).toBe('True');

    const ended = await run.result();
    expect(ended.exitCode, ended.stderr).toBe(ExitCode.machines);
    expect(ended.stderr).toMatch(/No progress on the control plane and nodes for 6\d s/);
    expect(ended.stderr).toMatch(/Machine vs\/vs-control-plane-\w+: InfrastructureReady NotReady — \* VirtualMachineProvisioned: WaitingForIPAllocation/);
    const journal = await readJournal(dir);
    const timings = Object.entries(journal.stages).map(([stage, record]) => `${stage} ${record.state} ${Math.round((record.durationMs ?? 0) / 100) / 10}s`);
    process.stderr.write(`e2e vsphere stage timings on vcsim:\n  ${timings.join('\n  ')}\n`);
    // The temporary control plane stopped; the bundle holds CAPV's log and not the vCenter password.
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    const bundles = (await readdir(dir)).filter((f) => /^log-bundle-.*\.tar\.gz$/.test(f));
    expect(bundles).toHaveLength(1);
    const listing = await execa('tar', ['-tzf', path.join(dir, bundles[0]!)]);
    expect(listing.stdout).toMatch(/capv-manager\.log/);
    const content = await execa('tar', ['-xzOf', path.join(dir, bundles[0]!)], { encoding: 'utf8', maxBuffer: 512 * 2 ** 20 });
    expect(content.stdout).not.toContain(vcenterUser.password);

    const destroyed = await cli(['destroy', 'cluster', '--dir', dir], bootTimeoutMs);
    expect(destroyed.exitCode, destroyed.stderr).toBe(0);
    // CAPV drops a VSphereVM's finalizer only once vCenter's Destroy_Task succeeded: the object's deletion is the VM's.
    expect(destroyed.stderr).toMatch(/VirtualMachineProvisioned: Deleting/);
    expect(destroyed.stderr).toMatch(/Every Cluster API object of vs\/vs is gone/);
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });
});
