/**
 * `destroy cluster` of a self-managed cluster (`--pivot-to self`) that also manages another
 * install's cluster (made with `--management-kubeconfig` its kubeconfig) is refused before
 * anything changes, naming that Cluster, the install config it came from and the command that
 * removes it. One REAL local control plane booted from the bundle stands in as the cluster (its
 * admin kubeconfig is `D/auth/kubeconfig`, recorded as the install's management cluster, as the
 * self pivot leaves it), holding the install's own Cluster and another install's. Without the
 * refusal, destroy would go on to move both back into a temporary local control plane (which
 * needs a listen address this install lacks, a different failure) and delete only its own.
 * The e2e (hosts-pivot-self.test.ts) runs the same refusal against a real self-managed cluster.
 * Fails (never skips) when the bundle has not been built: run `npm run bundle` first.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capiCoreApiVersion } from '../../src/capi.js';
import { installConfigOwner, ownershipMetadata } from '../../src/config/index.js';
import { controlPlaneLayout } from '../../src/controlplane/layout.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { packageRoot } from '../../src/embedded/catalog.js';
import { ExitCode } from '../../src/errors.js';
import { RecordingSink } from '../support/recording-sink.js';
import { externalManagementFile, recordExternalManagement } from '../../src/installdir/management.js';
import type { KubeObject } from '../../src/kube/client.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { allControllers } from '../../src/platforms/index.js';
import { removeInstallDir } from './support/controlplane.js';
import { runTempDir } from '../support/run-dirs.js';

/** The CLI from its sources (no build step). */
const cli = (args: string[]) => execa(process.execPath, ['--import', 'tsx', path.join(packageRoot, 'src', 'main.ts'), ...args], { cwd: packageRoot, reject: false, timeout: 300_000 });

describe('destroy cluster of a self-managed cluster that manages another install\'s cluster', () => {
  let cluster: LocalControlPlane;
  let clusterDir: string;
  let dir: string;
  const abort = new AbortController();
  // Cluster API's core provider: the Cluster kind and its webhooks.
  const controllers = allControllers().filter((c) => c.binary === 'capi-manager');

  /** A Cluster as `create cluster` of install config `owner` makes it (in its namespace, with its desired-set label), paused: nothing reconciles it here. */
  const clusterOf = async (owner: string): Promise<KubeObject> => {
    await cluster.kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: owner } });
    const { labels, annotations } = ownershipMetadata(installConfigOwner({ metadata: { name: owner, namespace: owner } }));
    return cluster.kube.apply({ apiVersion: capiCoreApiVersion, kind: 'Cluster', metadata: { name: owner, namespace: owner, labels, annotations }, spec: { paused: true, infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DevCluster', name: owner } } });
  };

  beforeAll(async () => {
    clusterDir = await runTempDir('destroy-self-cluster');
    cluster = await prepareLocalControlPlane({ dir: clusterDir, detached: false, sink: new RecordingSink(), signal: abort.signal, controllers });
    await cluster.start();
    dir = await runTempDir('destroy-self');
    // An in-memory install whose cluster manages itself: its kubeconfig is D/auth/kubeconfig, recorded as its management cluster.
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'first', '--platform', 'inmemory']);
    expect(config.exitCode, config.stderr).toBe(0);
    await mkdir(path.join(dir, 'auth'), { recursive: true });
    await copyFile(cluster.kubeconfig, path.join(dir, 'auth', 'kubeconfig'));
    await recordExternalManagement(dir, path.join(dir, 'auth', 'kubeconfig'));
  }, 600_000);

  afterAll(async () => {
    await cluster?.stop();
    abort.abort();
    for (const d of [dir, clusterDir]) if (d) await removeInstallDir(d);
  });

  it('is refused (exit 4) naming the other Cluster, its install config and `destroy cluster --dir`; nothing changes', async () => {
    const own = await clusterOf('first');
    const other = await clusterOf('second');

    const run = await cli(['destroy', 'cluster', '--dir', dir]);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(ExitCode.environment);
    expect(run.stderr).toContain('Cluster second/second (install config second)');
    expect(run.stderr).not.toContain('Cluster first/first');
    expect(run.stderr).toContain('provisioner destroy cluster --dir <its install directory>');
    // Refused before anything changed: no stage ran, both Clusters are there undeleted, no temporary control plane, the record kept.
    expect(run.stderr).not.toMatch(/stage destroy:/);
    for (const c of [own, other]) {
      const live = await cluster.kube.get<KubeObject>({ apiVersion: capiCoreApiVersion, kind: 'Cluster', metadata: { name: c.metadata.name, namespace: c.metadata.namespace! } });
      expect(live?.metadata.uid, `${c.metadata.namespace}/${c.metadata.name}`).toBe(c.metadata.uid);
      expect(live?.metadata.deletionTimestamp, `${c.metadata.namespace}/${c.metadata.name}`).toBeUndefined();
    }
    expect(existsSync(controlPlaneLayout(dir).stateDir), 'a temporary local control plane').toBe(false);
    expect(existsSync(externalManagementFile(dir)), 'the management record').toBe(true);
  }, 300_000);
});
