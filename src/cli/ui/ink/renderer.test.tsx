import { EventEmitter } from 'node:events';
import { stripVTControlCharacters } from 'node:util';
import { render as renderForTest } from 'ink-testing-library';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ProvisionerEvent } from '../../../events.js';
import { UsageError } from '../../../errors.js';
import { createRenderer, wantsLiveView } from '../index.js';
import { InkRenderer, type Mount } from './renderer.js';

/** Mounts with ink-testing-library and keeps every instance, so frames can be read after a remount. */
function testMount() {
  const instances: ReturnType<typeof renderForTest>[] = [];
  let clears = 0;
  let unmounts = 0;
  const mount: Mount = (node) => {
    const instance = renderForTest(node);
    instances.push(instance);
    return {
      rerender: instance.rerender,
      clear: () => void clears++,
      unmount: () => {
        unmounts++;
        instance.unmount();
      },
    };
  };
  return {
    mount,
    lastFrame: () => stripVTControlCharacters(instances.at(-1)?.lastFrame() ?? ''),
    allFrames: () => instances.flatMap((i) => i.frames).map((f) => stripVTControlCharacters(f)),
    counts: () => ({ mounts: instances.length, clears, unmounts }),
  };
}

function collector(isTTY = false) {
  const chunks: string[] = [];
  return { isTTY, chunks, write: (chunk: string) => void chunks.push(chunk), text: () => chunks.join('') };
}

const clusterEvents: ProvisionerEvent[] = [
  { type: 'stage', stage: 'controlplane/etcd', state: 'started' },
  { type: 'stage', stage: 'controlplane/etcd', state: 'succeeded', durationMs: 1234 },
  { type: 'stage', stage: 'machines', state: 'started' },
  { type: 'process', name: 'kube-apiserver', state: 'ready', pid: 4242, ports: { secure: 6443, health: 6444 } },
  { type: 'process', name: 'capi-controller-manager', state: 'starting', pid: 5000, ports: { metrics: 8080 } },
  { type: 'process', name: 'capi-controller-manager', state: 'exited', exitCode: 2, logTail: ['I0101 starting manager', 'panic: webhook cert not found'], logFile: '/tmp/d/logs/capi.log' },
  { type: 'process', name: 'capi-controller-manager', state: 'restarting' },
  {
    type: 'object',
    kind: 'Cluster',
    namespace: 'default',
    name: 'demo',
    phase: 'Provisioning',
    ready: false,
    blocking: { condition: 'InfrastructureReady', reason: 'WaitingForInfrastructure', message: 'no endpoint yet' },
  },
  { type: 'object', kind: 'MachineDeployment', namespace: 'default', name: 'demo-md-0', phase: 'ScalingUp', ready: false, parent: 'Cluster/demo' },
  { type: 'object', kind: 'Machine', namespace: 'default', name: 'demo-md-0-x7k2p', phase: 'Pending', ready: false, parent: 'MachineDeployment/demo-md-0' },
  { type: 'object', kind: 'KubeadmControlPlane', namespace: 'default', name: 'demo-cp', phase: 'Initialized', ready: true, parent: 'Cluster/demo' },
  { type: 'log', level: 'warn', message: 'controller capi-controller-manager restarted' },
  { type: 'log', level: 'info', message: 'Waiting for the control plane' },
  { type: 'log', level: 'debug', message: 'watch bookmark rv=123' },
];

describe('InkRenderer', () => {
  beforeEach(() => {
    // Timers only: the renderer gets its clock injected, and the throttling test times itself with the real one.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('draws stages, processes with their log tail, and the object tree', () => {
    const ui = testMount();
    const stdout = collector();
    const stderr = collector();
    let clock = 0;
    const renderer = new InkRenderer({ stdout, stderr, logLevel: 'info', mount: ui.mount, now: () => clock, rows: () => 50 });
    for (const e of clusterEvents) renderer.emit(e);
    clock = 3_000;
    vi.advanceTimersByTime(100);

    const frame = ui.lastFrame();
    const lines = frame.split('\n');
    expect(frame).toMatch(/✓ controlplane\/etcd\s+1\.2s/);
    expect(frame).toMatch(/machines\s+3s/);
    expect(frame).toMatch(/kube-apiserver\s+ready\s+pid 4242\s+secure:6443 health:6444/);
    // The restarting process keeps the pid and ports it had, and shows why it went down.
    expect(frame).toMatch(/⟳ capi-controller-manager\s+restarting\s+pid 5000\s+metrics:8080\s+exit 2\s+restarts 1/);
    expect(frame).toContain('│ panic: webhook cert not found');
    expect(frame).toContain('log: /tmp/d/logs/capi.log');

    // Tree: Cluster at the root, the control plane before the workers, the machine under its deployment.
    const at = (text: string) => lines.findIndex((l) => l.includes(text));
    const cluster = at('Cluster default/demo');
    const kcp = at('KubeadmControlPlane demo-cp');
    const md = at('MachineDeployment demo-md-0 ');
    const machine = at('Machine demo-md-0-x7k2p');
    expect(cluster).toBeGreaterThanOrEqual(0);
    expect([cluster < kcp, kcp < md, md < machine]).toEqual([true, true, true]);
    expect(lines[cluster]).toBe('○ Cluster default/demo Provisioning 3s');
    // With room to spare, the blocking condition has its own row, inside the tree's lines.
    expect(lines[cluster + 1]).toBe('│   waiting on InfrastructureReady (WaitingForInfrastructure): no endpoint yet');
    expect(lines[kcp]).toMatch(/^├─ ✓ KubeadmControlPlane demo-cp Initialized 0s/);
    expect(lines[md]).toMatch(/^└─ ○ MachineDeployment demo-md-0 ScalingUp/);
    expect(lines[machine]).toMatch(/^ {3}└─ ○ Machine demo-md-0-x7k2p Pending 3s/);

    expect(frame).toContain('⚠ controller capi-controller-manager restarted');
    expect(lines.at(-1)).toBe('Waiting for the control plane');
    expect(frame).not.toContain('watch bookmark');
    renderer.stop();
  });

  it('writes results to stdout, never into the frame, and clears the frame around them when stdout is the terminal', () => {
    const ui = testMount();
    const stdout = collector(true);
    const stderr = collector();
    const renderer = new InkRenderer({ stdout, stderr, logLevel: 'info', mount: ui.mount, rows: () => 50 });
    renderer.emit({ type: 'stage', stage: 'controlplane', state: 'started' });
    renderer.emit({ type: 'result', kind: 'kubeconfig', text: '/tmp/demo/auth/kubeconfig' });
    renderer.emit({ type: 'stage', stage: 'controlplane', state: 'succeeded', durationMs: 500 });
    vi.advanceTimersByTime(100);

    expect(stdout.text()).toBe('/tmp/demo/auth/kubeconfig\n');
    expect(ui.allFrames().join('\n')).not.toContain('kubeconfig');
    expect(stderr.text()).not.toContain('/tmp/demo/auth/kubeconfig');
    // The first view was erased and unmounted before the result, and a new one drawn after.
    expect(ui.counts()).toEqual({ mounts: 2, clears: 1, unmounts: 1 });
    expect(ui.lastFrame()).toMatch(/✓ controlplane\s+500ms/);
    renderer.stop();
  });

  it('leaves the view alone for results when stdout is a pipe', () => {
    const ui = testMount();
    const stdout = collector(false);
    const renderer = new InkRenderer({ stdout, stderr: collector(), logLevel: 'info', mount: ui.mount });
    renderer.emit({ type: 'stage', stage: 'controlplane', state: 'started' });
    renderer.emit({ type: 'result', kind: 'kubeconfig', text: '/k' });
    expect(stdout.text()).toBe('/k\n');
    expect(ui.counts().mounts).toBe(1);
    renderer.stop();
  });

  it('prints log lines plainly and mounts nothing until there is something live', () => {
    const ui = testMount();
    const stdout = collector();
    const stderr = collector();
    const renderer = new InkRenderer({ stdout, stderr, logLevel: 'info', mount: ui.mount });
    renderer.emit({ type: 'log', level: 'info', message: 'Wrote manifests' });
    renderer.emit({ type: 'log', level: 'debug', message: 'hidden' });
    renderer.emit({ type: 'progress', task: 'x', label: 'Extracting etcd', current: 2048, total: 2048, unit: 'bytes', done: true });
    renderer.emit({ type: 'result', kind: 'manifests', text: 'cluster-api/' });
    renderer.stop();
    expect(ui.counts().mounts).toBe(0);
    expect(stderr.text()).toBe('Wrote manifests\nExtracting etcd: done (2.0 KiB)\n');
    expect(stdout.text()).toBe('cluster-api/\n');
  });

  it('replaces the view with a summary: stage timings, what is not ready, warnings, the last message', () => {
    const ui = testMount();
    const stderr = collector();
    let clock = 0;
    const renderer = new InkRenderer({ stdout: collector(), stderr, logLevel: 'info', mount: ui.mount, now: () => clock });
    for (const e of clusterEvents) renderer.emit(e);
    clock = 10_000;
    renderer.stop();
    expect(ui.counts()).toEqual({ mounts: 1, clears: 1, unmounts: 1 });
    const summary = stderr.text();
    expect(summary).toMatch(/^STAGE\s+RESULT\s+TIME$/m);
    expect(summary).toMatch(/^controlplane\/etcd\s+succeeded\s+1\.2s$/m);
    expect(summary).toMatch(/^machines\s+unfinished\s+10\.0s$/m);
    expect(summary).toMatch(/^total \(wall clock\)\s+10\.0s$/m);
    expect(summary).toContain('Objects: 1/4 ready');
    expect(summary).toContain('Cluster default/demo Provisioning: waiting on InfrastructureReady (WaitingForInfrastructure)');
    expect(summary).toContain('Process capi-controller-manager restarting (exit 2)');
    expect(summary).toContain('WARN controller capi-controller-manager restarted');
    expect(summary.trimEnd().split('\n').at(-1)).toBe('Waiting for the control plane');
    // After stop, late events are not lost: they print as plain lines.
    renderer.emit({ type: 'log', level: 'warn', message: 'late' });
    expect(stderr.text()).toMatch(/ WARN late\n$/);
  });

  it('draws a bounded number of frames for 10,000 object events a second', () => {
    const ui = testMount();
    let clock = 0;
    const renderer = new InkRenderer({ stdout: collector(), stderr: collector(), logLevel: 'info', mount: ui.mount, now: () => clock, rows: () => 40 });
    renderer.emit({ type: 'object', kind: 'Cluster', namespace: 'default', name: 'demo', ready: false });
    const started = process.hrtime.bigint();
    for (let i = 0; i < 10_000; i++) {
      // 200 machines, each changing phase 50 times: every event is a real change.
      renderer.emit({ type: 'object', kind: 'Machine', namespace: 'default', name: `m-${i % 200}`, phase: `Phase${Math.floor(i / 200)}`, ready: false, parent: 'Cluster/demo' });
      if (i % 10 === 9) {
        clock += 1;
        vi.advanceTimersByTime(1);
      }
    }
    const emitMs = Number(process.hrtime.bigint() - started) / 1e6;
    const framesDuringBurst = renderer.frames;
    // 1 s of events at one frame per 100 ms: the first frame, then ten ticks. (The
    // injected clock stands still while a frame renders, so frames cost nothing here.)
    expect(framesDuringBurst).toBeGreaterThanOrEqual(9);
    expect(framesDuringBurst).toBeLessThanOrEqual(11);
    expect(ui.allFrames().length).toBeLessThanOrEqual(11);
    clock += 2_000;
    vi.advanceTimersByTime(2_000);
    const frame = ui.lastFrame();
    expect(frame).toContain('Phase49');
    // The tree is cut to the terminal: 40 rows, not 201.
    expect(frame.split('\n').length).toBeLessThan(40);
    expect(frame).toMatch(/… \d+ more objects \(\d+ not ready\)/);
    console.log(`10,000 object events over 1 s of fake time: ${emitMs.toFixed(0)} ms of real time, ${framesDuringBurst} frames`);
    renderer.stop();
  });

  it('spaces frames to four times what the last one cost', () => {
    let clock = 0;
    let rerenders = 0;
    // Each frame takes 300 ms of the clock: a slow machine.
    const mount: Mount = () => ({
      rerender: () => {
        rerenders++;
        clock += 300;
      },
      clear: () => {},
      unmount: () => {},
    });
    const renderer = new InkRenderer({ stdout: collector(), stderr: collector(), logLevel: 'info', mount, now: () => clock });
    for (let step = 0; step < 60; step++) {
      renderer.emit({ type: 'object', kind: 'Machine', name: 'm', phase: `P${step}`, ready: false });
      clock += 100;
      vi.advanceTimersByTime(100);
    }
    // 60 steps of 100 ms plus the frames' own 300 ms each: without the guard, a frame every step.
    const elapsed = clock;
    expect(rerenders).toBeGreaterThan(0);
    expect(rerenders).toBeLessThanOrEqual(Math.ceil(elapsed / 1_200) + 1);
    renderer.stop();
  });
});

describe('createRenderer', () => {
  const tty = () => {
    const stream = Object.assign(new EventEmitter(), { isTTY: true, columns: 120, rows: 40, chunks: [] as string[] });
    return Object.assign(stream, { write: (chunk: string) => void stream.chunks.push(chunk) });
  };

  it('uses the live view only on a terminal that can redraw', () => {
    const term = { isTTY: true, write: () => true };
    const pipe = { isTTY: false, write: () => true };
    expect(wantsLiveView({ output: 'text', stderr: term }, { TERM: 'xterm-256color' })).toBe(true);
    expect(wantsLiveView({ output: 'json', stderr: term }, { TERM: 'xterm-256color' })).toBe(false);
    expect(wantsLiveView({ output: 'text', stderr: pipe }, { TERM: 'xterm-256color' })).toBe(false);
    expect(wantsLiveView({ output: 'text', stderr: term }, { TERM: 'dumb' })).toBe(false);
    expect(wantsLiveView({ output: 'text', stderr: term }, { TERM: 'xterm', CI: 'true' })).toBe(false);
    expect(wantsLiveView({ output: 'text', stderr: term }, { TERM: 'xterm', CI: 'false' })).toBe(true);
  });

  it('on a terminal draws with ink on stderr, keeps stdout for results, and unmounts before an error', async () => {
    const stderr = tty();
    const stdout = collector(false);
    const renderer = await createRenderer({ output: 'text', logLevel: 'info', stdout, stderr }, { TERM: 'xterm' });
    renderer.emit({ type: 'stage', stage: 'preflight', state: 'started' });
    renderer.emit({ type: 'result', kind: 'dry-run', text: '3 objects valid' });
    renderer.emit({ type: 'stage', stage: 'preflight', state: 'failed', durationMs: 2_000, message: 'webhook refused' });
    await renderer.close();
    renderer.renderError(new UsageError('bad flag', { hint: 'pass --dir' }));
    const written = stripVTControlCharacters(stderr.chunks.join(''));
    expect(stdout.text()).toBe('3 objects valid\n');
    expect(written).toContain('preflight');
    expect(written).not.toContain('3 objects valid');
    // Summary, then the error, in that order, after the view is gone.
    expect(written.indexOf('STAGE')).toBeLessThan(written.indexOf('Error: bad flag'));
    expect(written).toMatch(/^preflight\s+failed\s+2\.0s\s+webhook refused$/m);
    expect(written.trimEnd().endsWith('Next step: pass --dir')).toBe(true);
  });
});
