/**
 * The local control plane with the real bundled binaries, in process (detached: false, as
 * `create cluster` runs it): etcd, kube-apiserver, every provider's CRDs and webhooks, and
 * one manager per bundled provider under the supervisor. One control plane is shared by the tests of
 * this file, in order; the port test at the end restarts it on the same directory.
 * Fails (never skips) when the bundle is missing: loadCatalog throws with the hint.
 */
import { createServer, type Server } from 'node:net';
import { readFile } from 'node:fs/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LocalControlPlane, Ports } from '../../src/controlplane/local-controlplane.js';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { loadCatalog } from '../../src/embedded/catalog.js';
import { type ProcessEvent } from '../../src/events.js';
import { RecordingSink } from '../support/recording-sink.js';
import { KubeApiError, type KubeObject } from '../../src/kube/client.js';
import { httpProbe } from '../../src/process/probes.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import {
  aliveRecorded,
  expectedProcessCount,
  listenersOf,
  loopbackAddress,
  recordedProcesses,
  removeInstallDir,
  tempInstallDir,
  waitFor,
} from './support/controlplane.js';

const namespace = 'it-controlplane';
const clusterName = 'c1';

const namespaceObject: KubeObject = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } };

/** A valid v1beta2 Cluster whose control plane and infrastructure do not exist yet. */
function cluster(name: string, spec: Record<string, unknown>): KubeObject {
  return { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace }, spec };
}

const clusterNetwork = { pods: { cidrBlocks: ['198.19.0.0/17'] }, services: { cidrBlocks: ['198.19.128.0/20'] } };
const validCluster = cluster(clusterName, {
  clusterNetwork,
  controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: `${clusterName}-cp` },
  infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevCluster', name: clusterName },
});

/**
 * What `clusterctl describe` walks: the infrastructure cluster and the control plane with its machine template (in-memory backend).
 * The DevCluster carries an annotation, as every generated object does: capd v1.14.0's in-memory backend writes into
 * `metadata.annotations` without creating it and panics on a DevCluster that has none, so the workload cluster never comes up.
 */
const clusterParts: KubeObject[] = [
  {
    apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
    kind: 'DevCluster',
    metadata: { name: clusterName, namespace, annotations: { 'provisioner.dev/test': 'controlplane' } },
    spec: { backend: { inMemory: {} } },
  },
  {
    apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
    kind: 'DevMachineTemplate',
    metadata: { name: `${clusterName}-cp`, namespace },
    spec: { template: { spec: { backend: { inMemory: { vm: { provisioning: { startupDuration: '10s', startupJitter: '0.2' } } } } } } },
  },
  {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name: `${clusterName}-cp`, namespace },
    spec: {
      replicas: 1,
      version: 'v1.33.0',
      machineTemplate: { spec: { infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevMachineTemplate', name: `${clusterName}-cp` } } },
      kubeadmConfigSpec: { clusterConfiguration: { apiServer: { certSANs: ['localhost', '127.0.0.1'] } } },
    },
  },
];

const controlPlaneStages = ['pki', 'etcd', 'kube-apiserver', 'crds', 'controllers', 'webhooks'];

/** Every recorded process listens, only on 127.0.0.1, and on at least the ports it recorded. */
/**
 * Every recorded process is alive and listens on its recorded ports, on 127.0.0.1 only.
 * A manager the supervisor is restarting (CAPA's, whose many informers can time out their
 * first sync when several control planes boot at once in CI) has not yet opened its ports,
 * so a missing process or port is looked at again for up to a minute before it fails with
 * what was seen last. A listener beyond 127.0.0.1 fails at once, never retried.
 */
async function expectLoopbackOnly(dir: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const entries = await aliveRecorded(dir);
    const seen: { entry: (typeof entries)[number]; ports: number[] }[] = [];
    for (const entry of entries) {
      const listeners = await listenersOf(entry.pid);
      const elsewhere = listeners.filter((l) => l.address !== loopbackAddress);
      expect(elsewhere, `${entry.name} (pid ${entry.pid}) listens beyond 127.0.0.1`).toEqual([]);
      seen.push({ entry, ports: listeners.map((l) => l.port) });
    }
    try {
      expect(entries.map((e) => e.name).sort()).toHaveLength(await expectedProcessCount());
      for (const { entry, ports } of seen) {
        expect(ports.length, `${entry.name} (pid ${entry.pid}) listens nowhere`).toBeGreaterThan(0);
        for (const [role, port] of Object.entries(entry.ports)) expect(ports, `${entry.name} ${role} port ${port}`).toContain(port);
      }
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 2_000));
    }
  }
}

function processEventsSince(sink: RecordingSink, from: number, name: string): ProcessEvent[] {
  return sink.events.slice(from).filter((e): e is ProcessEvent => e.type === 'process' && e.name === name);
}

async function applyRejected(cp: LocalControlPlane, obj: KubeObject): Promise<KubeApiError> {
  try {
    await cp.kube.apply(obj);
  } catch (error) {
    if (error instanceof KubeApiError) return error;
    throw error;
  }
  throw new Error(`${obj.kind} ${obj.metadata.name} was accepted`);
}

/** Listens on 127.0.0.1:port; resolves undefined when someone else already holds it (it is occupied either way). */
function occupy(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    // Another program on the port: it accepts and hangs up at once. A server that kept the
    // connections (of clients still aiming at the old ports) open would never finish close().
    const server = createServer((socket) => socket.destroy());
    server.once('error', () => resolve(undefined));
    server.listen({ port, host: loopbackAddress, exclusive: true }, () => resolve(server));
  });
}

function portsOf(ports: Ports): number[] {
  return [
    ports.etcd.client,
    ports.etcd.peer,
    ports.etcd.metrics,
    ports.apiServer.secure,
    ...Object.values(ports.controllers).flatMap((c) => [c.webhook, c.health, c.diagnostics]),
  ];
}

describe('local control plane with the real binaries', () => {
  let dir = '';
  const sink = new RecordingSink();
  const abort = new AbortController();
  let cp: LocalControlPlane | undefined;

  const controlPlane = (): LocalControlPlane => {
    if (!cp) throw new Error('no control plane: the boot failed');
    return cp;
  };

  /** Why the boot failed (a missing bundle: loadCatalog's error and hint): every test then fails with it, none is skipped. */
  let bootError: unknown;

  beforeAll(async () => {
    dir = await tempInstallDir('cp');
    try {
      cp = await prepareLocalControlPlane({ dir, detached: false, sink, signal: abort.signal });
      await cp.start();
    } catch (error) {
      bootError = error;
    }
  });

  beforeEach(() => {
    if (bootError) throw bootError;
  });

  afterAll(async () => {
    await cp?.stop().catch(() => undefined);
    abort.abort();
    await removeInstallDir(dir);
  });

  it('boots etcd, kube-apiserver and one manager per bundled binary (capi-manager for the Cluster API providers and the agent provider), each listening on 127.0.0.1 only', async () => {
    const succeeded = sink.ofType('stage').filter((s) => s.state === 'succeeded' && s.stage.startsWith('controlplane/')).map((s) => s.stage);
    expect(succeeded).toEqual(controlPlaneStages.map((s) => `controlplane/${s}`));
    const names = (await recordedProcesses(dir)).map((e) => e.name).sort();
    const components = (await loadCatalog()).components;
    expect(components.filter((c) => c.binary === 'capi-manager').map((c) => c.provider).sort()).toEqual(['agent-provisioner', 'bootstrap-kubeadm', 'cluster-api', 'control-plane-kubeadm', 'infrastructure-docker']);
    const managers = [...new Set(components.flatMap((c) => (c.binary ? [c.binary] : [])))];
    expect(names).toEqual(['etcd', 'kube-apiserver', ...managers].sort());
    await expectLoopbackOnly(dir);
    expect(await controlPlane().kube.raw('/readyz')).toBe('ok');
  });

  it('accepts a valid v1beta2 Cluster whose refs do not exist yet, and reads it back', async () => {
    const kube = controlPlane().kube;
    await kube.apply(namespaceObject);
    await kube.apply(validCluster);
    const stored = await kube.get<KubeObject & { spec: Record<string, { kind?: string; name?: string; apiGroup?: string }> }>(validCluster);
    expect(stored?.metadata.uid).toBeTruthy();
    expect(stored?.spec.controlPlaneRef).toEqual({ apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: `${clusterName}-cp` });
    expect(stored?.spec.infrastructureRef).toEqual({ apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevCluster', name: clusterName });
  });

  it.each([
    ['no control plane, infrastructure or topology', { clusterNetwork }, 'one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set'],
  ])("rejects a Cluster with %s, with CAPI's own webhook message", async (_case, spec, message) => {
    const bad = cluster('rejected', spec);
    const error = await applyRejected(controlPlane(), bad);
    expect(error.statusCode).toBe(422);
    expect(error.message).toContain('admission webhook "validation.cluster.cluster.x-k8s.io" denied the request');
    expect(error.message).toContain(message);
    // A final answer: no retry loop may send it again.
    expect([error.isDenied, error.isTransient]).toEqual([true, false]);
    expect(await controlPlane().kube.get(bad)).toBeUndefined();
  });

  it('serves each CRD at its storage version only: a v1beta1 object is refused naming its apiVersion, and no conversion is configured', async () => {
    const kube = controlPlane().kube;
    const written: KubeObject = {
      apiVersion: 'cluster.x-k8s.io/v1beta1',
      kind: 'Cluster',
      metadata: { name: 'written-as-v1beta1', namespace },
      spec: { infrastructureRef: { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'DevCluster', name: 'other', namespace } },
    };
    const error: unknown = await kube.apply(written).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as Error).message).toBe('the server does not serve Cluster in cluster.x-k8s.io/v1beta1');
    expect(await kube.get({ ...written, apiVersion: 'cluster.x-k8s.io/v1beta2' })).toBeUndefined();

    type Crd = KubeObject & { spec: { versions: { name: string }[]; conversion?: { strategy: string } } };
    const crds = (await kube.list<Crd>('apiextensions.k8s.io/v1', 'CustomResourceDefinition')).filter((c) => c.metadata.name.endsWith('cluster.x-k8s.io'));
    expect(crds.map((c) => c.metadata.name)).toEqual(expect.arrayContaining(['clusters.cluster.x-k8s.io', 'kubeadmcontrolplanes.controlplane.cluster.x-k8s.io', 'devclusters.infrastructure.cluster.x-k8s.io']));
    for (const crd of crds) {
      expect(crd.spec.versions.length, crd.metadata.name).toBe(1);
      expect(crd.spec.conversion?.strategy ?? 'None', crd.metadata.name).toBe('None');
    }
  });

  it('serves no OpenAPI v2 and no CRD OpenAPI (footprint), yet kubectl finds the built-in v3 and apply still checks a CRD object against its schema', async () => {
    const kube = controlPlane().kube;
    for (const path of ['/openapi/v2', '/openapi/v3/apis/cluster.x-k8s.io/v1beta2']) {
      const error: unknown = await kube.raw(path).catch((e: unknown) => e);
      expect(error, path).toBeInstanceOf(KubeApiError);
      expect((error as KubeApiError).statusCode, path).toBe(404);
    }
    // kubectl looks up the fieldValidation parameter in /openapi/v3 and fails without it ("failed to download openapi").
    const v3 = JSON.parse(await kube.raw('/openapi/v3')) as { paths: Record<string, unknown> };
    expect(Object.keys(v3.paths)).toEqual(expect.arrayContaining(['api/v1', 'apis/apiextensions.k8s.io/v1']));
    // Server-side apply's type converter comes from the CRD's schema, not from a served document.
    const unknownField = { ...validCluster, spec: { ...(validCluster['spec'] as Record<string, unknown>), bogusField: 1 } };
    const error: unknown = await kube.apply(unknownField).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as Error).message).toContain('.spec.bogusField: field not declared in schema');
  });

  it('lets clusterctl describe the cluster', async () => {
    for (const part of clusterParts) await controlPlane().kube.apply(part);
    const { clusterctl } = await ensureBinaries(['clusterctl']);
    const args = ['describe', 'cluster', clusterName, '-n', namespace, '--kubeconfig', controlPlane().kubeconfig];
    // The tree lists what the Cluster's refs point to; wait until the graph has both parts.
    const output = await waitFor(
      'clusterctl describe to show the DevCluster and the KubeadmControlPlane',
      async () => {
        const run = await execa(clusterctl!, args, { env: { HOME: dir, CLUSTERCTL_DISABLE_VERSIONCHECK: 'true' }, extendEnv: false, timeout: 60_000 });
        expect(run.exitCode).toBe(0);
        return run.stdout.includes(`KubeadmControlPlane ${namespace}/${clusterName}-cp`) && run.stdout.includes(`DevCluster ${namespace}/${clusterName}`) && run.stdout;
      },
      30_000,
    );
    expect(output).toContain(`Cluster ${namespace}/${clusterName}`);
  });

  it('still listens on 127.0.0.1 only once the providers work on a cluster', async () => {
    await expectLoopbackOnly(dir);
  });

  it('restarts a controller killed with SIGKILL and reports it', async () => {
    const name = 'capi-manager';
    const before = (await aliveRecorded(dir)).find((e) => e.name === name);
    expect(before, `${name} is not running`).toBeDefined();
    const from = sink.events.length;
    process.kill(before!.pid, 'SIGKILL');

    const events = await waitFor(`${name} to be ready again`, () => {
      const seen = processEventsSince(sink, from, name);
      return seen.some((e) => e.state === 'ready') && seen;
    }, 60_000);
    const states = events.map((e) => e.state);
    const exited = states.indexOf('exited');
    const restarting = states.indexOf('restarting');
    const ready = states.indexOf('ready');
    expect(exited, `events: ${states.join(', ')}`).toBeGreaterThanOrEqual(0);
    expect(restarting).toBeGreaterThan(exited);
    expect(ready).toBeGreaterThan(restarting);
    expect(events[exited]).toMatchObject({ pid: before!.pid, signal: 'SIGKILL' });
    expect(states).not.toContain('failed');

    const after = (await aliveRecorded(dir)).find((e) => e.name === name);
    expect(after?.pid).toBeDefined();
    expect(after?.pid).not.toBe(before!.pid);
    expect(events[ready]?.pid).toBe(after?.pid);
    const healthy = await httpProbe(`http://${loopbackAddress}:${after!.ports.health}/readyz`)(AbortSignal.timeout(5_000));
    expect(healthy).toBe(true);
    // Its validation webhook serves again: the API server calls it and relays its denial.
    const error = await applyRejected(controlPlane(), cluster('rejected-after-restart', { clusterNetwork }));
    expect(error.message).toContain('admission webhook "validation.cluster.cluster.x-k8s.io" denied the request');
  });

  it('stopControllers leaves etcd and the API server running; startControllers starts the managers again in place, one on a new webhook port its webhooks then point at', async () => {
    const portsFile = controlPlane().layout.portsFile;
    const before = await aliveRecorded(dir);
    const infrastructure = (entries: typeof before) => entries.filter((e) => e.name === 'etcd' || e.name === 'kube-apiserver').map((e) => `${e.name} ${e.pid}`).sort();
    await controlPlane().stopControllers();
    expect((await aliveRecorded(dir)).map((e) => e.name).sort()).toEqual(['etcd', 'kube-apiserver']);
    await expect(readFile(controlPlane().layout.startedFile, 'utf8'), 'a fenced start counts as unfinished').rejects.toThrow();
    // The capi-manager's webhook port, taken by another program while it is stopped.
    const taken = (JSON.parse(await readFile(portsFile, 'utf8')) as Ports).controllers['capi-manager']!.webhook;
    const server = await occupy(taken);
    try {
      await controlPlane().startControllers();
      const after = await aliveRecorded(dir);
      expect(after.map((e) => e.name).sort()).toEqual(before.map((e) => e.name).sort());
      expect(infrastructure(after), 'etcd and the API server kept running').toEqual(infrastructure(before));
      expect((JSON.parse(await readFile(portsFile, 'utf8')) as Ports).controllers['capi-manager']!.webhook).not.toBe(taken);
      await readFile(controlPlane().layout.startedFile, 'utf8');
      // CAPI's validation webhook answers on its new port: the API server calls it and relays its denial.
      const error = await applyRejected(controlPlane(), cluster('rejected-after-fence', { clusterNetwork }));
      expect(error.message).toContain('admission webhook "validation.cluster.cluster.x-k8s.io" denied the request');
      await expectLoopbackOnly(dir);
    } finally {
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    }
    await expect(controlPlane().startControllers(), 'nothing stopped to start again').rejects.toThrow(/no controllers were stopped/);
  });

  it('boots again on other ports when the last ports are taken, with its data', async () => {
    const portsFile = controlPlane().layout.portsFile;
    const previous = JSON.parse(await readFile(portsFile, 'utf8')) as Ports;
    await controlPlane().stop();
    cp = undefined;
    expect(await aliveRecorded(dir)).toEqual([]);

    const taken = portsOf(previous);
    const servers = await Promise.all(taken.map(occupy));
    try {
      // Most of them must really be ours: the test is about ports held by another program.
      expect(servers.filter(Boolean).length).toBeGreaterThanOrEqual(taken.length - 2);
      cp = await prepareLocalControlPlane({ dir, detached: false, sink, signal: abort.signal });
      await cp.start();
      const current = JSON.parse(await readFile(portsFile, 'utf8')) as Ports;
      const reused = portsOf(current).filter((p) => taken.includes(p));
      expect(reused).toEqual([]);
      expect(await aliveRecorded(dir)).toHaveLength(await expectedProcessCount());
      expect(await cp.kube.get(validCluster)).toBeDefined();
    } finally {
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => (s ? s.close(() => resolve()) : resolve()))));
    }
  });
});
