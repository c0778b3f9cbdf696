/**
 * vSphere end to end against the vCenter simulator: the bundled test-only `vcsim` (govmomi
 * v0.55.1's simulator, on loopback, with a user and password) stands in for vCenter, and
 * `create cluster` on vsphere runs the real CAPV manager (v1.16.1) against it over SOAP,
 * with the machines' addresses from `platform.vsphere.network.addressPool`: our agent
 * manager (provider/, real binary) serves Cluster API's IPAM contract from the AddressPool
 * the manifests carry. The bundled test-only `govc` (the same govmomi module) lists what
 * the simulator holds.
 *
 * What is real here, and asserted: the credentials file reaches CAPV by path and it logs
 * in (VCenterAvailable, the infrastructure ready); CAPV claims an address for the
 * control-plane machine (an IPAddressClaim naming the AddressPool) and our manager binds
 * an IPAddress from the pool to it; the VM is cloned from a simulator VM (the VSphereVM's
 * spec names the pool, its status the clone's reference and BIOS UUID) and CAPV writes the
 * bound address, prefix and gateway into the VM's cloud-init metadata (read back from
 * vcsim with govc), then powers it on.
 *
 * What is not: vcsim runs no guest, so nothing applies that metadata and no VMware Tools
 * report an address. The test plays the guest's tools: it reports the address CAPV wrote
 * through the simulator's own hook (extraConfig `SET.guest.ipAddress`, govc vm.change).
 * CAPV then gets past WaitingForIPAllocation: the VSphereVM and VSphereMachine become
 * ready with that address and the providerID, and the Machine waits for its Node, which
 * never comes (no kubelet runs): the wait fails on the one-minute no-progress deadline
 * with exit 6 naming the machine. The worker's machine never gets a VM: its bootstrap data
 * waits for an initialized control plane. CAPV's own simulator controller, which would
 * fake the guests, could not be built (docs/architecture.md, "Bundle").
 *
 * `destroy cluster` then deletes the VM through CAPV (its finalizers wait for vCenter's
 * Destroy_Task); CAPV then drops its finalizer from the claim and leaves it to the garbage
 * collector, which no local control plane runs: our manager deletes the claim whose
 * VSphereVM is gone, and its IPAddress, seen with a kubectl
 * watch while destroy's control plane runs, and destroy waits for the claims and says
 * which addresses went back to the pool; afterwards govc finds the simulator's VMs and
 * folders exactly as they were before the install, and nothing of the install runs.
 *
 * Fails (never skips) without the bundle: ensureBinaries throws for a missing vcsim or govc.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { parseDocument } from 'yaml';
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

interface Listed {
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

async function managementGet(kind: string): Promise<Listed[]> {
  const out = await execa(await kubectl(), ['--kubeconfig', path.join(dir, 'auth', 'management.kubeconfig'), 'get', kind, '-A', '-o', 'json'], { reject: false });
  return out.exitCode === 0 ? (JSON.parse(out.stdout) as { items: [] }).items : [];
}

/** Runs the bundled govc against the simulator (no session kept on disk). */
async function govc(vcenter: SimulatorInfo, args: string[]): Promise<string> {
  const { govc: bin } = await ensureBinaries(['govc']);
  const url = `https://${encodeURIComponent(vcenterUser.username)}:${encodeURIComponent(vcenterUser.password)}@${vcenter.host}/sdk`;
  const out = await execa(bin!, args, { env: { GOVC_URL: url, GOVC_INSECURE: '1', GOVC_PERSIST_SESSION: 'false', HOME: simulatorDir }, extendEnv: false, reject: false });
  if (out.exitCode !== 0) throw new Error(`govc ${args.join(' ')} failed (${out.exitCode}): ${out.stderr}`);
  return out.stdout;
}

/** Inventory paths of every object of a type (m: VMs, f: folders) in the simulator, sorted. */
async function inventory(vcenter: SimulatorInfo, type: 'm' | 'f'): Promise<string[]> {
  return (await govc(vcenter, ['find', '/', '-type', type])).split('\n').filter((l) => l !== '').sort();
}

/** A VM's extraConfig, by key, as vcsim holds it. */
async function extraConfig(vcenter: SimulatorInfo, vmPath: string): Promise<Record<string, string>> {
  const info = JSON.parse(await govc(vcenter, ['vm.info', '-json', '-e', vmPath])) as { virtualMachines?: { config?: { extraConfig?: { key: string; value: unknown }[] } }[] };
  const entries = info.virtualMachines?.[0]?.config?.extraConfig ?? [];
  return Object.fromEntries(entries.map((e) => [e.key, String(e.value)]));
}

const pool = { addresses: ['198.18.250.10-198.18.250.20'], prefix: 24, gateway: '198.18.250.1', nameservers: ['198.18.250.2'] };
const poolApiGroup = 'ipam.provisioner.dev';

describe('create cluster on vsphere against vcsim (1 + 1), addresses from a pool', () => {
  it('CAPV claims an address our manager binds, clones and powers on the VM, gets past WaitingForIPAllocation; destroy leaves no VM, folder or claim', async () => {
    const vcenter = await startSimulator();
    const vmsBefore = await inventory(vcenter, 'm');
    const foldersBefore = await inventory(vcenter, 'f');
    expect(vmsBefore).toContain('/DC0/vm/DC0_C0_RP0_VM0');
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
    // As a user would: the pool written into install-config.yaml under platform.vsphere.network.
    const configFile = path.join(dir, 'install-config.yaml');
    const document = parseDocument(await readFile(configFile, 'utf8'));
    document.setIn(['platform', 'vsphere', 'network', 'addressPool'], document.createNode(pool));
    await writeFile(configFile, document.toString());

    run = startCli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '1'], bootTimeoutMs + stallExitMs);
    await run.waitForStderr(/stage wait-infrastructure succeeded/, bootTimeoutMs);

    // CAPV claimed an address from the pool; our manager bound one to the claim.
    const bound = await waitFor('the control-plane VM\'s IPAddressClaim bound', async () => {
      const claims = await managementGet('ipaddressclaims.ipam.cluster.x-k8s.io');
      const name = (claims[0]?.status?.addressRef as { name?: string } | undefined)?.name;
      return claims.length === 1 && name ? { claim: claims[0]!, addressName: name } : undefined;
    }, bootTimeoutMs);
    expect(bound.claim.spec?.poolRef).toEqual({ apiGroup: poolApiGroup, kind: 'AddressPool', name: 'vs' });
    const addresses = await managementGet('ipaddresses.ipam.cluster.x-k8s.io');
    expect(addresses.map((a) => a.metadata.name)).toEqual([bound.addressName]);
    const address = addresses[0]!.spec as { address: string; prefix: number; gateway: string; claimRef: { name: string }; poolRef: { name: string } };
    expect(address).toMatchObject({ address: '198.18.250.10', prefix: 24, gateway: '198.18.250.1', claimRef: { name: bound.claim.metadata.name }, poolRef: { name: 'vs' } });
    const readyOfClaim = ((bound.claim.status?.conditions ?? []) as { type: string; status: string; reason: string }[]).find((c) => c.type === 'Ready');
    expect(readyOfClaim).toMatchObject({ status: 'True', reason: 'AddressAllocated' });

    // Cloned and powered on; the VSphereVM's spec claims from the pool; CAPV wrote the address into the VM's metadata.
    const vm = await waitFor('the VSphereVM cloned (vmRef)', async () => {
      const vms = await managementGet('vspherevms');
      return vms.length === 1 && vms[0]!.status?.vmRef ? vms[0]! : undefined;
    }, bootTimeoutMs);
    const devices = (vm.spec?.network as { devices: { addressesFromPools?: unknown[]; dhcp4?: boolean; nameservers?: string[] }[] }).devices;
    expect(devices).toEqual([expect.objectContaining({ addressesFromPools: [{ apiGroup: poolApiGroup, kind: 'AddressPool', name: 'vs' }], nameservers: pool.nameservers })]);
    expect(vm.spec?.biosUUID).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(vm.status?.cloneMode).toBe('fullClone');
    const vmPath = `/DC0/vm/${vm.metadata.name}`;
    const metadata = await waitFor('CAPV\'s metadata with the address on the VM', async () => {
      const extra = await extraConfig(vcenter, vmPath);
      const text = extra['guestinfo.metadata'] ? Buffer.from(extra['guestinfo.metadata'], extra['guestinfo.metadata.encoding'] === 'base64' ? 'base64' : 'utf8').toString() : '';
      return text.includes('198.18.250.10/24') ? text : undefined;
    }, bootTimeoutMs);
    expect(metadata).toContain('198.18.250.1');
    expect(metadata).toContain('198.18.250.2');
    expect((await inventory(vcenter, 'm'))).toContain(vmPath);
    await run.waitForStderr(/VirtualMachineProvisioned: WaitingForIPAllocation/, bootTimeoutMs);

    // The guest's VMware Tools, played by the test: the address the metadata gave the guest, reported to vCenter.
    await govc(vcenter, ['vm.change', '-vm', vmPath, '-e', `SET.guest.ipAddress=${address.address}`]);
    const ready = await waitFor('the VSphereVM ready with its address', async () => {
      const vms = await managementGet('vspherevms');
      return vms[0]?.status?.ready === true ? vms[0] : undefined;
    }, 120_000);
    expect(ready.status?.addresses).toEqual([address.address]);
    // The VSphereMachine takes the VM's providerID and address: the Machine's infrastructure is ready.
    // CAPV writes the providerID (spec) and the addresses (status) in two updates: wait for both, then look at them.
    const machine = await waitFor('the VSphereMachine with the VM\'s providerID and its addresses', async () => {
      const machines = await managementGet('vspheremachines');
      return machines.find((m) => m.spec?.providerID === `vsphere://${vm.spec?.biosUUID as string}` && Array.isArray(m.status?.addresses) && m.status.addresses.length > 0);
    }, 120_000);
    expect(machine.status?.addresses).toEqual(expect.arrayContaining([expect.objectContaining({ address: address.address })]));
    const pools = await managementGet('addresspools.ipam.provisioner.dev');
    expect(pools.map((p) => p.status)).toEqual([{ total: 11, allocated: 1, free: 10 }]);

    const ended = await run.result();
    expect(ended.exitCode, ended.stderr).toBe(ExitCode.machines);
    expect(ended.stderr).toMatch(/No progress on the control plane and nodes for 6\d s/);
    // Past the VM's address: what is left is the node, which no kubelet registers.
    expect(ended.stderr).not.toMatch(/Machine vs\/vs-control-plane-\w+: InfrastructureReady NotReady/);
    expect(ended.stderr).toMatch(/Machine vs\/vs-control-plane-\w+: .*Node/);
    process.stderr.write(`e2e vsphere: create cluster ended in ${Math.round(ended.durationMs / 1000)} s with\n${ended.stderr.slice(ended.stderr.lastIndexOf('Error: '))}\n`);
    const journal = await readJournal(dir);
    const timings = Object.entries(journal.stages).map(([stage, record]) => `${stage} ${record.state} ${Math.round((record.durationMs ?? 0) / 100) / 10}s`);
    process.stderr.write(`e2e vsphere stage timings on vcsim:\n  ${timings.join('\n  ')}\n`);
    // The temporary control plane stopped; the bundle holds CAPV's log and not the vCenter password.
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    const bundles = (await readdir(dir)).filter((f) => /^log-bundle-.*\.tar\.gz$/.test(f));
    expect(bundles).toHaveLength(1);
    const listing = await execa('tar', ['-tzf', path.join(dir, bundles[0]!)]);
    expect(listing.stdout).toMatch(/capv-manager\.log/);
    expect(listing.stdout).toMatch(/capi-manager\.log/); // the agent provider's (the address pool's) log
    const content = await execa('tar', ['-xzOf', path.join(dir, bundles[0]!)], { encoding: 'utf8', maxBuffer: 512 * 2 ** 20 });
    expect(content.stdout).not.toContain(vcenterUser.password);

    // The bundle says what CAPV last recorded of the machine's infrastructure: its VSphereVM and the claim it owns.
    const report = (await execa('tar', ['-xzOf', path.join(dir, bundles[0]!), '--wildcards', '*/resources/machines-infrastructure.txt'], { encoding: 'utf8' })).stdout;
    expect(report).toMatch(new RegExp(`Machine vs/vs-control-plane-\\w+: infrastructure VSphereMachine ${vm.metadata.name}`));
    expect(report).toContain(`  VSphereVM ${vm.metadata.name}: `);
    expect(report).toContain(`  IPAddressClaim ${bound.claim.metadata.name}: every condition True`);
    expect(report).toMatch(/last provider log line naming it: \(logs\/capv-manager\.log\)/);

    // Destroy, with a watch on the claims and addresses of the namespace while its control plane runs.
    const destroying = startCli(['destroy', 'cluster', '--dir', dir], bootTimeoutMs);
    const watches = ['ipaddressclaims.ipam.cluster.x-k8s.io', 'ipaddresses.ipam.cluster.x-k8s.io'].map(async (resource) => {
      let events = '';
      while (!destroying.ended()) {
        // Ends when the API server stops (or is not up yet); `EVENT NAME ...` rows.
        const out = await execa(await kubectl(), ['--kubeconfig', path.join(dir, 'auth', 'management.kubeconfig'), 'get', resource, '-n', 'vs', '--watch', '--output-watch-events', '--no-headers'], { reject: false, timeout: bootTimeoutMs });
        events += out.stdout;
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      return events.split('\n').map((line) => line.split(/\s+/).slice(0, 2).join(' ')).filter((line) => line !== '');
    });
    const destroyed = await destroying.result();
    process.stderr.write(`e2e vsphere: destroy cluster took ${Math.round(destroyed.durationMs / 1000)} s; its last lines:\n${destroyed.stderr.split('\n').slice(-6).join('\n')}\n`);
    expect(destroyed.exitCode, destroyed.stderr).toBe(0);
    // CAPV drops a VSphereVM's finalizer only once vCenter's Destroy_Task succeeded: the object's deletion is the VM's.
    expect(destroyed.stderr).toMatch(/VirtualMachineProvisioned: Deleting/);
    expect(destroyed.stderr).toMatch(/Every Cluster API object of vs\/vs is gone/);
    // The claim and its address existed when destroy's control plane came up, and were deleted before it stopped.
    const [claimEvents, addressEvents] = await Promise.all(watches);
    expect(claimEvents).toContain(`ADDED ${bound.claim.metadata.name}`);
    expect(claimEvents).toContain(`DELETED ${bound.claim.metadata.name}`);
    expect(addressEvents).toContain(`ADDED ${bound.addressName}`);
    expect(addressEvents).toContain(`DELETED ${bound.addressName}`);
    expect(destroyed.stderr).toContain(`Addresses of vs/vs released to their pool: ${bound.claim.metadata.name} (198.18.250.10)`);
    // The simulator holds what it held before the install: no VM, no folder of ours.
    expect(await inventory(vcenter, 'm')).toEqual(vmsBefore);
    expect(await inventory(vcenter, 'f')).toEqual(foldersBefore);
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });
});
