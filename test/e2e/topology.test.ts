/**
 * The ClusterClass layout end to end on the in-memory platform (1 + 1, to stay short):
 * `manifests.layout: topology` in the install config, `create cluster` as a user runs it.
 * The manifests hold a ClusterClass and its templates and no control plane or
 * MachineDeployment of their own: Cluster API's topology controller creates the
 * KubeadmControlPlane and the MachineDeployment from the class, under the classic names,
 * the in-memory provider brings the machines up, and the workload API lists both nodes
 * Ready. `destroy cluster` then removes the cluster, its class and templates, and leaves
 * nothing running.
 *
 * Fails (never skips) without the bundle: the CLI exits 4 and the kubectl lookup throws.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aliveRecorded, killRecorded } from '../integration/support/controlplane.js';
import { cli, editInstallConfig, ensureBuilt, getNodes, kubectl, processesMentioning, readJournal } from './support/cli.js';
import { step } from './support/steps.js';
import { runTempDir } from '../support/run-dirs.js';

/** Longest `create cluster` of 1 + 1 may take on a loaded 2-core machine. */
const createTimeoutMs = 900_000;
const destroyTimeoutMs = 300_000;

interface StateObject {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
}

let dir = '';
let created = false;

beforeAll(async () => {
  await ensureBuilt();
  dir = await runTempDir('e2e-topology');
});

afterAll(async () => {
  if (!dir) return;
  if (created) await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs).catch(() => undefined);
  await killRecorded(dir).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

describe('create cluster with manifests.layout: topology (in-memory, 1 + 1)', () => {
  /** The create both tests stand on (the destroy test runs it too when run alone). */
  const createCluster = step(async () => {
    await kubectl(); // throws with the bundle hint when the bundle is missing
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'topo', '--control-plane-replicas', '1', '--workers', '1'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);
    await editInstallConfig(dir, (doc) => {
      doc.manifests = { layout: 'topology' };
    });

    const run = await cli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '5'], createTimeoutMs);
    process.stderr.write(`e2e topology: create cluster took ${Math.round(run.durationMs / 1000)} s\n`);
    expect(run.exitCode, run.stderr.slice(-4000)).toBe(0);
    created = true;
  });

  it('exits 0: the topology controller made the control plane and the MachineDeployment from the ClusterClass, and both nodes are Ready', async () => {
    await createCluster();

    const files = await readdir(path.join(dir, 'cluster-api'));
    expect(files).toEqual(expect.arrayContaining(['01_cluster.yaml', '02_infrastructure-cluster-template.yaml', '04_control-plane-template.yaml', '05_cluster-class.yaml']));
    expect(files).not.toContain('04_control-plane.yaml');
    expect(files.some((f) => f.endsWith('machine-deployment.yaml'))).toBe(false);

    // The hand-off's record: the class, and the objects the topology controller owns, under the classic names.
    const state = parseAllDocuments(await readFile(path.join(dir, '.provisioner', 'cluster-state.yaml'), 'utf8')).map((d) => d.toJS() as StateObject);
    const named = (kind: string) => state.filter((o) => o.kind === kind);
    expect(named('ClusterClass').map((o) => o.metadata.name)).toEqual(['topo']);
    const owned = (o: StateObject) => o.metadata.labels?.['topology.cluster.x-k8s.io/owned'] !== undefined;
    expect(named('KubeadmControlPlane').map((o) => [o.metadata.name, owned(o)])).toEqual([['topo-control-plane', true]]);
    expect(named('MachineDeployment').map((o) => [o.metadata.name, owned(o)])).toEqual([['topo-worker', true]]);
    expect(named('Machine')).toHaveLength(2);

    const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig'));
    expect(nodes).toHaveLength(2);
    expect(nodes.filter((n) => !n.ready).map((n) => n.name)).toEqual([]);
    const journal = await readJournal(dir);
    expect(Object.entries(journal.stages).filter(([, r]) => r.state !== 'succeeded')).toEqual([]);
  });

  it('destroy cluster exits 0, deletes the ClusterClass with the cluster, and leaves nothing running', async () => {
    await createCluster();
    expect(created, 'create cluster did not succeed').toBe(true);
    const run = await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toContain('Every Cluster API object of topo/topo is gone');
    expect(run.stderr).toContain('Deleted ClusterClass topo/topo and its templates');
    created = false;
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });
});
