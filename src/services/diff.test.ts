import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LiveObjectSource } from '../assets/index.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { diffManifests } from './diff.js';
import { createManifests } from './manifests.js';

const config = (quantity: number) => `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: ${quantity}
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-diff-'));
  await writeFile(path.join(dir, 'install-config.yaml'), config(3));
  await createManifests({ dir, regenerate: [], keepEdits: false, sink: new RecordingSink() });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('diffManifests', () => {
  it('reports no difference right after create manifests, and says live objects were not compared', async () => {
    const sink = new RecordingSink();
    const result = await diffManifests({ dir, sink });
    expect(result.differs).toBe(false);
    expect(result.unchangedFiles).toBe(8);
    expect(result.live).toEqual({ compared: false, reason: 'no connection to a running control plane was given' });
    expect(sink.ofType('result')[0]?.text).toMatch(/No differences/);
  });

  it('shows an edit and an install-config change per object, and writes nothing', async () => {
    const cp = path.join(dir, 'cluster-api/04_control-plane.yaml');
    await writeFile(cp, (await readFile(cp, 'utf8')).replace('replicas: 3', 'replicas: 5'));
    await writeFile(path.join(dir, 'install-config.yaml'), config(1));
    const before = await readFile(cp, 'utf8');
    const sink = new RecordingSink();
    const result = await diffManifests({ dir, sink });
    expect(result.files.map((f) => [f.path, f.status])).toEqual([['cluster-api/04_control-plane.yaml', 'conflict']]);
    const change = result.files[0]?.changes[0];
    expect(change?.kind).toBe('changed');
    expect(change?.diff).toContain('-  replicas: 5\n+  replicas: 1');
    expect(sink.ofType('result')[0]?.text).toContain('*** changed: controlplane.cluster.x-k8s.io/KubeadmControlPlane demo/demo-control-plane');
    expect(await readFile(cp, 'utf8')).toBe(before);
  });

  it('compares live objects with the disk when given a live source', async () => {
    const live: LiveObjectSource = {
      description: 'test double',
      async listDesiredSet(owner, selector) {
        expect(owner.ownerName).toBe('demo');
        expect(selector).toMatch(/^objectset\.rio\.cattle\.io\/hash=[0-9a-f]{40}$/);
        return [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }];
      },
    };
    const result = await diffManifests({ dir, sink: new RecordingSink(), live });
    expect(result.live.compared).toBe(true);
    if (!result.live.compared) return;
    const kinds = result.live.changes.map((c) => c.kind);
    expect(kinds.filter((k) => k === 'added')).toHaveLength(7);
    expect(kinds.filter((k) => k === 'changed')).toHaveLength(1);
    expect(result.differs).toBe(true);
  });
});
