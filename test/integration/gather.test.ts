/**
 * The log bundle against the real local control plane: etcd, kube-apiserver and every
 * bundled provider booted from the bundle in a temp dir. Plants a Secret with known data
 * and a Cluster, gathers, and reads the archive back: the Cluster is there with its
 * status, the Secret by name only, and no private key anywhere. Then the service path:
 * with the control plane running, and stopped (etcd and the API server started for the gather,
 * no controller, stopped after); destroy bootstrap likewise starts no controller.
 * Fails (never skips) when the bundle has not been built: run `npm run bundle` first.
 */
import { randomBytes } from 'node:crypto';
import { appendFile, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlaneStatus, type LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { RecordingSink } from '../support/recording-sink.js';
import { gatherBundle } from '../../src/gather/collect.js';
import type { KubeObject } from '../../src/kube/client.js';
import { destroyBootstrap } from '../../src/services/destroy.js';
import { gatherBootstrap } from '../../src/services/gather.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { expectedProcessCount } from './support/controlplane.js';
import { runTempDir } from '../support/run-dirs.js';

const namespace = 'gather-it';
const clusterName = 'gather-demo';
const secretName = 'gather-planted';
/** Random, so a match can only come from this test's Secret. */
const secretValue = `planted-${randomBytes(12).toString('hex')}`;
const secretValueB64 = Buffer.from(secretValue).toString('base64');

/** Every file of a tar.gz: path → content. Fails when the archive does not exist. */
async function readArchive(file: string): Promise<Map<string, string>> {
  await stat(file); // ENOENT fails the test
  const files = new Map<string, string>();
  await tar.t({
    file,
    onReadEntry: (entry) => {
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () => {
        if (entry.type === 'File') files.set(entry.path, Buffer.concat(chunks).toString('utf8'));
      });
    },
  });
  return files;
}

/** Content of the first file whose path ends with `suffix` (paths start with the bundle's top directory). */
function fileEndingWith(files: Map<string, string>, suffix: string): string | undefined {
  return [...files.entries()].find(([p]) => p.endsWith(suffix))?.[1];
}

function expectNoSecrets(files: Map<string, string>): void {
  expect(files.size).toBeGreaterThan(5);
  for (const [file, content] of files) {
    expect(content, file).not.toContain(secretValue);
    expect(content, file).not.toContain(secretValueB64);
    expect(content, file).not.toMatch(/BEGIN (RSA |EC )?PRIVATE KEY/);
  }
  for (const file of files.keys()) expect(file).not.toMatch(/\/(pki|etcd|auth)\//);
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

describe('gather with the real control plane', () => {
  let dir: string;
  let controlPlane: LocalControlPlane;
  const abort = new AbortController();

  beforeAll(async () => {
    dir = await runTempDir('gather-it');
    controlPlane = await prepareLocalControlPlane({ dir, detached: false, sink: new RecordingSink(), signal: abort.signal });
    await controlPlane.start();
    const kube = controlPlane.kube;
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    await kube.apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: secretName, namespace }, type: 'Opaque', data: { password: secretValueB64 } });
    // Its infrastructure never appears: the controller reports that in the Cluster's conditions.
    await kube.apply({
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name: clusterName, namespace },
      spec: { infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevCluster', name: clusterName } },
    });
    // The CAPI controller reconciles it: gather must show the status it wrote.
    await until('the Cluster to have conditions', async () => {
      const cluster = await kube.get<KubeObject & { status?: { conditions?: unknown[] } }>({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: clusterName, namespace } });
      return (cluster?.status?.conditions?.length ?? 0) > 0 ? cluster : undefined;
    });
    // A controller that leaked the value into its log: the redactor knows it from the Secret.
    await appendFile(path.join(dir, 'logs', 'capi-manager.log'), `I0101 test line: leaked ${secretValue}\n`);
  });

  afterAll(async () => {
    await controlPlane?.stop();
    abort.abort();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('gathers CAPI objects with status, Secret names without data, and no private key', async () => {
    const sink = new RecordingSink();
    const result = await gatherBundle({ dir, client: controlPlane.kube, events: sink });
    expect(result.problems).toEqual([]);
    expect(result.objects).toBeGreaterThanOrEqual(1);
    expect((await stat(result.path)).mode & 0o777).toBe(0o600);

    const files = await readArchive(result.path);
    const clusters = fileEndingWith(files, '/resources/cluster.x-k8s.io/clusters.yaml');
    expect(clusters).toBeDefined();
    expect(clusters).toContain(`name: ${clusterName}`);
    expect(clusters).toMatch(/\nstatus:\n(.*\n)*\s+conditions:\n/);
    expect(fileEndingWith(files, '/resources/status.txt')).toContain(`Cluster ${namespace}/${clusterName}`);
    expect(fileEndingWith(files, '/resources/secrets.txt')).toMatch(new RegExp(`${namespace}\\s+${secretName}\\s+Opaque\\s+password`));
    // The provider inventory and Events come along too.
    expect([...files.keys()].some((p) => p.includes('/resources/clusterctl.cluster.x-k8s.io/providers.yaml'))).toBe(true);
    expect(fileEndingWith(files, '/resources/events.txt')).toBeDefined();
    for (const name of ['etcd', 'kube-apiserver', 'capi-manager']) expect(fileEndingWith(files, `/logs/${name}.log`), name).toBeTruthy();
    expect(fileEndingWith(files, '/logs/capi-manager.log')).toContain('I0101 test line: leaked [REDACTED]');
    const processes = JSON.parse(fileEndingWith(files, '/processes.json') ?? '[]') as { name: string; running: boolean }[];
    expect(processes.find((p) => p.name === 'kube-apiserver')?.running).toBe(true);
    expectNoSecrets(files);
  });

  it('the service reads a running control plane as it is', async () => {
    const result = await gatherBootstrap({ dir, output: path.join(dir, 'running.tar.gz'), sink: new RecordingSink(), signal: abort.signal });
    expect(result.objectSource).toBe('running');
    const files = await readArchive(result.path);
    expect(fileEndingWith(files, '/resources/cluster.x-k8s.io/clusters.yaml')).toContain(`name: ${clusterName}`);
    expectNoSecrets(files);
  });

  it('the service starts etcd and the API server of a stopped control plane for the gather, no controller, and stops them after', async () => {
    await controlPlane.stop();
    expect((await controlPlaneStatus(dir)).processes.filter((p) => p.running)).toEqual([]);
    const controllerLogs = await controllerLogSizes(dir);
    // One log per manager that ran (every bundled binary's), so the comparison below can see any of them grow.
    expect(Object.keys(controllerLogs)).toHaveLength((await expectedProcessCount()) - 2);

    const sink = new RecordingSink();
    const result = await gatherBootstrap({ dir, output: path.join(dir, 'started.tar.gz'), sink, signal: abort.signal });
    expect(result.objectSource).toBe('started');
    // Diagnostics change nothing: no controller was started to reconcile what was read, and none wrote a line.
    expect(startedProcesses(sink)).toEqual(['etcd', 'kube-apiserver']);
    expect(await controllerLogSizes(dir)).toEqual(controllerLogs);
    const files = await readArchive(result.path);
    expect(fileEndingWith(files, '/resources/cluster.x-k8s.io/clusters.yaml')).toContain(`name: ${clusterName}`);
    expect(fileEndingWith(files, '/README.txt')).toContain('started for this gather');
    expectNoSecrets(files);
    // Stopped again, and the lock released.
    expect((await controlPlaneStatus(dir)).processes.filter((p) => p.running)).toEqual([]);
    await expect(stat(path.join(dir, '.provisioner.lock'))).rejects.toThrow();
  });

  it('destroy bootstrap reads the Clusters with etcd and the API server only, and refuses while one is managed', async () => {
    expect((await controlPlaneStatus(dir)).processes.filter((p) => p.running)).toEqual([]);
    const controllerLogs = await controllerLogSizes(dir);
    const sink = new RecordingSink();
    await expect(destroyBootstrap({ dir, sink, signal: abort.signal })).rejects.toThrow(`still manages ${namespace}/${clusterName}`);
    expect(startedProcesses(sink)).toEqual(['etcd', 'kube-apiserver']);
    expect(await controllerLogSizes(dir)).toEqual(controllerLogs);
    expect((await controlPlaneStatus(dir)).processes.filter((p) => p.running)).toEqual([]);
  });
});

/** Names of the processes a command started, from its `process` events. */
function startedProcesses(sink: RecordingSink): string[] {
  return [...new Set(sink.ofType('process').filter((e) => e.state === 'starting').map((e) => e.name))].sort();
}

/** Size of each controller's log (every log but etcd's and the API server's): a controller that ran writes to it. */
async function controllerLogSizes(dir: string): Promise<Record<string, number>> {
  const sizes: Record<string, number> = {};
  for (const file of await readdir(path.join(dir, 'logs'))) {
    if (!file.endsWith('.log') || file === 'etcd.log' || file === 'kube-apiserver.log') continue;
    sizes[file] = (await stat(path.join(dir, 'logs', file))).size;
  }
  return sizes;
}
