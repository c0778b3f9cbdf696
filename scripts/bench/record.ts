/**
 * What every benchmark returns and how it is reported: a small table on stdout and one
 * JSON record in `bench-results/<name>.json` (name, figures, ratios, versions, machine).
 * Benchmarks measure their baseline in the same run and report medians and ratios,
 * because absolute times on shared machines are noise.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { formatTable } from '../../src/text-table.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A table to print: a title, column headers, rows. */
export interface BenchTable {
  title: string;
  columns: string[];
  rows: (string | number)[][];
}

export interface BenchRecord {
  name: string;
  /** Measured figures, medians unless the key says otherwise; the unit is in the key (`…Ms`, `…MBps`, `…Bytes`). */
  figures: Record<string, number>;
  /** Ours over the baseline measured in the same run; what a value above 1 means is in `notes`. */
  ratios: Record<string, number>;
  /** Versions of what was measured and what it was compared against. Default: none. */
  versions?: Record<string, string>;
  /** Tables to print. Default: the figures as one table. */
  tables?: BenchTable[];
  /** How to read the figures: what the baseline is, what is and is not comparable. */
  notes?: string[];
}

export interface Machine {
  cores: number;
  memoryBytes: number;
  node: string;
  /** `go version` output, or null when Go is not installed. */
  go: string | null;
  platform: string;
  cpu: string;
}

export async function describeMachine(): Promise<Machine> {
  let go: string | null;
  try {
    go = (await promisify(execFile)('go', ['version'], { timeout: 10_000 })).stdout.trim();
  } catch {
    go = null;
  }
  return {
    cores: os.availableParallelism(),
    memoryBytes: os.totalmem(),
    node: process.version,
    go,
    platform: `${process.platform}/${process.arch}`,
    cpu: os.cpus()[0]?.model ?? 'unknown',
  };
}

/** Writes `bench-results/<name>.json` under the repository root; returns its path. */
export async function saveRecord(record: BenchRecord, machine: Machine): Promise<string> {
  const dir = path.join(repoRoot, 'bench-results');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${record.name}.json`);
  const full = { ...record, versions: record.versions ?? {}, machine, recordedAt: new Date().toISOString() };
  await writeFile(file, JSON.stringify(full, null, 2) + '\n');
  return file;
}

/** The record as text: every table, then ratios and notes. */
export function formatRecord(record: BenchRecord, machine: Machine): string {
  const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
  const out: string[] = [`== ${record.name}  (${machine.cpu}, ${machine.cores} cores, ${(machine.memoryBytes / 2 ** 30).toFixed(0)} GiB, load ${load} at the end (1, 5, 15 min), node ${machine.node}${machine.go ? `, ${machine.go.replace(/^go version /, '')}` : ''})`];
  const tables = record.tables ?? [
    { title: 'figures', columns: ['figure', 'value'], rows: Object.entries(record.figures).map(([k, v]) => [k, formatNumber(v)]) },
  ];
  for (const table of tables) {
    out.push('', table.title, ...alignTable(table.columns, table.rows.map((r) => r.map(String))));
  }
  if (Object.keys(record.ratios).length > 0) {
    out.push('', 'ratios', ...alignTable(['ratio', 'value'], Object.entries(record.ratios).map(([k, v]) => [k, formatNumber(v)])));
  }
  if (record.notes?.length) out.push('', ...record.notes.map((n) => `note: ${n}`));
  return out.join('\n') + '\n';
}

/** Numbers right-aligned, text left-aligned, indented under the table's title. */
function alignTable(columns: string[], rows: string[][]): string[] {
  const isNumber = (value: string) => /^[-+]?[\d.,]+( ?[%x]| ?[a-zA-Z/]+)?$/.test(value);
  return formatTable(columns, rows, { alignRight: isNumber }).map((line) => `  ${line}`);
}

export function formatNumber(value: number): string {
  if (!Number.isFinite(value) || Number.isInteger(value)) return String(value);
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  if (Math.abs(value) >= 0.1 || value === 0) return value.toFixed(2);
  return value.toPrecision(2);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * A benchmark's run count (or another whole number) from the environment: `fallback` when
 * unset or empty; at least 1, or 0 too with `zeroAllowed` (0 skips a part); anything else throws.
 */
export function positiveEnv(name: string, fallback: number, zeroAllowed = false): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < (zeroAllowed ? 0 : 1)) throw new Error(`${name} must be a whole number${zeroAllowed ? '' : ' of at least 1'}`);
  return value;
}

/** To one and two decimals: the precision figures are recorded with. */
export const round1 = (n: number) => Math.round(n * 10) / 10;
export const round2 = (n: number) => Math.round(n * 100) / 100;

/** Megabytes (10^6 bytes), the unit published figures use. */
export const MB = 1e6;
