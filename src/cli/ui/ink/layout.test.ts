import { describe, expect, it } from 'vitest';
import type { ObjectEvent } from '../../../events.js';
import { formatElapsed, planFrame, treeRows, type TreeRow } from './layout.js';
import { LiveModel, buildTree } from './model.js';

const obj = (kind: string, name: string, extra: Partial<ObjectEvent> = {}): ObjectEvent => ({ type: 'object', kind, namespace: 'ns', name, ready: false, ...extra });

function describeRows(rows: TreeRow[]): string[] {
  return rows.map((r) =>
    r.kind === 'object' ? `${r.branch}${r.object.kind}/${r.object.name}` : r.kind === 'readyGroup' ? `${r.branch}${r.count} ready ${r.objectKind}` : `more ${r.count} (${r.notReady})`,
  );
}

describe('LiveModel', () => {
  it('keeps what later process events leave out, and the log tail until the process is ready again', () => {
    const model = new LiveModel('info', () => 0);
    model.apply({ type: 'process', name: 'etcd', state: 'starting', pid: 10, ports: { client: 2379 } });
    model.apply({ type: 'process', name: 'etcd', state: 'exited', exitCode: 1, logTail: ['boom'] });
    model.apply({ type: 'process', name: 'etcd', state: 'restarting' });
    expect(model.processes.get('etcd')).toMatchObject({ state: 'restarting', pid: 10, ports: { client: 2379 }, exitCode: 1, logTail: ['boom'], restarts: 1 });
    model.apply({ type: 'process', name: 'etcd', state: 'ready', pid: 11 });
    const ready = model.processes.get('etcd')!;
    expect([ready.pid, ready.logTail, ready.exitCode, ready.restarts]).toEqual([11, undefined, undefined, 1]);
  });

  it('ignores repeated object states, stops an object clock when it becomes ready, and drops deleted objects', () => {
    let clock = 1_000;
    const model = new LiveModel('info', () => clock);
    model.apply(obj('Machine', 'm1', { phase: 'Pending' }));
    const version = model.version;
    clock = 2_000;
    model.apply(obj('Machine', 'm1', { phase: 'Pending' }));
    expect(model.version).toBe(version);
    clock = 5_000;
    model.apply(obj('Machine', 'm1', { phase: 'Running', ready: true }));
    clock = 9_000;
    model.apply(obj('Machine', 'm1', { phase: 'Running', ready: true, blocking: undefined }));
    expect(model.objects.get('Machine/ns/m1')).toMatchObject({ firstSeen: 1_000, readyAt: 5_000 });
    model.apply(obj('Machine', 'm1', { phase: 'Deleting', deleted: true }));
    expect(model.objects.has('Machine/ns/m1')).toBe(false);
  });

  it('filters logs by level, keeps warnings apart from the latest info line, and folds repeats', () => {
    const model = new LiveModel('warn', () => 0);
    model.apply({ type: 'log', level: 'info', message: 'hidden at warn' });
    model.apply({ type: 'log', level: 'error', message: 'bad', fields: { code: 7 } });
    expect(model.lastInfo).toBeUndefined();
    model.apply({ type: 'log', level: 'error', message: 'bad', fields: { code: 7 } });
    model.apply({ type: 'log', level: 'warn', message: 'bad', fields: { code: 7 } });
    expect(model.problems).toEqual([
      { level: 'error', text: 'bad code=7', repeats: 2 },
      { level: 'warn', text: 'bad code=7' },
    ]);
  });
});

describe('object tree', () => {
  it('puts objects under their parents, control plane before workers, and keeps orphans and cycles visible', () => {
    const model = new LiveModel('info', () => 0);
    for (const e of [
      obj('Machine', 'w-1', { parent: 'MachineDeployment/md' }),
      obj('MachineDeployment', 'md', { parent: 'Cluster/c' }),
      obj('Machine', 'cp-1', { parent: 'KubeadmControlPlane/cp' }),
      obj('KubeadmControlPlane', 'cp', { parent: 'Cluster/c' }),
      obj('Cluster', 'c'),
      obj('Machine', 'lost', { parent: 'MachineDeployment/gone' }),
      obj('Thing', 'a', { parent: 'Thing/b' }),
      obj('Thing', 'b', { parent: 'Thing/a' }),
      obj('Thing', 'self', { parent: 'Thing/self' }),
    ]) {
      model.apply(e);
    }
    expect(describeRows(treeRows(buildTree(model.objects.values()), 100))).toEqual([
      'Cluster/c',
      '├─ KubeadmControlPlane/cp',
      '│  └─ Machine/cp-1',
      '└─ MachineDeployment/md',
      '   └─ Machine/w-1',
      'Machine/lost',
      'Thing/b',
      '└─ Thing/a',
      'Thing/self',
    ]);
  });

  it('folds ready machines, then cuts with a count of what is hidden, when rows run out', () => {
    const model = new LiveModel('info', () => 0);
    model.apply(obj('Cluster', 'c'));
    model.apply(obj('MachineDeployment', 'md', { parent: 'Cluster/c' }));
    for (let i = 0; i < 20; i++) model.apply(obj('Machine', `m-${String(i).padStart(2, '0')}`, { parent: 'MachineDeployment/md', ready: i >= 2 }));
    const roots = buildTree(model.objects.values());
    expect(describeRows(treeRows(roots, 10))).toEqual(['Cluster/c', '└─ MachineDeployment/md', '   ├─ Machine/m-00', '   ├─ Machine/m-01', '   └─ 18 ready Machine']);
    expect(describeRows(treeRows(roots, 4))).toEqual(['Cluster/c', '└─ MachineDeployment/md', '   ├─ Machine/m-00', 'more 19 (1)']);
  });

  it('gives a blocking condition its own row only when every one fits', () => {
    const model = new LiveModel('info', () => 0);
    model.apply(obj('Cluster', 'c', { blocking: { condition: 'InfrastructureReady' } }));
    model.apply(obj('Machine', 'm', { parent: 'Cluster/c', blocking: { condition: 'NodeHealthy' } }));
    const roots = buildTree(model.objects.values());
    const below = treeRows(roots, 4).map((r) => r.kind === 'object' && r.blockingBelow);
    const inline = treeRows(roots, 3).map((r) => r.kind === 'object' && r.blockingBelow);
    expect([below, inline]).toEqual([
      [true, true],
      [false, false],
    ]);
  });
});

describe('planFrame', () => {
  it('gives up finished stages and healthy processes before the tree on a short terminal', () => {
    const model = new LiveModel('info', () => 0);
    for (let i = 0; i < 12; i++) model.apply({ type: 'stage', stage: `s${i}`, state: 'succeeded', durationMs: 100 });
    model.apply({ type: 'stage', stage: 'wait', state: 'started' });
    for (let i = 0; i < 6; i++) model.apply({ type: 'process', name: `p${i}`, state: 'ready', pid: i });
    model.apply({ type: 'process', name: 'bad', state: 'failed', logTail: ['1', '2', '3', '4', '5', '6'], logFile: '/l' });
    model.apply(obj('Cluster', 'c'));
    for (let i = 0; i < 5; i++) model.apply(obj('Machine', `m${i}`, { parent: 'Cluster/c' }));

    const tall = planFrame(model, 60);
    expect([tall.stages.length, tall.processes.length, tall.tree.length]).toEqual([13, 7, 6]);

    const short = planFrame(model, 20);
    expect(short.stages.map((r) => r.kind)).toEqual(['finished', 'stage']);
    expect(short.processes.map((r) => (r.kind === 'healthy' ? `healthy ${r.names.length}` : `${r.process.name} tail ${r.tail.length}`))).toEqual(['healthy 6', 'bad tail 5']);
    expect(short.tree.length).toBe(6);
  });
});

describe('formatElapsed', () => {
  it('shows whole seconds, then minutes, then hours', () => {
    expect([formatElapsed(999), formatElapsed(59_999), formatElapsed(61_000), formatElapsed(3_725_000)]).toEqual(['0s', '59s', '1m01s', '1h02m']);
  });
});
