/**
 * `npm run bench -- [name]`: runs scripts/bench/<name>.ts, or every benchmark when no
 * name is given. Each benchmark module exports `async function run(): Promise<BenchRecord>`;
 * this prints its table and writes `bench-results/<name>.json`. Exits 1 when any failed.
 * Benchmarks are reports, not tests: they assert nothing and never gate CI.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describeMachine, formatRecord, saveRecord, type BenchRecord } from './record.js';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
/** Files here that are not benchmarks. */
const notBenchmarks = new Set(['run.ts', 'record.ts']);

interface BenchModule {
  run(): Promise<BenchRecord>;
}

async function available(): Promise<string[]> {
  return (await readdir(benchDir))
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !notBenchmarks.has(f))
    .map((f) => f.slice(0, -'.ts'.length))
    .sort();
}

async function main(argv: string[]): Promise<number> {
  const names = await available();
  const wanted = argv.length > 0 ? argv : names;
  const unknown = wanted.filter((n) => !names.includes(n));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark: ${unknown.join(', ')}; available: ${names.join(', ')}\n`);
    return 2;
  }
  const machine = await describeMachine();
  let failed = 0;
  for (const name of wanted) {
    process.stderr.write(`running benchmark ${name}...\n`);
    try {
      const mod = (await import(pathToFileURL(path.join(benchDir, `${name}.ts`)).href)) as BenchModule;
      const record = await mod.run();
      process.stdout.write(formatRecord(record, machine));
      const file = await saveRecord(record, machine);
      process.stdout.write(`wrote ${path.relative(process.cwd(), file) || file}\n\n`);
    } catch (error) {
      failed += 1;
      const hint = (error as { hint?: unknown }).hint;
      process.stderr.write(`benchmark ${name} failed: ${error instanceof Error ? error.message : String(error)}\n`);
      if (typeof hint === 'string') process.stderr.write(`next step: ${hint}\n`);
    }
  }
  return failed > 0 ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
