/**
 * One of provisioner's own records in an install directory (`.provisioner/<name>.json`):
 * read with a size cap and a shape check, written atomically with mode 0600, each carrying a
 * schema version. A record that cannot be used fails with an EnvironmentError (exit 4) whose
 * hint says how to recover without it; a record written by a newer provisioner is refused
 * rather than misread.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { FieldProblem } from '../errors.js';
import { writeFileAtomic } from '../files.js';
import { invalidInput, readJsonFile, type FileKind } from '../input-files.js';
import { recordPath, type RecordName } from './paths.js';

export interface RecordSpec {
  record: RecordName;
  /** The file's name in messages, e.g. `pivot journal`. */
  title: string;
  /** Largest file accepted, in bytes. */
  maxBytes: number;
  /** The schema version this provisioner writes. A file without one was written before records carried it: version 1. */
  version: number;
  /** The next step when the file cannot be used: how to restore it, or how to go on without it. */
  recovery(file: string): string;
  /** What is wrong with a parsed value (each problem with its field); none when it is a T. */
  problems(value: Record<string, unknown>): FieldProblem[];
}

export class InstallRecord<T extends object> {
  private readonly kind: FileKind;

  constructor(private readonly spec: RecordSpec) {
    this.kind = { name: spec.title, maxBytes: spec.maxBytes, writer: 'provisioner', hint: spec.recovery };
  }

  path(dir: string): string {
    return recordPath(dir, this.spec.record);
  }

  /** The record of `dir`; undefined when there is none. */
  async read(dir: string): Promise<T | undefined> {
    const file = this.path(dir);
    const value = await readJsonFile(file, this.kind);
    if (value === undefined) return undefined;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw invalidInput(file, this.kind, [{ path: file, message: 'expected a JSON object' }]);
    }
    const fields = value as Record<string, unknown>;
    const version = fields.version ?? 1;
    if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
      throw invalidInput(file, this.kind, [{ path: 'version', message: 'expected a positive whole number' }]);
    }
    if (version > this.spec.version) {
      throw invalidInput(file, this.kind, [
        { path: 'version', message: `version ${version} was written by a newer provisioner; this one reads version ${this.spec.version} and older` },
      ]);
    }
    const problems = this.spec.problems(fields);
    if (problems.length > 0) throw invalidInput(file, this.kind, problems);
    return { ...fields, version: this.spec.version } as T;
  }

  /** Writes the record whole (temporary file, fsync, rename), mode 0600, with this provisioner's schema version. */
  async write(dir: string, value: T): Promise<void> {
    const file = this.path(dir);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFileAtomic(file, JSON.stringify({ ...value, version: this.spec.version }, null, 2) + '\n', 0o600);
  }

  async remove(dir: string): Promise<void> {
    await rm(this.path(dir), { force: true });
  }
}
