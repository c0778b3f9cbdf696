/**
 * Two things one in-memory cluster (1 + 1) shows, as a user runs `create cluster`
 * (`node bin/provisioner.js`, real bundled binaries):
 *
 * The ClusterClass layout: `manifests.layout: topology` in the install config. The manifests
 * hold a ClusterClass and its templates and no control plane or MachineDeployment of their
 * own: Cluster API's topology controller creates the KubeadmControlPlane and the
 * MachineDeployment from the class, under the classic names, the in-memory provider brings
 * the machines up, and the workload API lists both nodes Ready.
 *
 * `--register-rancher`: after hand-off the `register-rancher` stage imports the cluster into
 * "Rancher" — a plain control plane booted here with our Rancher CRDs, whose server side is
 * the test double test/support/rancher-double.ts — creating the agent objects in the
 * in-memory workload API.
 *
 * `destroy cluster` then removes Rancher's cluster by its labels before the cluster itself,
 * deletes the ClusterClass and its templates with the cluster, and leaves nothing running.
 * Fails (never skips) without the bundle: the CLI exits 4 and the kubectl lookup throws.
 */
import { access, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { RecordingSink } from '../support/recording-sink.js';
import { installCrds, loadCrds } from '../../src/handoff/crds.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { aliveRecorded, killRecorded } from '../integration/support/controlplane.js';
import { RancherDouble } from '../support/rancher-double.js';
import { cli, editInstallConfig, ensureBuilt, getNodes, kubectl, processesMentioning, readJournal } from './support/cli.js';
import { step } from './support/steps.js';
import { runTempDir } from '../support/run-dirs.js';

const management = 'management.cattle.io/v3';
/** Longest `create cluster` of 1 + 1 may take on a loaded 2-core machine. */
const createTimeoutMs = 900_000;
const destroyTimeoutMs = 300_000;
const selector = 'cluster-api.cattle.io/capi-cluster-owner=ranch,cluster-api.cattle.io/capi-cluster-owner-ns=ranch';

interface StateObject {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
}

type RancherCluster = KubeObject & { spec: { displayName: string }; status: { conditions: { type: string; status: string }[] } };

describe('create cluster --register-rancher with manifests.layout: topology (in-memory, 1 + 1), then destroy cluster', () => {
  const abort = new AbortController();
  let base = '';
  let dir = '';
  let created = false;
  let rancherPlane: LocalControlPlane | undefined;
  let double: RancherDouble | undefined;
  let workload: KubeClient | undefined;

  beforeAll(async () => {
    await ensureBuilt();
    await kubectl(); // throws with the bundle hint when the bundle is missing
    base = await runTempDir('e2e-rancher');
    dir = path.join(base, 'install');
    rancherPlane = await prepareLocalControlPlane({ dir: path.join(base, 'rancher'), detached: false, controllers: [], sink: new RecordingSink(), signal: abort.signal });
    await rancherPlane.start();
    await installCrds(rancherPlane.kube, await loadCrds('rancher.yaml'), { signal: abort.signal });
    // The workload cluster exists once hand-off wrote its kubeconfig: the double's agent looks there from then on.
    const kubeconfig = path.join(dir, 'auth', 'kubeconfig');
    let probing = false;
    double = await RancherDouble.start(rancherPlane.kube, () => {
      if (!workload && !probing) {
        probing = true;
        void access(kubeconfig).then(
          () => (workload = KubeClient.fromFile(kubeconfig)),
          () => undefined,
        ).finally(() => (probing = false));
      }
      return workload;
    });
  });

  afterAll(async () => {
    if (dir && created) await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs).catch(() => undefined);
    await killRecorded(dir).catch(() => undefined);
    workload?.close();
    await double?.stop();
    await rancherPlane?.stop().catch(() => undefined);
    abort.abort();
    if (base) await rm(base, { recursive: true, force: true });
  });

  /** The create every test stands on (each runs it when run alone). */
  const createCluster = step(async () => {
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'ranch', '--control-plane-replicas', '1', '--workers', '1'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);
    await editInstallConfig(dir, (doc) => {
      doc.manifests = { layout: 'topology' };
    });
    const create = await cli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '5', '--register-rancher', rancherPlane!.kubeconfig], createTimeoutMs);
    process.stderr.write(`e2e rancher + topology: create cluster took ${Math.round(create.durationMs / 1000)} s\n`);
    expect(create.exitCode, create.stderr.slice(-4000)).toBe(0);
    created = true;
    return create;
  });

  /** Rancher's one cluster for ours, found by its labels. */
  async function rancherCluster(): Promise<RancherCluster> {
    const [cluster, ...others] = await rancherPlane!.kube.list<RancherCluster>(management, 'Cluster', { labelSelector: selector });
    expect(others).toEqual([]);
    expect(cluster, `no ${management} Cluster labelled ${selector}`).toBeDefined();
    return cluster!;
  }

  it('the topology controller made the control plane and the MachineDeployment from the ClusterClass, and both nodes are Ready', async () => {
    await createCluster();

    const files = await readdir(path.join(dir, 'cluster-api'));
    expect(files).toEqual(expect.arrayContaining(['01_cluster.yaml', '02_infrastructure-cluster-template.yaml', '04_control-plane-template.yaml', '05_cluster-class.yaml']));
    expect(files).not.toContain('04_control-plane.yaml');
    expect(files.some((f) => f.endsWith('machine-deployment.yaml'))).toBe(false);

    // The hand-off's record: the class, and the objects the topology controller owns, under the classic names.
    const state = parseAllDocuments(await readFile(path.join(dir, '.provisioner', 'cluster-state.yaml'), 'utf8')).map((d) => d.toJS() as StateObject);
    const named = (kind: string) => state.filter((o) => o.kind === kind);
    expect(named('ClusterClass').map((o) => o.metadata.name)).toEqual(['ranch']);
    const owned = (o: StateObject) => o.metadata.labels?.['topology.cluster.x-k8s.io/owned'] !== undefined;
    expect(named('KubeadmControlPlane').map((o) => [o.metadata.name, owned(o)])).toEqual([['ranch-control-plane', true]]);
    expect(named('MachineDeployment').map((o) => [o.metadata.name, owned(o)])).toEqual([['ranch-worker', true]]);
    expect(named('Machine')).toHaveLength(2);

    const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig'));
    expect(nodes).toHaveLength(2);
    expect(nodes.filter((n) => !n.ready).map((n) => n.name)).toEqual([]);
    const journal = await readJournal(dir);
    expect(Object.entries(journal.stages).filter(([, r]) => r.state !== 'succeeded')).toEqual([]);
  });

  it('imports the new cluster into Rancher as its last stage: Rancher\'s cluster Ready, the agent\'s objects in the workload API', async () => {
    const create = await createCluster();
    const journal = await readJournal(dir);
    expect(journal.stages['hand-off']?.state).toBe('succeeded');
    expect(journal.stages['register-rancher']?.state).toBe('succeeded');
    expect(create.stderr).toMatch(/rancher\/manifest/);

    const cluster = await rancherCluster();
    expect(cluster.metadata.name).toMatch(/^c-[a-z0-9]{5}$/);
    expect(cluster.spec.displayName).toBe('ranch');
    expect(cluster.status.conditions).toContainEqual({ type: 'Ready', status: 'True' });
    // The agent's objects are in the in-memory workload API.
    expect(await workload!.get({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `cattle-credentials-${cluster.metadata.name}`, namespace: 'cattle-system' } })).toBeDefined();
  });

  it('destroy cluster removes Rancher\'s cluster first, deletes the ClusterClass with the cluster, exits 0 and leaves nothing running', async () => {
    await createCluster();
    expect(created, 'create cluster did not succeed').toBe(true);
    const cluster = await rancherCluster();

    const destroy = await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs);
    expect(destroy.exitCode, destroy.stderr.slice(-4000)).toBe(0);
    created = false;
    const lines = destroy.stderr.split('\n');
    const rancherGone = lines.findIndex((l) => l.includes(`Deleted management.cattle.io/v3 Cluster ${cluster.metadata.name}`));
    const capiDeleted = lines.findIndex((l) => l.includes('Deleting Cluster ranch/ranch'));
    expect(rancherGone, destroy.stderr).toBeGreaterThanOrEqual(0);
    expect(capiDeleted).toBeGreaterThan(rancherGone);
    expect(await rancherPlane!.kube.list(management, 'Cluster', { labelSelector: selector })).toEqual([]);
    expect(destroy.stderr).toContain('Every Cluster API object of ranch/ranch is gone');
    expect(destroy.stderr).toContain('Deleted ClusterClass ranch/ranch and its templates');
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });
});
