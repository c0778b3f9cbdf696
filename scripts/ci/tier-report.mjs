// The per-tier report run-tests.mjs prints above its closing line: each tier's counts, its
// wall time and its slowest files (go: packages), so a tier that grows slow shows in every
// CI log, with the file to look at.
import { relative } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

/** How many of a tier's slowest files the report names. */
export const slowestShown = 5;

/** The `count` longest of `durations` ({ name, ms }), longest first. */
function slowest(durations, count = slowestShown) {
  return [...durations].sort((a, b) => b.ms - a.ms || a.name.localeCompare(b.name)).slice(0, count);
}

/**
 * A vitest tier's summary from its JSON report (`--reporter=json`): the counts, and each
 * file's time from its startTime/endTime, named relative to `cwd`.
 */
export function vitestTierSummary(tier, report, wallMs, cwd) {
  const files = (report.testResults ?? [])
    .filter((file) => typeof file.startTime === 'number' && typeof file.endTime === 'number')
    .map((file) => ({ name: relative(cwd, file.name), ms: Math.max(0, file.endTime - file.startTime) }));
  return {
    tier,
    passed: report.numPassedTests ?? 0,
    failed: report.numFailedTests ?? 0,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
    wallMs,
    slowest: slowest(files),
  };
}

/** The go tier's slowest packages, from `go test -json`'s package-level pass/fail events (Elapsed in seconds). */
export function slowestGoPackages(events) {
  const packages = events
    .filter((event) => event.Test === undefined && (event.Action === 'pass' || event.Action === 'fail') && typeof event.Elapsed === 'number')
    .map((event) => ({ name: event.Package, ms: Math.round(event.Elapsed * 1000) }));
  return slowest(packages);
}

/** How many lines of a failing test's message the closing list repeats: its first and its last. */
const gistHead = 2;
const gistTail = 4;

/**
 * A failing test's message (vitest's `failureMessages[0]`, stack included) in a few lines for
 * the closing list: without colour codes and stack frames, its first `gistHead` and last
 * `gistTail` lines (where `expect(value, output)` puts "expected 1 to be 6" after the output),
 * each cut at 300 characters and indented under the failure's name. The tail of a CI log, all
 * some readers see, then says why and not only what.
 */
export function failureGist(message) {
  const lines = stripVTControlCharacters(message ?? '')
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== '' && !/^\s+at /.test(line));
  const kept = lines.length <= gistHead + gistTail ? lines : [...lines.slice(0, gistHead), '…', ...lines.slice(-gistTail)];
  return kept.map((line) => `      ${line.length > 300 ? `${line.slice(0, 300)}…` : line}`);
}

/** Seconds with one decimal: "12.3 s". */
export function formatSeconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

/**
 * The report's lines: per tier, "tier unit: 812 passed, 0 failed, 2 skipped in 112.4 s", then
 * its slowest files, one a line with the time right-aligned. No line starts with "tests:",
 * which belongs to the closing line alone.
 */
export function formatTierReport(summaries) {
  const lines = [];
  for (const summary of summaries) {
    lines.push(`tier ${summary.tier}: ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped in ${formatSeconds(summary.wallMs)}${summary.note ? ` (${summary.note})` : ''}`);
    const width = Math.max(0, ...summary.slowest.map((file) => formatSeconds(file.ms).length));
    for (const file of summary.slowest) lines.push(`  ${formatSeconds(file.ms).padStart(width)}  ${file.name}`);
  }
  return lines;
}
