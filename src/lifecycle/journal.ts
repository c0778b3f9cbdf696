/**
 * The journal of `create cluster`: which stages ran, when, for how long and how they
 * ended, in `<dir>/.provisioner/journal.json`, rewritten atomically after every change.
 * A re-run reads it to resume: stages that completed are not repeated unless they are
 * idempotent re-applies; the run count shows how many attempts an install took.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../files.js';

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

export class Journal {
  private constructor(
    readonly file: string,
    private data: JournalData,
  ) {}

  static path(dir: string): string {
    return path.join(dir, '.provisioner', 'journal.json');
  }

  static async open(dir: string): Promise<Journal> {
    const file = Journal.path(dir);
    let data: JournalData = { version: 1, runs: 0, stages: {} };
    try {
      data = JSON.parse(await readFile(file, 'utf8')) as JournalData;
    } catch {
      // No journal yet: a first run.
    }
    return new Journal(file, data);
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
