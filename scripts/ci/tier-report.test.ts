import { describe, expect, it } from 'vitest';
import { failureGist, formatTierReport, slowestGoPackages, vitestTierSummary, type GoTestEvent } from './tier-report.mjs';

describe('the per-tier report above the closing line', () => {
  it('counts a vitest tier and names its five slowest files, longest first, relative to the repository', () => {
    const file = (name: string, seconds: number) => ({ name: `/repo/test/${name}`, startTime: 1_000, endTime: 1_000 + seconds * 1000 });
    const report = {
      numPassedTests: 12,
      numFailedTests: 1,
      numPendingTests: 2,
      numTodoTests: 1,
      testResults: [file('a.test.ts', 3), file('b.test.ts', 40), file('c.test.ts', 1), file('d.test.ts', 7), file('e.test.ts', 12), file('f.test.ts', 5), { name: '/repo/test/unloaded.test.ts' }],
    };
    const summary = vitestTierSummary('integration', report, 71_250, '/repo');
    expect(summary).toMatchObject({ tier: 'integration', passed: 12, failed: 1, skipped: 3, wallMs: 71_250 });
    expect(summary.slowest.map((f) => [f.name, f.ms])).toEqual([
      ['test/b.test.ts', 40_000],
      ['test/e.test.ts', 12_000],
      ['test/d.test.ts', 7_000],
      ['test/f.test.ts', 5_000],
      ['test/a.test.ts', 3_000],
    ]);
  });

  it('times the go tier by package, from the package-level events only', () => {
    const events: GoTestEvent[] = [
      { Action: 'pass', Package: 'p/agent', Test: 'TestSlow', Elapsed: 99 },
      { Action: 'pass', Package: 'p/agent', Elapsed: 4.2 },
      { Action: 'fail', Package: 'p/integration', Elapsed: 61.05 },
      { Action: 'skip', Package: 'p/api' },
      { Action: 'output', Package: 'p/api' },
    ];
    expect(slowestGoPackages(events)).toEqual([
      { name: 'p/integration', ms: 61_050 },
      { name: 'p/agent', ms: 4_200 },
    ]);
  });

  it('prints one line per tier and one per slow file, none of them mistakable for the closing line', () => {
    const lines = formatTierReport([
      { tier: 'unit', passed: 800, failed: 0, skipped: 2, wallMs: 112_430, slowest: [{ name: 'src/cli/startup.test.ts', ms: 14_200 }, { name: 'src/a.test.ts', ms: 900 }] },
      { tier: 'e2e', passed: 0, failed: 1, skipped: 0, wallMs: 1_000, slowest: [], note: 'wrote no report' },
    ]);
    expect(lines).toEqual([
      'tier unit: 800 passed, 0 failed, 2 skipped in 112.4 s',
      '  14.2 s  src/cli/startup.test.ts',
      '   0.9 s  src/a.test.ts',
      'tier e2e: 0 passed, 1 failed, 0 skipped in 1.0 s (wrote no report)',
    ]);
    expect(lines.some((line) => /^tests: \d+ passed, \d+ failed/.test(line))).toBe(false);
  });

  it("repeats a failing test's first and last message lines, without colours or stack frames, so the log's tail says why", () => {
    const output = Array.from({ length: 9 }, (_, i) => `create cluster line ${i + 1}`).join('\n');
    const stack = `AssertionError: ${output}: \u001b[32mexpected 1 to be 6\u001b[39m // Object.is equality\n    at file.test.ts:563:36\n    at processTicksAndRejections (node:internal)`;
    expect(failureGist(stack)).toEqual([
      '      AssertionError: create cluster line 1',
      '      create cluster line 2',
      '      …',
      '      create cluster line 6',
      '      create cluster line 7',
      '      create cluster line 8',
      '      create cluster line 9: expected 1 to be 6 // Object.is equality',
    ]);
    expect(failureGist('Error: Test timed out in 5000ms.\n    at x')).toEqual(['      Error: Test timed out in 5000ms.']);
    expect(failureGist(undefined)).toEqual([]);
    expect(failureGist(`x${'y'.repeat(400)}`)[0]).toHaveLength(6 + 300 + 1);
  });
});
