import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { createManifests } from './create-manifests.js';

const config = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-manifests-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('createManifests', () => {
  it('writes cluster-api/, reports a summary result and passes install-config warnings on', async () => {
    await writeFile(path.join(dir, 'install-config.yaml'), config);
    const sink = new RecordingSink();
    const result = await createManifests({ dir, regenerate: [], keepEdits: false, sink });
    expect((await readdir(path.join(dir, 'cluster-api'))).length).toBe(8);
    expect(result.counts.create).toBe(8);
    expect(sink.ofType('result')[0]?.text).toBe(`Manifests in ${path.join(dir, 'cluster-api')}: 8 files (8 created)`);
    expect(sink.ofType('log').filter((e) => e.level === 'warn').map((e) => e.message)).toEqual([expect.stringContaining('machinePools[0].quantity: one control-plane machine')]);
  });

  it('says which edit it kept', async () => {
    await writeFile(path.join(dir, 'install-config.yaml'), config);
    await createManifests({ dir, regenerate: [], keepEdits: false, sink: new RecordingSink() });
    const cluster = path.join(dir, 'cluster-api/01_cluster.yaml');
    await writeFile(cluster, (await readFile(cluster, 'utf8')) + '# note\n');
    const sink = new RecordingSink();
    await createManifests({ dir, regenerate: [], keepEdits: false, sink });
    expect(sink.ofType('log').map((e) => e.message)).toContain('kept your edit of cluster-api/01_cluster.yaml (the install config still generates the version you edited)');
    expect(sink.ofType('result')[0]?.text).toMatch(/7 unchanged, 1 edits kept/);
  });

  it('fails with the config error when there is no install config', async () => {
    const error = await createManifests({ dir, regenerate: [], keepEdits: false, sink: new RecordingSink() }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).hint).toMatch(/create install-config/);
    expect(await readdir(dir)).toEqual([]);
  });
});
