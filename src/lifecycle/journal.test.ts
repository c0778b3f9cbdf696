import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { Journal, type JournalData } from './journal.js';

describe('Journal', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'journal-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** The file as JSON; throws if it is not valid JSON. */
  async function onDisk(): Promise<JournalData> {
    return JSON.parse(await readFile(Journal.path(dir), 'utf8')) as JournalData;
  }

  it('starts empty without a file, and writes nothing until a change', async () => {
    const journal = await Journal.open(dir);
    expect(journal.runs).toBe(0);
    expect(journal.completed).toBe(false);
    expect(journal.snapshot()).toEqual({ version: 1, runs: 0, stages: {} });
    await expect(readFile(Journal.path(dir), 'utf8')).rejects.toThrow(/ENOENT/);
  });

  it('persists every step as valid JSON that a new Journal.open reads back', async () => {
    const journal = await Journal.open(dir);
    expect(await journal.beginRun()).toBe(1);
    expect((await onDisk()).runs).toBe(1);

    await journal.start('manifests');
    expect((await onDisk()).stages.manifests).toMatchObject({ state: 'running', run: 1 });

    await journal.finish('manifests', 'succeeded', 1234.6);
    const finished = (await onDisk()).stages.manifests;
    expect(finished).toMatchObject({ state: 'succeeded', run: 1, durationMs: 1235 });
    expect(Date.parse(finished?.endedAt ?? '')).not.toBeNaN();

    await journal.start('controlplane');
    await journal.finish('controlplane', 'failed', 10, 'etcd exited');
    expect((await onDisk()).stages.controlplane).toMatchObject({ state: 'failed', error: 'etcd exited' });

    const reopened = await Journal.open(dir);
    expect(reopened.runs).toBe(1);
    expect(reopened.succeeded('manifests')).toBe(true);
    expect(reopened.succeeded('controlplane')).toBe(false);
    expect(reopened.stage('controlplane')?.error).toBe('etcd exited');
    expect(reopened.snapshot()).toEqual(journal.snapshot());

    // A later success clears the earlier error.
    expect(await reopened.beginRun()).toBe(2);
    await reopened.start('controlplane');
    await reopened.finish('controlplane', 'succeeded', 5);
    const stage = (await onDisk()).stages.controlplane;
    expect(stage).toMatchObject({ state: 'succeeded', run: 2 });
    expect(stage && 'error' in stage).toBe(false);

    await reopened.complete();
    expect((await Journal.open(dir)).completed).toBe(true);
    expect(Date.parse((await onDisk()).completedAt ?? '')).not.toBeNaN();
    // Atomic writes leave no temp files behind.
    expect(await readdir(path.dirname(Journal.path(dir)))).toEqual(['journal.json']);
  });

  it('beginRun marks stages a dead run left running as interrupted, and leaves others alone', async () => {
    const first = await Journal.open(dir);
    await first.beginRun();
    await first.start('manifests');
    await first.finish('manifests', 'succeeded', 1);
    await first.start('wait-cluster');
    // The process dies here (SIGKILL): no finish.

    const second = await Journal.open(dir);
    expect(second.stage('wait-cluster')?.state).toBe('running');
    expect(await second.beginRun()).toBe(2);
    expect(second.stage('wait-cluster')?.state).toBe('interrupted');
    expect(second.stage('manifests')?.state).toBe('succeeded');
    const data = await onDisk();
    expect(data.runs).toBe(2);
    expect(data.stages['wait-cluster']).toMatchObject({ state: 'interrupted', run: 1 });
  });

  it('snapshot is a copy', async () => {
    const journal = await Journal.open(dir);
    await journal.beginRun();
    const copy = journal.snapshot();
    copy.runs = 99;
    expect(journal.runs).toBe(1);
  });

  it('refuses a corrupt journal, naming the file, the line and the way out, instead of starting over', async () => {
    await mkdir(path.dirname(Journal.path(dir)), { recursive: true });
    await writeFile(Journal.path(dir), '{\n  "version": 1,\n  "runs": 2\n  "stages": {}\n}\n');
    const error = await Journal.open(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toBe(`${Journal.path(dir)} is not valid JSON`);
    expect((error as EnvironmentError).details).toEqual([`${Journal.path(dir)}: line 4, column 3: Expected ',' or '}' after property value`]);
    expect((error as EnvironmentError).hint).toContain(`mv ${Journal.path(dir)} ${Journal.path(dir)}.bak`);

    await writeFile(Journal.path(dir), '[]\n');
    expect(await Journal.open(dir).catch((e: unknown) => e)).toBeInstanceOf(EnvironmentError);
  });
});
