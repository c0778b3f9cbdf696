import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { Journal } from './journal.js';
import { StageRunner } from './stages.js';

describe('StageRunner', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'stages-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const states = (sink: RecordingSink) => sink.events.flatMap((e) => (e.type === 'stage' ? [`${e.stage}:${e.state}`] : []));

  it('journals each stage before announcing it, times it and records how it ended', async () => {
    const journal = await Journal.open(dir);
    await journal.beginRun();
    const sink = new RecordingSink();
    const runner = new StageRunner({ journal, sink, signal: new AbortController().signal });
    let seenRunning = false;
    expect(await runner.value('a', async () => ((seenRunning = (await Journal.open(dir)).stage('a')?.state === 'running'), 42))).toBe(42);
    await expect(runner.run('b', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(seenRunning).toBe(true);
    expect(states(sink)).toEqual(['a:started', 'a:succeeded', 'b:started', 'b:failed']);
    const onDisk = await Journal.open(dir);
    expect([onDisk.stage('a')?.state, onDisk.stage('b')?.state, onDisk.stage('b')?.error]).toEqual(['succeeded', 'failed', 'boom']);
    expect(runner.timings.map((t) => t.name)).toEqual(['a']);
  });

  it('without a journal: times and announces each stage, writes no journal, and runs a once stage every time', async () => {
    const sink = new RecordingSink();
    const ran: string[] = [];
    const runner = new StageRunner({ sink, signal: new AbortController().signal });
    await runner.runAll([
      { name: 'x', once: true, run: async () => void ran.push('x') },
      { name: 'left-out', when: false, run: async () => void ran.push('left-out') },
    ]);
    await runner.runAll([{ name: 'x', once: true, run: async () => void ran.push('x') }]);
    expect(ran).toEqual(['x', 'x']);
    expect(states(sink)).toEqual(['x:started', 'x:succeeded', 'x:started', 'x:succeeded']);
    expect(runner.timings.map((t) => t.name)).toEqual(['x', 'x']);
    expect((await Journal.open(dir)).runs).toBe(0);
  });

  it('records an aborted stage as interrupted, and starts none once aborted', async () => {
    const journal = await Journal.open(dir);
    await journal.beginRun();
    const abort = new AbortController();
    const runner = new StageRunner({ journal, sink: new RecordingSink(), signal: abort.signal });
    await expect(runner.run('a', async () => { abort.abort(); throw new Error('stopped'); })).rejects.toThrow('stopped');
    expect(journal.stage('a')?.state).toBe('interrupted');
    await expect(runner.run('b', async () => 1)).rejects.toThrow();
    expect(journal.stage('b')).toBeUndefined();
  });

  it('skips a once stage an earlier run finished and runs its whenDone instead; the others run again', async () => {
    const first = await Journal.open(dir);
    await first.beginRun();
    const ran: string[] = [];
    const declared = [
      { name: 'hooks/x', once: true, run: async () => void ran.push('hooks/x'), whenDone: async () => void ran.push('hooks/x done before') },
      { name: 'apply', run: async () => void ran.push('apply') },
    ];
    await new StageRunner({ journal: first, sink: new RecordingSink(), signal: new AbortController().signal }).runAll(declared);
    const again = await Journal.open(dir);
    await again.beginRun();
    const sink = new RecordingSink();
    await new StageRunner({ journal: again, sink, signal: new AbortController().signal }).runAll(declared);
    expect(ran).toEqual(['hooks/x', 'apply', 'hooks/x done before', 'apply']);
    expect(states(sink)).toEqual(['hooks/x:skipped', 'apply:started', 'apply:succeeded']);
  });

  it('journals nothing in a dry run', async () => {
    const journal = await Journal.open(dir);
    const runner = new StageRunner({ journal, sink: new RecordingSink(), signal: new AbortController().signal, dryRun: true });
    await runner.run('a', async () => 1);
    expect(journal.snapshot().stages).toEqual({});
    expect(runner.timings).toHaveLength(1);
  });

  it('leaves out a stage whose condition is false: not run, not journaled, not announced', async () => {
    const journal = await Journal.open(dir);
    await journal.beginRun();
    const sink = new RecordingSink();
    const ran: string[] = [];
    await new StageRunner({ journal, sink, signal: new AbortController().signal }).runAll([
      { name: 'a', run: async () => void ran.push('a') },
      { name: 'pivot', when: false, run: async () => void ran.push('pivot') },
      { name: 'b', when: true, run: async () => void ran.push('b') },
    ]);
    expect(ran).toEqual(['a', 'b']);
    expect(states(sink)).toEqual(['a:started', 'a:succeeded', 'b:started', 'b:succeeded']);
    expect(journal.stage('pivot')).toBeUndefined();
  });

  it('asks a stage whether to skip when its turn comes: decided from what the earlier stages found, announced with the reason, not journaled', async () => {
    const journal = await Journal.open(dir);
    await journal.beginRun();
    const sink = new RecordingSink();
    const ran: string[] = [];
    const found = { ready: false };
    await new StageRunner({ journal, sink, signal: new AbortController().signal }).runAll([
      { name: 'find', run: async () => void (ran.push('find'), (found.ready = true)) },
      { name: 'token', skip: () => (found.ready ? 'already ready' : undefined), run: async () => void ran.push('token') },
      { name: 'wait', skip: () => undefined, run: async () => void ran.push('wait') },
    ]);
    expect(ran).toEqual(['find', 'wait']);
    expect(states(sink)).toEqual(['find:started', 'find:succeeded', 'token:skipped', 'wait:started', 'wait:succeeded']);
    expect(sink.events.find((e) => e.type === 'stage' && e.state === 'skipped')).toMatchObject({ message: 'already ready' });
    expect(journal.stage('token')).toBeUndefined();
  });
});
