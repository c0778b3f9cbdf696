// Runs the three test tiers one after another — unit, integration, end to end — so the
// tiers that boot real control planes never compete for this 2-core machine's CPU.
// Every tier runs even when an earlier one failed (one run shows every failure); the
// last line is the plain closing line CI readers look for: "tests: N passed, N failed".
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

const tiers = process.argv.slice(2).length ? process.argv.slice(2) : ['unit', 'integration', 'e2e'];
rmSync('test-results', { recursive: true, force: true });
mkdirSync('test-results', { recursive: true });

let passed = 0;
let failed = 0;
let skipped = 0;
let status = 0;
for (const tier of tiers) {
  const report = `test-results/${tier}.json`;
  const run = spawnSync(
    'npx',
    ['vitest', 'run', '--project', tier, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`],
    { stdio: 'inherit' },
  );
  if (run.status !== 0) status = 1;
  try {
    const result = JSON.parse(readFileSync(report, 'utf8'));
    passed += result.numPassedTests;
    failed += result.numFailedTests;
    skipped += (result.numPendingTests ?? 0) + (result.numTodoTests ?? 0);
    // A tier whose files failed to load reports no failed test: count it as one.
    if (run.status !== 0 && result.numFailedTests === 0) failed += 1;
  } catch {
    failed += 1;
    console.log(`tests: the ${tier} tier wrote no report`);
  }
}
console.log(`tests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(status);
