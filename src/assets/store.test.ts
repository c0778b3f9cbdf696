import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, EnvironmentError, InternalError, UsageError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import type { Asset } from './asset.js';
import { sha256 } from './files.js';
import { clusterApiManifestsAsset } from './manifests.js';
import { readState, statePath } from './state.js';
import { AssetStore, type StoreOptions } from './store.js';

const installConfig = (workers: { name: string; quantity: number }[], controlPlane = 3) => `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: ${controlPlane}
    roles: [etcd, controlPlane]
${workers.map((w) => `  - name: ${w.name}\n    quantity: ${w.quantity}\n    roles: [worker]\n`).join('')}`;

let dir: string;
const file = (relative: string) => path.join(dir, relative);

async function run(options: Partial<StoreOptions> = {}) {
  const store = await AssetStore.open({ dir, sink: new RecordingSink(), ...options });
  const value = await store.fetch(clusterApiManifestsAsset);
  const report = await store.commit();
  return { store, value, report };
}

async function snapshot(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(file('cluster-api'))).sort()) out[name] = await readFile(file(`cluster-api/${name}`), 'utf8');
  out['state'] = await readFile(statePath(dir), 'utf8');
  return out;
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-assets-'));
  await writeFile(file('install-config.yaml'), installConfig([{ name: 'worker', quantity: 2 }]));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('generation and the state file', () => {
  it('writes every manifest and records the hash of each', async () => {
    const { report } = await run();
    expect(report.written).toHaveLength(8);
    const state = await readState(dir);
    for (const written of report.written) {
      expect(state.files[written]).toEqual({ asset: 'cluster-api-manifests', sha256: sha256(await readFile(file(written), 'utf8')) });
    }
    expect((await stat(statePath(dir))).mode & 0o777).toBe(0o600);
  });

  it('writes nothing on a rerun with the same inputs', async () => {
    await run();
    const before = await stat(file('cluster-api/01_cluster.yaml'));
    const { report } = await run();
    expect(report.written).toEqual([]);
    expect(report.plan.every((p) => p.action === 'unchanged')).toBe(true);
    expect((await stat(file('cluster-api/01_cluster.yaml'))).mtimeMs).toBe(before.mtimeMs);
  });

  it('writes nothing at all when the install config is invalid', async () => {
    await writeFile(file('install-config.yaml'), installConfig([{ name: 'worker', quantity: 2 }], 2));
    await expect(run()).rejects.toBeInstanceOf(ConfigError);
    expect(await readdir(dir)).toEqual(['install-config.yaml']);
  });

  it('restores a generated file the user deleted', async () => {
    await run();
    await rm(file('cluster-api/01_cluster.yaml'));
    const { report } = await run();
    expect(report.plan.find((p) => p.path === 'cluster-api/01_cluster.yaml')?.action).toBe('restore');
    expect(await readFile(file('cluster-api/01_cluster.yaml'), 'utf8')).toContain('kind: Cluster');
  });

  it('refuses a corrupt state file with a way out', async () => {
    await run();
    await writeFile(statePath(dir), '{not json');
    const error = await run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toBe(`${statePath(dir)} is not valid JSON`);
    expect((error as EnvironmentError).details).toEqual([expect.stringMatching(/: line 1, column 2: /)]);
    expect((error as EnvironmentError).hint).toMatch(/move it aside/);
  });
});

describe('user edits', () => {
  const controlPlane = 'cluster-api/04_control-plane.yaml';

  it('keeps an edit when the install config still generates the same file, and loads the edited objects', async () => {
    await run();
    const edited = (await readFile(file(controlPlane), 'utf8')).replace('replicas: 3', 'replicas: 5');
    await writeFile(file(controlPlane), edited);
    const { report, value } = await run();
    expect(report.keptEdits).toEqual([controlPlane]);
    expect(await readFile(file(controlPlane), 'utf8')).toBe(edited);
    const loaded = value.files.find((f) => f.path === controlPlane);
    expect(loaded?.origin).toBe('edited');
    expect((loaded?.objects[0] as { spec: { replicas: number } }).spec.replicas).toBe(5);
  });

  it('keeps an edit while updating other files whose inputs changed', async () => {
    await run();
    await writeFile(file(controlPlane), (await readFile(file(controlPlane), 'utf8')) + '# my note\n');
    await writeFile(file('install-config.yaml'), installConfig([{ name: 'worker', quantity: 7 }]));
    const { report } = await run();
    expect(report.keptEdits).toEqual([controlPlane]);
    expect(report.written).toEqual(['cluster-api/10_pool-worker_3-machine-deployment.yaml']);
    expect(await readFile(file('cluster-api/10_pool-worker_3-machine-deployment.yaml'), 'utf8')).toContain('replicas: 7');
  });

  it('stops when a changed input would overwrite an edit, naming the file and both ways out, and writes nothing', async () => {
    await run();
    await writeFile(file(controlPlane), (await readFile(file(controlPlane), 'utf8')).replace('replicas: 3', 'replicas: 5'));
    await writeFile(file('install-config.yaml'), installConfig([{ name: 'worker', quantity: 7 }], 1));
    const before = await snapshot();
    const error = await run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.path)).toEqual([controlPlane]);
    expect(problems[0]?.hint).toBe(`take the new version with --regenerate ${controlPlane}, or keep yours with --keep-edits`);
    expect((error as ConfigError).message).toMatch(/nothing was written/);
    expect(await snapshot()).toEqual(before);
  });

  it('--keep-edits keeps the edit, and later runs keep it quietly', async () => {
    await run();
    const edited = (await readFile(file(controlPlane), 'utf8')).replace('replicas: 3', 'replicas: 5');
    await writeFile(file(controlPlane), edited);
    await writeFile(file('install-config.yaml'), installConfig([{ name: 'worker', quantity: 2 }], 1));
    const forced = await run({ keepEdits: true });
    expect(forced.report.plan.find((p) => p.path === controlPlane)?.action).toBe('keep-edit-forced');
    expect(await readFile(file(controlPlane), 'utf8')).toBe(edited);
    const again = await run();
    expect(again.report.plan.find((p) => p.path === controlPlane)?.action).toBe('keep-edit');
  });

  it('--regenerate takes the generated version, by path or by bare file name', async () => {
    for (const name of [controlPlane, '04_control-plane.yaml']) {
      await run();
      await writeFile(file(controlPlane), (await readFile(file(controlPlane), 'utf8')).replace('replicas: 3', 'replicas: 5'));
      const { report } = await run({ regenerate: [name] });
      expect(report.plan.find((p) => p.path === controlPlane)?.action).toBe('regenerate');
      expect(await readFile(file(controlPlane), 'utf8')).toContain('replicas: 3');
    }
  });

  it('--regenerate of a file that is not generated is a usage error, before any write', async () => {
    await run();
    await writeFile(file('install-config.yaml'), installConfig([{ name: 'worker', quantity: 9 }]));
    const before = await snapshot();
    await expect(run({ regenerate: ['cluster-api/99_nope.yaml'] })).rejects.toBeInstanceOf(UsageError);
    expect(await snapshot()).toEqual(before);
  });

  it('leaves files the user added alone and includes them in the value', async () => {
    await run();
    await writeFile(file('cluster-api/50_extra.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: demo}\n');
    const { report, value } = await run();
    expect(report.userFiles).toEqual(['cluster-api/50_extra.yaml']);
    expect(value.files.find((f) => f.path === 'cluster-api/50_extra.yaml')).toMatchObject({ origin: 'user', objects: [{ kind: 'ConfigMap' }] });
    expect((await readState(dir)).files['cluster-api/50_extra.yaml']).toBeUndefined();
  });

  it('reports an edited file that is no longer YAML by its path', async () => {
    await run();
    await writeFile(file(controlPlane), 'spec: [unclosed\n');
    const error = await run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]?.path).toBe(controlPlane);
  });
});

describe('removing a machine pool', () => {
  const twoPools = installConfig([
    { name: 'alpha', quantity: 1 },
    { name: 'beta', quantity: 2 },
  ]);
  const onePool = installConfig([{ name: 'alpha', quantity: 1 }]);
  const betaFiles = ['cluster-api/10_pool-beta_1-machine-template.yaml', 'cluster-api/10_pool-beta_2-bootstrap-template.yaml', 'cluster-api/10_pool-beta_3-machine-deployment.yaml'];

  it('deletes exactly that pool\'s files and leaves every other file as it was', async () => {
    await writeFile(file('install-config.yaml'), twoPools);
    await run();
    const before = await snapshot();
    await writeFile(file('install-config.yaml'), onePool);
    const { report } = await run();
    expect(report.deleted.sort()).toEqual(betaFiles);
    expect(report.written).toEqual([]);
    const after = await snapshot();
    for (const name of Object.keys(before)) {
      if (name === 'state' || betaFiles.includes(`cluster-api/${name}`)) continue;
      expect(after[name], name).toBe(before[name]);
    }
    expect(Object.keys(after).filter((n) => n.includes('beta'))).toEqual([]);
    expect(Object.keys((await readState(dir)).files).filter((n) => n.includes('beta'))).toEqual([]);
  });

  it('stops if a file of the removed pool was edited; --regenerate deletes it, --keep-edits keeps it as the user\'s', async () => {
    await writeFile(file('install-config.yaml'), twoPools);
    await run();
    const deployment = betaFiles[2]!;
    await writeFile(file(deployment), (await readFile(file(deployment), 'utf8')).replace('replicas: 2', 'replicas: 4'));
    await writeFile(file('install-config.yaml'), onePool);
    const error = await run().catch((e: unknown) => e);
    expect((error as ConfigError).problems.map((p) => p.path)).toEqual([deployment]);
    expect((error as ConfigError).problems[0]?.message).toMatch(/no longer generates it/);

    const kept = await run({ keepEdits: true });
    expect(kept.report.released).toEqual([deployment]);
    expect(await readFile(file(deployment), 'utf8')).toContain('replicas: 4');
    expect((await readState(dir)).files[deployment]).toBeUndefined();
    expect(kept.value.files.find((f) => f.path === deployment)?.origin).toBe('user');
  });

  it('--regenerate deletes an edited file of a removed pool', async () => {
    await writeFile(file('install-config.yaml'), twoPools);
    await run();
    const deployment = betaFiles[2]!;
    await writeFile(file(deployment), (await readFile(file(deployment), 'utf8')) + '# edited\n');
    await writeFile(file('install-config.yaml'), onePool);
    const { report } = await run({ regenerate: [deployment] });
    expect(report.deleted).toContain(deployment);
    await expect(stat(file(deployment))).rejects.toThrow();
  });
});

describe('the asset graph', () => {
  it('resolves dependencies once and detects cycles', async () => {
    let generations = 0;
    const leaf: Asset<number> = { name: 'leaf', dependencies: [], generate: async () => ({ value: ++generations, files: [] }) };
    const left: Asset<number> = { name: 'left', dependencies: [leaf], generate: async (p) => ({ value: p.get(leaf) + 10, files: [] }) };
    const right: Asset<number> = { name: 'right', dependencies: [leaf], generate: async (p) => ({ value: p.get(leaf) + 20, files: [] }) };
    const top: Asset<number> = { name: 'top', dependencies: [left, right], generate: async (p) => ({ value: p.get(left) + p.get(right), files: [] }) };
    const store = await AssetStore.open({ dir, sink: new RecordingSink() });
    expect(await store.fetch(top)).toBe(32);
    expect(generations).toBe(1);

    const a: { name: string; dependencies: Asset<unknown>[]; generate: Asset<number>['generate'] } = { name: 'a', dependencies: [], generate: async () => ({ value: 1, files: [] }) };
    const b: Asset<number> = { name: 'b', dependencies: [a], generate: async () => ({ value: 2, files: [] }) };
    a.dependencies.push(b);
    await expect((await AssetStore.open({ dir, sink: new RecordingSink() })).fetch(b)).rejects.toBeInstanceOf(InternalError);
  });

  it('refuses to let an asset read a value it did not declare', async () => {
    const hidden: Asset<number> = { name: 'hidden', dependencies: [], generate: async () => ({ value: 1, files: [] }) };
    const sneaky: Asset<number> = { name: 'sneaky', dependencies: [], generate: async (p) => ({ value: p.get(hidden), files: [] }) };
    await expect((await AssetStore.open({ dir, sink: new RecordingSink() })).fetch(sneaky)).rejects.toBeInstanceOf(InternalError);
  });
});
