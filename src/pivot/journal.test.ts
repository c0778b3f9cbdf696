import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { pivotJournalPath, readPivotJournal, writePivotJournal, type PivotJournal } from './journal.js';

describe('the pivot journal on disk', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'pivot-journal-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const journal: PivotJournal = {
    version: 1,
    targetKubeconfig: '/k',
    targetServer: 'https://127.0.0.1:6443',
    phase: 'copied',
    startedAt: '2026-11-23T00:00:00Z',
    updatedAt: '2026-11-23T00:00:00Z',
    clusters: [{ namespace: 'demo', name: 'demo', wasPaused: false }],
    objects: [],
  };

  it('reads back what it wrote; no file is no move', async () => {
    expect(await readPivotJournal(dir)).toBeUndefined();
    await writePivotJournal(dir, structuredClone(journal));
    expect(await readPivotJournal(dir)).toMatchObject({ phase: 'copied', clusters: journal.clusters });
  });

  it('refuses a corrupt journal naming the file, the line and the careful way out', async () => {
    const file = pivotJournalPath(dir);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, JSON.stringify(journal, null, 2).replace('"phase": "copied",', '"phase": "copied"'));
    const error = await readPivotJournal(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).message).toBe(`${file} is not valid JSON`);
    expect((error as EnvironmentError).details[0]).toMatch(/: line 6, column 3: /);
    expect((error as EnvironmentError).hint).toMatch(/kubectl get clusters -A/);

    await writeFile(file, JSON.stringify({ ...journal, phase: 'halfway' }));
    expect(((await readPivotJournal(dir).catch((e: unknown) => e)) as EnvironmentError).message).toBe(`${file} is not a valid pivot journal`);
  });
});
