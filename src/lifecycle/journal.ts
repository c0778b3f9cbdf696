/**
 * The journal of `create cluster`: which stages ran, when, for how long and how they
 * ended, in `<dir>/.provisioner/journal.json`, rewritten atomically after every change.
 * A re-run reads it to resume: stages that completed are not repeated unless they are
 * idempotent re-applies; the run count shows how many attempts an install took.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../files.js';
import { invalidInput, readJsonFile, type FileKind } from '../input-files.js';

export type StageState = 'running' | 'succeeded' | 'failed' | 'interrupted';

export interface StageRecord {
  state: StageState;
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
  error?: string;
  /** Which run (1-based) last ran this stage. */
  run: number;
}

export interface JournalData {
  version: 1;
  /** Number of `create cluster` runs on this directory. */
  runs: number;
  stages: Record<string, StageRecord>;
  /** Set when the hand-off finished: the install is complete. */
  completedAt?: string;
}

/**
 * The journal as a file kind: provisioner's own, at most 4 MiB (a few hundred bytes per
 * stage). Losing it is recoverable: the next run starts the record afresh.
 */
const journalFile: FileKind = {
  name: 'journal',
  maxBytes: 4 * 1024 * 1024,
  writer: 'provisioner',
  hint: (file) =>
    `move it aside (mv ${file} ${file}.bak) and rerun create cluster: it then runs every stage again (applies are idempotent and waits see what is done), and hooks that already ran run again`,
};

export class Journal {
  private constructor(
    readonly file: string,
    private data: JournalData,
  ) {}

  static path(dir: string): string {
    return path.join(dir, '.provisioner', 'journal.json');
  }

  /** Reads the journal of `dir`; none yet is a first run. A corrupt one is an EnvironmentError with the way out. */
  static async open(dir: string): Promise<Journal> {
    const file = Journal.path(dir);
    const data = await readJsonFile(file, journalFile);
    if (data === undefined) return new Journal(file, { version: 1, runs: 0, stages: {} });
    const journal = data as Partial<JournalData> | null;
    if (journal?.version !== 1 || typeof journal.runs !== 'number' || typeof journal.stages !== 'object' || journal.stages === null) {
      throw invalidInput(file, journalFile, [{ path: file, message: 'expected {"version": 1, "runs": <number>, "stages": {...}}' }]);
    }
    return new Journal(file, journal as JournalData);
  }

  get runs(): number {
    return this.data.runs;
  }

  get completed(): boolean {
    return this.data.completedAt !== undefined;
  }

  stage(name: string): StageRecord | undefined {
    return this.data.stages[name];
  }

  succeeded(name: string): boolean {
    return this.data.stages[name]?.state === 'succeeded';
  }

  snapshot(): JournalData {
    return structuredClone(this.data);
  }

  async beginRun(): Promise<number> {
    this.data.runs += 1;
    // A stage left "running" by a run that died (SIGKILL, crash) was interrupted.
    for (const record of Object.values(this.data.stages)) if (record.state === 'running') record.state = 'interrupted';
    await this.save();
    return this.data.runs;
  }

  async start(name: string): Promise<void> {
    this.data.stages[name] = { state: 'running', startedAt: new Date().toISOString(), run: this.data.runs };
    await this.save();
  }

  async finish(name: string, state: Exclude<StageState, 'running'>, durationMs: number, error?: string): Promise<void> {
    const record = this.data.stages[name] ?? { state, startedAt: new Date().toISOString(), run: this.data.runs };
    this.data.stages[name] = { ...record, state, endedAt: new Date().toISOString(), durationMs: Math.round(durationMs), ...(error ? { error } : {}) };
    if (state === 'succeeded') delete this.data.stages[name]!.error;
    await this.save();
  }

  async complete(): Promise<void> {
    this.data.completedAt = new Date().toISOString();
    await this.save();
  }

  private async save(): Promise<void> {
    await mkdir(path.dirname(this.file), { recursive: true });
    await writeFileAtomic(this.file, JSON.stringify(this.data, null, 2) + '\n');
  }
}
