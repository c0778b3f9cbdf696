import { describe, expect, it } from 'vitest';
import { diffLines, unifiedDiff } from './line-diff.js';
import { diffObjects, objectKey } from './object-diff.js';

describe('unifiedDiff', () => {
  it('is empty for equal texts', () => {
    expect(unifiedDiff('a\nb\n', 'a\nb\n', { before: 'x', after: 'y' })).toBe('');
  });

  it('shows changed lines with context and hunk headers', () => {
    const before = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join('\n') + '\n';
    const after = before.replace('e\n', 'E\n');
    expect(unifiedDiff(before, after, { before: 'disk', after: 'generated' })).toBe(
      ['--- disk', '+++ generated', '@@ -2,7 +2,7 @@', ' b', ' c', ' d', '-e', '+E', ' f', ' g', ' h', ''].join('\n'),
    );
  });

  it('splits distant changes into separate hunks', () => {
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i}`);
    const changed = [...lines];
    changed[2] = 'two';
    changed[25] = 'twenty-five';
    const diff = unifiedDiff(lines.join('\n'), changed.join('\n'), { before: 'a', after: 'b' });
    expect(diff.match(/^@@/gm)).toHaveLength(2);
  });

  it('turns one text into the other', () => {
    const a = ['x', 'a', 'b', 'c', 'y'];
    const b = ['a', 'q', 'c', 'z', 'y'];
    const script = diffLines(a, b);
    expect(script.filter((l) => l.op !== '+').map((l) => l.text)).toEqual(a);
    expect(script.filter((l) => l.op !== '-').map((l) => l.text)).toEqual(b);
  });
});

describe('diffObjects', () => {
  const obj = (kind: string, name: string, spec: Record<string, unknown> = {}) => ({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind, metadata: { name, namespace: 'demo' }, spec });

  it('matches objects by identity and classifies each', () => {
    const changes = diffObjects(
      [{ object: obj('Cluster', 'demo', { paused: false }), file: 'c/01.yaml' }, { object: obj('MachineDeployment', 'old'), file: 'c/10.yaml' }],
      [{ object: obj('Cluster', 'demo', { paused: true }), file: 'c/01.yaml' }, { object: obj('MachineSet', 'new'), file: 'c/20.yaml' }],
      { before: 'on disk', after: 'generated' },
    );
    expect(changes.map((c) => [c.kind, c.key])).toEqual([
      ['changed', 'cluster.x-k8s.io/Cluster demo/demo'],
      ['removed', 'cluster.x-k8s.io/MachineDeployment demo/old'],
      ['added', 'cluster.x-k8s.io/MachineSet demo/new'],
    ]);
    expect(changes[0]?.diff).toContain('-  paused: false\n+  paused: true');
    expect(changes[0]?.diff).toContain('--- c/01.yaml (on disk)');
  });

  it('pairs a renamed object in the same file as replaced, with the diff between them', () => {
    const changes = diffObjects([{ object: obj('DevMachineTemplate', 'demo-worker-aaaa', { v: 1 }), file: 'f.yaml' }], [{ object: obj('DevMachineTemplate', 'demo-worker-bbbb', { v: 2 }), file: 'f.yaml' }], { before: 'a', after: 'b' });
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ kind: 'replaced', replacedKey: 'cluster.x-k8s.io/DevMachineTemplate demo/demo-worker-aaaa' });
    expect(changes[0]?.diff).toContain('+  name: demo-worker-bbbb');
  });

  it('keys core objects under the core group and cluster-scoped ones without a namespace', () => {
    expect(objectKey({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } })).toBe('core/Namespace demo');
  });
});
