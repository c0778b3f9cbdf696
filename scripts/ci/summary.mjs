// Prints vitest's JSON report as one plain closing line: "tests: N passed, N failed".
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? 'test-results.json';
let report;
try {
  report = JSON.parse(readFileSync(file, 'utf8'));
} catch {
  console.log('tests: 0 passed, 1 failed (no test report was written)');
  process.exit(0);
}
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed${skipped ? `, ${skipped} skipped` : ''}`);
