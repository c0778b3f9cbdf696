// Types of tier-report.mjs, which run-tests.mjs imports with plain Node (no build step).

export interface FileTime {
  /** A test file relative to the repository, or a Go package. */
  name: string;
  ms: number;
}

export interface TierSummary {
  tier: string;
  passed: number;
  failed: number;
  skipped: number;
  wallMs: number;
  /** Longest first, at most `slowestShown`. */
  slowest: FileTime[];
  /** Why the counts may be short (no report written). Default none. */
  note?: string;
}

/** The parts of vitest's JSON report the summary reads. */
export interface VitestJsonReport {
  numPassedTests?: number;
  numFailedTests?: number;
  numPendingTests?: number;
  numTodoTests?: number;
  testResults?: { name: string; startTime?: number; endTime?: number }[];
}

/** One line of `go test -json`. */
export interface GoTestEvent {
  Action: string;
  Package: string;
  Test?: string;
  Elapsed?: number;
}

export const slowestShown: number;
export function failureGist(message: string | undefined): string[];
export function vitestTierSummary(tier: string, report: VitestJsonReport, wallMs: number, cwd: string): TierSummary;
export function slowestGoPackages(events: readonly GoTestEvent[]): FileTime[];
export function formatSeconds(ms: number): string;
export function formatTierReport(summaries: readonly TierSummary[]): string[];
