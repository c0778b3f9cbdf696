/**
 * `create cluster --register-rancher` end to end, as a user runs it (`node bin/provisioner.js`,
 * real bundled binaries, the in-memory platform, 1 control-plane machine): after hand-off the
 * `register-rancher` stage imports the cluster into "Rancher" — a plain control plane booted
 * here with our Rancher CRDs, whose server side is the test double
 * test/support/rancher-double.ts — creating the agent objects in the in-memory workload API;
 * then `destroy cluster` removes Rancher's cluster by its labels before the cluster itself.
 * Fails (never skips) without the bundle.
 */
import { access, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { RecordingSink } from '../../src/events.js';
import { installCrds, loadCrds } from '../../src/handoff/crds.js';
import { KubeClient, type KubeObject } from '../../src/kube/client.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { killRecorded } from '../integration/support/controlplane.js';
import { RancherDouble } from '../support/rancher-double.js';
import { cli, ensureBuilt, kubectl, readJournal } from './support/cli.js';
import { runTempDir } from '../support/run-dirs.js';

const management = 'management.cattle.io/v3';
const createTimeoutMs = 900_000;

describe('create cluster --register-rancher, then destroy cluster', () => {
  const abort = new AbortController();
  let base = '';
  let dir = '';
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
    if (dir) await cli(['destroy', 'cluster', '--dir', dir], 300_000).catch(() => undefined);
    await killRecorded(dir).catch(() => undefined);
    workload?.close();
    await double?.stop();
    await rancherPlane?.stop().catch(() => undefined);
    abort.abort();
    if (base) await rm(base, { recursive: true, force: true });
  });

  it('imports the new cluster into Rancher as its last stage, and destroy removes Rancher\'s cluster first', async () => {
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'ranch', '--control-plane-replicas', '1', '--workers', '0'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);
    const create = await cli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '5', '--register-rancher', rancherPlane!.kubeconfig], createTimeoutMs);
    expect(create.exitCode, create.stderr.slice(-3000)).toBe(0);
    const journal = await readJournal(dir);
    expect(journal.stages['hand-off']?.state).toBe('succeeded');
    expect(journal.stages['register-rancher']?.state).toBe('succeeded');
    expect(create.stderr).toMatch(/rancher\/manifest/);

    const selector = 'cluster-api.cattle.io/capi-cluster-owner=ranch,cluster-api.cattle.io/capi-cluster-owner-ns=ranch';
    const [cluster, ...others] = await rancherPlane!.kube.list<KubeObject & { spec: { displayName: string }; status: { conditions: { type: string; status: string }[] } }>(management, 'Cluster', { labelSelector: selector });
    expect(others).toEqual([]);
    expect(cluster!.metadata.name).toMatch(/^c-[a-z0-9]{5}$/);
    expect(cluster!.spec.displayName).toBe('ranch');
    expect(cluster!.status.conditions).toContainEqual({ type: 'Ready', status: 'True' });
    // The agent's objects are in the in-memory workload API.
    expect(await workload!.get({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `cattle-credentials-${cluster!.metadata.name}`, namespace: 'cattle-system' } })).toBeDefined();

    const destroy = await cli(['destroy', 'cluster', '--dir', dir], 300_000);
    expect(destroy.exitCode, destroy.stderr.slice(-3000)).toBe(0);
    const lines = destroy.stderr.split('\n');
    const rancherGone = lines.findIndex((l) => l.includes(`Deleted management.cattle.io/v3 Cluster ${cluster!.metadata.name}`));
    const capiDeleted = lines.findIndex((l) => l.includes('Deleting Cluster ranch/ranch'));
    expect(rancherGone, destroy.stderr).toBeGreaterThanOrEqual(0);
    expect(capiDeleted).toBeGreaterThan(rancherGone);
    expect(await rancherPlane!.kube.list(management, 'Cluster', { labelSelector: selector })).toEqual([]);
  });
});
