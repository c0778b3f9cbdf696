/**
 * The journal of `create cluster`: which stages ran, when, for how long and how they
 * ended, in `<dir>/.provisioner/journal.json`, rewritten atomically after every change.
 * A re-run reads it to resume: stages that completed are not repeated unless they are
 * idempotent re-applies; the run count shows how many attempts an install took.
 */
import { InstallRecord } from '../installdir/record.js';

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
 * The journal as a record: at most 4 MiB (a few hundred bytes per stage). Losing it is
 * recoverable: the next run starts the record afresh.
 */
const journalRecord = new InstallRecord<JournalData>({
  record: 'journal',
  title: 'journal',
  maxBytes: 4 * 1024 * 1024,
  version: 1,
  recovery: (file) =>
    `move it aside (mv ${file} ${file}.bak) and rerun create cluster: it then runs every stage again (applies are idempotent and waits see what is done), and hooks that already ran run again`,
  problems: (journal) =>
    typeof journal.runs !== 'number' || typeof journal.stages !== 'object' || journal.stages === null
      ? [{ path: 'stages', message: 'expected {"version": 1, "runs": <number>, "stages": {...}}' }]
      : [],
});

export class Journal {
  readonly file: string;

  private constructor(
    private readonly dir: string,
    private data: JournalData,
  ) {
    this.file = journalRecord.path(dir);
  }

  static path(dir: string): string {
    return journalRecord.path(dir);
  }

  /** Reads the journal of `dir`; none yet is a first run. A corrupt one is an EnvironmentError with the way out. */
  static async open(dir: string): Promise<Journal> {
    const data = await journalRecord.read(dir);
    return new Journal(dir, data ?? { version: 1, runs: 0, stages: {} });
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
    await journalRecord.write(this.dir, this.data);
  }
}
