/**
 * `register fleet` and destroy's Fleet step against two REAL API servers booted from the
 * bundle (etcd and kube-apiserver, no controllers): a Fleet manager with our Fleet CRDs
 * (manifests/crds/fleet.yaml) installed, and a plain downstream cluster standing for the
 * workload cluster. Fleet's controller and agent are the test double
 * test/support/fleet-double.ts; nothing of it is in src/. An install directory here is what
 * hand-off leaves: install-config.yaml and auth/kubeconfig (the downstream's). Both control
 * planes are shared by every test of the file. Fails (never skips) when the bundle is missing.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultKubernetesVersion } from '../../src/config/index.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import { ConfigError, ExternalError, ProvisionerError, requestField } from '../../src/errors.js';
import { RecordingSink } from '../support/recording-sink.js';
import { installCrds, loadCrds } from '../../src/handoff/crds.js';
import type { FleetCluster, SecretObject } from '../../src/handoff/fleet/objects.js';
import type { KubeClient, KubeObject } from '../../src/kube/client.js';
import { destroyCluster } from '../../src/services/destroy.js';
import { fleetRecordFile, registerFleet, type RegistrationMode } from '../../src/services/fleet.js';
import { createInstallConfig } from '../../src/services/install-config.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { defaultPlatform } from '../../src/platforms/registry.js';
import { FleetDouble } from '../support/fleet-double.js';
import { removeInstallDir, tempInstallDir, waitFor } from './support/controlplane.js';

const fleet = 'fleet.cattle.io/v1alpha1';
const namespace = 'fleet-default';
/** The double answers within a second, so a wait that stalls for this long is a bug (or the case under test). */
const noProgressTimeoutMs = 20_000;

async function rejection(promise: Promise<unknown>): Promise<ProvisionerError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ProvisionerError)) throw new Error(`expected a typed failure, got ${String(error)}`);
  return error;
}

describe('hand-off to Fleet against real API servers and a Fleet double', () => {
  const abort = new AbortController();
  const dirs: string[] = [];
  let managerPlane: LocalControlPlane | undefined;
  let downstreamPlane: LocalControlPlane | undefined;
  let double: FleetDouble | undefined;
  let downstreamId = '';
  const manager = (): KubeClient => managerPlane!.kube;
  const downstream = (): KubeClient => downstreamPlane!.kube;
  const selector = (name: string) => `provisioner.dev/cluster-name=${name},provisioner.dev/cluster-namespace=${name},provisioner.dev/cluster-id=${downstreamId}`;
  const clustersOf = (name: string) => manager().list<FleetCluster>(fleet, 'Cluster', { namespace, labelSelector: selector(name) });
  const secretsOf = (name: string) => manager().list<SecretObject>('v1', 'Secret', { namespace, labelSelector: selector(name) });

  /** An install directory as hand-off leaves it: install-config.yaml for cluster `name`, auth/kubeconfig the downstream's. */
  async function installDir(name: string): Promise<string> {
    const dir = await tempInstallDir(`fleet-${name}`);
    dirs.push(dir);
    await createInstallConfig({
      dir,
      answers: { name, platform: defaultPlatform.name, kubernetesVersion: defaultKubernetesVersion, controlPlaneReplicas: 1, workers: 1, platformAnswers: {} },
      force: false,
      sink: new RecordingSink(),
    });
    await mkdir(path.join(dir, 'auth'), { recursive: true });
    await copyFile(downstreamPlane!.kubeconfig, path.join(dir, 'auth', 'kubeconfig'));
    return dir;
  }

  const register = (dir: string, mode: RegistrationMode, sink = new RecordingSink(), fleetKubeconfig = managerPlane!.kubeconfig) =>
    registerFleet({ dir, fleetKubeconfig, mode, sink, signal: abort.signal, noProgressTimeoutMs });

  beforeAll(async () => {
    const sink = new RecordingSink();
    const [managerDir, downstreamDir] = [await tempInstallDir('fleet-manager'), await tempInstallDir('fleet-downstream')];
    dirs.push(managerDir, downstreamDir);
    // No provider: etcd and kube-apiserver only, the plainest real API server.
    managerPlane = await prepareLocalControlPlane({ dir: managerDir, detached: false, controllers: [], sink, signal: abort.signal });
    downstreamPlane = await prepareLocalControlPlane({ dir: downstreamDir, detached: false, controllers: [], sink, signal: abort.signal });
    await Promise.all([managerPlane.start(), downstreamPlane.start()]);
    await installCrds(manager(), await loadCrds('fleet.yaml'), { signal: abort.signal });
    await manager().apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    downstreamId = (await downstream().get({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }))!.metadata.uid!;
    double = FleetDouble.start({ manager: manager(), downstream: downstream() });
  });

  afterAll(async () => {
    await double?.stop();
    await Promise.all([managerPlane?.stop().catch(() => undefined), downstreamPlane?.stop().catch(() => undefined)]);
    abort.abort();
    for (const dir of dirs) await removeInstallDir(dir);
  });

  it('manager-initiated: a Cluster with a generated name and the install\'s labels, its kubeconfig in a labelled Secret, registered once the agent checked in; found again by labels, never by name', async () => {
    const dir = await installDir('alpha');
    // What a lookup by name would pick: an unrelated Cluster called like the install's cluster.
    await manager().apply({ apiVersion: fleet, kind: 'Cluster', metadata: { name: 'alpha', namespace }, spec: {} });
    const sink = new RecordingSink();
    const result = await register(dir, 'manager', sink);

    const [cluster, ...otherClusters] = await clustersOf('alpha');
    const [secret, ...otherSecrets] = await secretsOf('alpha');
    expect([otherClusters, otherSecrets]).toEqual([[], []]);
    expect(cluster!.metadata.name).toMatch(/^alpha-[a-z0-9]{5}$/);
    expect(secret!.metadata.name).toMatch(/^alpha-kubeconfig-[a-z0-9]{5}$/);
    expect(cluster!.spec).toEqual({ kubeConfigSecret: secret!.metadata.name });
    const kubeconfig = await readFile(path.join(dir, 'auth', 'kubeconfig'), 'utf8');
    expect(Buffer.from(secret!.data!['value']!, 'base64').toString('utf8')).toBe(kubeconfig);
    expect(cluster!.status?.agent?.lastSeen).toBeTruthy();
    expect(result).toMatchObject({ mode: 'manager', cluster: `${namespace}/${cluster!.metadata.name}`, lastSeen: cluster!.status!.agent!.lastSeen, selector: selector('alpha') });
    expect(result.clusterNamespace).toMatch(/^cluster-fleet-default-alpha-/);
    expect((await manager().get<FleetCluster>({ apiVersion: fleet, kind: 'Cluster', metadata: { name: 'alpha', namespace } }))!.spec).toEqual({});
    const stages = sink.ofType('stage').filter((s) => s.state === 'succeeded').map((s) => s.stage);
    expect(stages).toEqual(['fleet/preflight', 'fleet/record', 'fleet/kubeconfig-secret', 'fleet/cluster', 'fleet/wait-registered']);
    expect(sink.ofType('object').at(-1)).toMatchObject({ kind: 'Cluster.fleet.cattle.io', name: cluster!.metadata.name, ready: true, phase: 'Registered' });
    // The kubeconfig's credentials never reach an event (the debug log).
    expect(JSON.stringify(sink.events)).not.toContain(secret!.data!['value']!.slice(0, 40));
    expect(JSON.parse(await readFile(fleetRecordFile(dir), 'utf8'))).toMatchObject({ kubeconfig: managerPlane!.kubeconfig, namespace, mode: 'manager' });

    const again = new RecordingSink();
    await register(dir, 'manager', again);
    expect((await clustersOf('alpha')).map((c) => c.metadata.uid)).toEqual([cluster!.metadata.uid]);
    expect((await secretsOf('alpha')).map((s) => s.metadata.uid)).toEqual([secret!.metadata.uid]);
    expect(again.ofType('log').map((l) => l.message)).toContain(`Found Fleet Cluster ${namespace}/${cluster!.metadata.name} by its labels`);
    expect(double!.failures).toEqual([]);

    // Registered here, so another namespace of the manager is refused (exit 2), as is an agent-only flag.
    await manager().apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'fleet-other' } });
    const elsewhere = await rejection(registerFleet({ dir, fleetKubeconfig: managerPlane!.kubeconfig, namespace: 'fleet-other', sink: new RecordingSink(), signal: abort.signal }));
    expect(elsewhere.exitCode).toBe('usage');
    expect(elsewhere.message).toContain(`recorded as registered elsewhere: with ${manager().server} (${managerPlane!.kubeconfig}), namespace ${namespace}`);
    expect(await manager().list(fleet, 'Cluster', { namespace: 'fleet-other' })).toEqual([]);
    const agentOnly = await rejection(registerFleet({ dir, fleetKubeconfig: managerPlane!.kubeconfig, apiServerUrl: 'https://fleet.example:6443', sink: new RecordingSink(), signal: abort.signal }));
    expect([agentOnly.exitCode, agentOnly.message]).toEqual(['usage', expect.stringContaining(requestField('apiServerUrl'))]);
  });

  it('agent-initiated: a token Fleet answers, the bootstrap Secret on the workload cluster, and the agent registers with only its values to the Cluster carrying its clientID', async () => {
    const dir = await installDir('beta');
    const registrationsBefore = double!.registrations.length;
    const sink = new RecordingSink();
    const result = await register(dir, 'agent', sink);

    const [cluster, ...others] = await clustersOf('beta');
    expect(others).toEqual([]);
    expect(cluster!.spec).toEqual({ clientID: downstreamId });
    expect(result).toMatchObject({ mode: 'agent', cluster: `${namespace}/${cluster!.metadata.name}` });
    // The agent (with nothing but the bootstrap Secret's URL, CA and token) made one registration, and Fleet granted it to this Cluster.
    const made = double!.registrations.slice(registrationsBefore);
    expect(made).toHaveLength(1);
    const registration = await manager().get<KubeObject & { status?: { clusterName?: string; granted?: boolean } }>({ apiVersion: fleet, kind: 'ClusterRegistration', metadata: { name: made[0]!.split('/')[1]!, namespace } });
    expect(registration!.status).toEqual({ clusterName: cluster!.metadata.name, granted: true });
    const [token] = await manager().list<KubeObject & { status?: { secretName?: string } }>(fleet, 'ClusterRegistrationToken', { namespace, labelSelector: selector('beta') });
    expect(token!.metadata.name).toMatch(/^beta-token-/);
    // Registered: the agent deleted its bootstrap Secret; its configuration stays.
    expect(await downstream().get({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'fleet-agent-bootstrap', namespace: 'cattle-fleet-system' } })).toBeUndefined();
    const config = await downstream().get<KubeObject & { data: { config: string } }>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fleet-agent', namespace: 'cattle-fleet-system' } });
    expect(JSON.parse(config!.data.config)).toMatchObject({ clientID: downstreamId, agentTLSMode: 'strict' });
    const stages = sink.ofType('stage').filter((s) => s.state === 'succeeded').map((s) => s.stage);
    expect(stages).toEqual(['fleet/preflight', 'fleet/record', 'fleet/cluster', 'fleet/token', 'fleet/agent-bootstrap', 'fleet/wait-registered']);
    // Fleet's configuration has no API server URL here: the agent was given the manager's kubeconfig server, and no event carries the token.
    expect(sink.ofType('log').map((l) => l.message).join('\n')).toContain(`at ${manager().server} (from the server of ${managerPlane!.kubeconfig})`);
    const values = await manager().get<SecretObject>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: token!.status!.secretName!, namespace } });
    const issued = /token: (\S+)/.exec(Buffer.from(values!.data!['values']!, 'base64').toString('utf8'))![1]!;
    expect(JSON.stringify(sink.events)).not.toContain(issued);

    // Once registered, a second run needs no token or bootstrap Secret.
    const again = new RecordingSink();
    await register(dir, 'agent', again);
    expect(again.ofType('stage').filter((s) => s.state === 'succeeded').map((s) => s.stage)).toEqual(['fleet/preflight', 'fleet/record', 'fleet/cluster', 'fleet/wait-registered']);
    expect(double!.registrations.length).toBe(registrationsBefore + 1);
    expect(double!.failures).toEqual([]);

    // destroy cluster removes it and its token by their labels (one Cluster per downstream's clientID: another agent registration needs it gone).
    await destroyCluster({ dir, sink: new RecordingSink(), signal: abort.signal, noProgressTimeoutMs });
    expect(await clustersOf('beta')).toEqual([]);
    expect(await manager().list(fleet, 'ClusterRegistrationToken', { namespace, labelSelector: selector('beta') })).toEqual([]);
  });

  it('destroy cluster deletes the Fleet Cluster, its Secret and its token by their labels and forgets the registration; others stay', async () => {
    const dir = await installDir('gamma');
    // What a deletion by name would pick: an unrelated Cluster called like the install's cluster.
    await manager().apply({ apiVersion: fleet, kind: 'Cluster', metadata: { name: 'gamma', namespace }, spec: {} });
    await register(dir, 'manager');
    expect(await clustersOf('gamma')).toHaveLength(1);
    const peer = await installDir('iota');
    await register(peer, 'manager');

    const sink = new RecordingSink();
    await destroyCluster({ dir, sink, signal: abort.signal, noProgressTimeoutMs });
    expect(await clustersOf('gamma')).toEqual([]);
    expect(await secretsOf('gamma')).toEqual([]);
    await expect(readFile(fleetRecordFile(dir))).rejects.toThrow(/ENOENT/);
    expect(sink.ofType('stage').find((s) => s.stage === 'fleet/deregister' && s.state === 'succeeded')).toBeDefined();
    expect(await clustersOf('iota')).toHaveLength(1); // another install's registration stays
    expect(await manager().get({ apiVersion: fleet, kind: 'Cluster', metadata: { name: 'gamma', namespace } })).toBeDefined(); // the unlabelled one
    await destroyCluster({ dir: peer, sink: new RecordingSink(), signal: abort.signal, noProgressTimeoutMs });
  });

  it('a register killed while it waits for the agent resumes: the same Cluster and Secret, found by their labels, no duplicate', async () => {
    const dir = await installDir('epsilon');
    double!.paused = true;
    const child = execa(process.execPath, ['--import', 'tsx', path.join(packageRoot, 'test', 'fixtures', 'register-fleet.ts'), dir, managerPlane!.kubeconfig, 'manager'], { cwd: packageRoot, reject: false });
    let cluster: FleetCluster | undefined;
    try {
      cluster = await waitFor('the killed register to create its Fleet Cluster', async () => (await clustersOf('epsilon'))[0], 60_000);
      child.kill('SIGKILL');
      expect((await child).signal).toBe('SIGKILL');
    } finally {
      child.kill('SIGKILL');
      double!.paused = false;
    }
    expect(cluster.status?.agent?.lastSeen).toBeFalsy();
    const [secret] = await secretsOf('epsilon');

    const sink = new RecordingSink();
    await register(dir, 'manager', sink);
    expect((await clustersOf('epsilon')).map((c) => c.metadata.uid)).toEqual([cluster.metadata.uid]);
    expect((await secretsOf('epsilon')).map((s) => s.metadata.uid)).toEqual([secret!.metadata.uid]);
    expect((await clustersOf('epsilon'))[0]!.status?.agent?.lastSeen).toBeTruthy();
    expect(sink.ofType('log').map((l) => l.message)).toContain(`Found Fleet Cluster ${namespace}/${cluster.metadata.name} by its labels`);
  });

  it('a manager that cannot reach the cluster: fails naming the Cluster and Fleet\'s error, points at --mode agent, which then registers the same Cluster', async () => {
    const dir = await installDir('zeta');
    double!.reach = () => 'https://127.0.0.1:1';
    let zetaUid: string | undefined;
    // The manager stays unable to reach the cluster throughout: only the agent path can register it.
    try {
      const failure = await rejection(registerFleet({ dir, fleetKubeconfig: managerPlane!.kubeconfig, mode: 'manager', sink: new RecordingSink(), signal: abort.signal, noProgressTimeoutMs: 3_000 }));
      const [cluster] = await clustersOf('zeta');
      expect(failure).toBeInstanceOf(ExternalError);
      expect(failure.exitCode).toBe('external');
      expect(failure.message).toContain(`Fleet Cluster ${namespace}/${cluster!.metadata.name}: no Fleet agent checked in`);
      expect(failure.message).toMatch(/Imported: Get "https:\/\/127\.0\.0\.1:1\/version": .*ECONNREFUSED/);
      expect(failure.hint).toContain('--mode agent');
      zetaUid = cluster!.metadata.uid!;
      await register(dir, 'agent');
    } finally {
      double!.reach = (server) => server;
    }
    const [after, ...others] = await clustersOf('zeta');
    expect(others).toEqual([]);
    expect(after!.metadata.uid).toBe(zetaUid);
    expect(after!.spec).toEqual({ clientID: downstreamId });
    expect(after!.status?.agent?.lastSeen).toBeTruthy();
    expect(await secretsOf('zeta')).toEqual([]); // the manager mode's kubeconfig Secret went with the switch
    // Gone again, so that another agent registration of this downstream can follow in any order.
    await destroyCluster({ dir, sink: new RecordingSink(), signal: abort.signal, noProgressTimeoutMs });
    expect(await clustersOf('zeta')).toEqual([]);
  });

  it('the CLI: register fleet prints the Fleet Cluster as its result and exits 0; destroy cluster removes it', async () => {
    const dir = await installDir('theta');
    const cli = (args: string[]) => execa(process.execPath, ['--import', 'tsx', path.join(packageRoot, 'src', 'main.ts'), ...args], { cwd: packageRoot, reject: false, stdin: 'ignore' });

    const registered = await cli(['register', 'fleet', '--dir', dir, '--kubeconfig', managerPlane!.kubeconfig, '--output', 'json']);
    expect(registered.exitCode, registered.stderr).toBe(0);
    const events = registered.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type: string; kind?: string; data?: { cluster?: string; mode?: string } });
    const [cluster] = await clustersOf('theta');
    expect(events.find((e) => e.type === 'result')).toMatchObject({ kind: 'fleet-cluster', data: { cluster: `${namespace}/${cluster!.metadata.name}`, mode: 'manager' } });

    const destroyed = await cli(['destroy', 'cluster', '--dir', dir]);
    expect(destroyed.exitCode, destroyed.stderr).toBe(0);
    expect(await clustersOf('theta')).toEqual([]);
    expect(await secretsOf('theta')).toEqual([]);
  });

  it('refuses a bad workload kubeconfig, an unreachable workload cluster and a cluster without Fleet, naming each and the next step, before creating anything', async () => {
    const dir = await installDir('eta');
    const kubeconfig = path.join(dir, 'auth', 'kubeconfig');
    await writeFile(kubeconfig, 'clusters: [');
    const bad = await rejection(register(dir, 'manager'));
    expect(bad).toBeInstanceOf(ConfigError);
    expect(bad.message).toContain(kubeconfig);

    const text = (await readFile(downstreamPlane!.kubeconfig, 'utf8')).replace(/server: https:\/\/127\.0\.0\.1:\d+/, 'server: https://127.0.0.1:1');
    await writeFile(kubeconfig, text, { mode: 0o600 });
    const unreachable = await rejection(register(dir, 'manager'));
    expect(unreachable).toBeInstanceOf(ExternalError);
    expect(unreachable.message).toContain(`The workload cluster in ${kubeconfig} (https://127.0.0.1:1) cannot be reached`);
    expect(unreachable.hint).toContain('is up');

    await copyFile(downstreamPlane!.kubeconfig, kubeconfig);
    const noFleet = await rejection(register(dir, 'manager', new RecordingSink(), downstreamPlane!.kubeconfig));
    expect(noFleet).toBeInstanceOf(ExternalError);
    expect(noFleet.message).toContain(`The cluster in ${downstreamPlane!.kubeconfig} does not serve Fleet's`);
    expect(noFleet.hint).toContain('fleet-controller');

    await expect(readFile(fleetRecordFile(dir))).rejects.toThrow(/ENOENT/);
    expect(await clustersOf('eta')).toEqual([]);
  });
});
