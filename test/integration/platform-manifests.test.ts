/**
 * `create manifests` output of every platform, validated as `create cluster`'s preflight
 * validates it: a server-side dry-run against the real CRDs and webhooks of every bundled
 * provider (one control plane as `management start` runs it, each provider's controller
 * serving its webhooks). The inputs are the reviewed golden install configs
 * (test/fixtures/golden/<platform>/*.install-config.yaml), so a field a provider's API
 * refuses fails here; the `topology` golden configs put the ClusterClass layout
 * (manifests.layout: topology) of every platform through the same dry-run. Beyond the
 * dry-run, each platform's ClusterClass and templates are applied for real and
 * reconciled by the core manager, and the Cluster is then dry-run against that class:
 * Cluster API's webhook checks a topology against its class only when the class exists.
 * And `Cluster.spec.topology` is no longer refused for want of the ClusterTopology gate,
 * which the core, kubeadm control-plane and in-memory managers now run with.
 * Fails (never skips) when the bundle is missing: loadCatalog throws with the hint.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installConfigOwner, validateInstallConfigText } from '../../src/config/index.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { RecordingSink } from '../support/recording-sink.js';
import type { KubeObject } from '../../src/kube/client.js';
import { generateManifests } from '../../src/platforms/generate.js';
import { installConfigSchema, platformFor, platforms, prunableKinds } from '../../src/platforms/registry.js';
import { applyObjects, dryRunObjects } from '../../src/apply/objects.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { removeInstallDir, tempInstallDir, waitFor } from './support/controlplane.js';

const goldenRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../fixtures/golden');

describe('generated manifests of every platform against the real CRDs and webhooks', () => {
  let dir = '';
  const sink = new RecordingSink();
  const abort = new AbortController();
  let cp: LocalControlPlane | undefined;

  beforeAll(async () => {
    dir = await tempInstallDir('platform-manifests');
    cp = await prepareLocalControlPlane({ dir, detached: false, sink, signal: abort.signal });
    await cp.start();
  });

  afterAll(async () => {
    await cp?.stop().catch(() => undefined);
    abort.abort();
    await removeInstallDir(dir);
  });

  for (const platform of platforms) {
    it(`${platform.name}: every golden install config's manifests pass the server-side dry-run`, async () => {
      const configs = (await readdir(path.join(goldenRoot, platform.name))).filter((f) => f.endsWith('.install-config.yaml'));
      expect(configs.length).toBeGreaterThan(0);
      for (const file of configs) {
        const config = validateInstallConfigText(await readFile(path.join(goldenRoot, platform.name, file), 'utf8'), { schema: installConfigSchema }).config;
        const objects = generateManifests(config).manifests.map((m) => m.object as unknown as KubeObject);
        const { problems } = await dryRunObjects(cp!.kube, objects, { owner: installConfigOwner(config), sink, signal: abort.signal, prunableKinds: prunableKinds(platformFor(config)) });
        expect(problems, `${platform.name}/${file}`).toEqual([]);
      }
    });
  }

  for (const platform of platforms) {
    it(`${platform.name}: the ClusterClass layout's class, applied and reconciled, validates its Cluster's topology`, async () => {
      const text = await readFile(path.join(goldenRoot, platform.name, 'topology.install-config.yaml'), 'utf8');
      // Its own name and namespace: these objects are really created, and must not meet the dry-runs above.
      const config = validateInstallConfigText(text.replace(/^metadata:\n( {2}.*\n)+/m, `metadata:\n  name: class-${platform.name}\n`), { schema: installConfigSchema }).config;
      expect(config.manifests.layout).toBe('topology');
      const objects = generateManifests(config).manifests.map((m) => m.object as unknown as KubeObject & { spec?: Record<string, unknown> });
      const request = { owner: installConfigOwner(config), sink, signal: abort.signal, prunableKinds: prunableKinds(platformFor(config)) };
      const cluster = objects.find((o) => o.kind === 'Cluster')!;
      await applyObjects(cp!.kube, objects.filter((o) => o !== cluster), request);

      const clusterClass = objects.find((o) => o.kind === 'ClusterClass')!;
      await waitFor(
        `ClusterClass ${clusterClass.metadata.name} reconciled`,
        async () => {
          const live = await cp!.kube.get<KubeObject & { status?: { observedGeneration?: number; conditions?: { type: string; status: string }[] } }>(clusterClass);
          const reconciled = live?.status?.observedGeneration === live?.metadata.generation && live?.status?.conditions?.some((c) => c.type === 'VariablesReady' && c.status === 'True');
          return reconciled ? live : undefined;
        },
        60_000,
      );
      const { problems } = await dryRunObjects(cp!.kube, [cluster], request);
      expect(problems, `${platform.name} Cluster`).toEqual([]);

      // The class is what judged it: a machineDeployment of a class it does not define is refused.
      const wrongClass = structuredClone(cluster) as typeof cluster & { spec: { topology: { workers: { machineDeployments: { class: string }[] } } } };
      wrongClass.spec.topology.workers.machineDeployments[0]!.class = 'no-such-class';
      const refused = await dryRunObjects(cp!.kube, [wrongClass], request);
      expect(JSON.stringify(refused.problems), `${platform.name} Cluster with an unknown class`).toMatch(/no-such-class/);
    });
  }

  it('refuses to change the layout of an existing Cluster at the dry-run: Cluster API will not remove spec.topology', async () => {
    const text = await readFile(path.join(goldenRoot, 'inmemory', 'topology.install-config.yaml'), 'utf8');
    const renamed = text.replace(/^metadata:\n( {2}.*\n)+/m, 'metadata:\n  name: layout-change\n');
    const topology = validateInstallConfigText(renamed, { schema: installConfigSchema }).config;
    const request = { owner: installConfigOwner(topology), sink, signal: abort.signal, prunableKinds: prunableKinds(platformFor(topology)) };
    await applyObjects(cp!.kube, generateManifests(topology).manifests.map((m) => m.object as unknown as KubeObject), request);

    const classic = validateInstallConfigText(renamed.replace('layout: topology', 'layout: classic'), { schema: installConfigSchema }).config;
    const { problems } = await dryRunObjects(cp!.kube, generateManifests(classic).manifests.map((m) => m.object as unknown as KubeObject), request);
    const clusterProblems = problems.filter((p) => p.path.includes('/Cluster/'));
    expect(JSON.stringify(clusterProblems)).toMatch(/topology.*cannot be removed/);
  });

  it('accepts a Cluster with spec.topology (the ClusterTopology gate is on)', async () => {
    const config = validateInstallConfigText(await readFile(path.join(goldenRoot, 'inmemory', 'default.install-config.yaml'), 'utf8'), { schema: installConfigSchema }).config;
    const objects = generateManifests(config).manifests.map((m) => m.object as unknown as KubeObject & { spec?: Record<string, unknown> });
    const cluster = objects.find((o) => o.kind === 'Cluster')!;
    cluster.spec = {
      clusterNetwork: cluster.spec!.clusterNetwork,
      topology: { classRef: { name: 'quick-start' }, version: config.kubernetesVersion, controlPlane: { replicas: 1 } },
    };
    const { problems } = await dryRunObjects(cp!.kube, [objects.find((o) => o.kind === 'Namespace')!, cluster], { owner: installConfigOwner(config), sink, signal: abort.signal, prunableKinds: [] });
    expect(JSON.stringify(problems)).not.toMatch(/ClusterTopology feature flag/);
  });
});
