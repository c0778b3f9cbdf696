// Types of lanes.mjs, which run-tests.mjs imports with plain Node (no build step).

export interface Job {
  /** A test file relative to the repository, or a tier's name. */
  name: string;
  /** Jobs of one group never run at once. Default: none (no limit). */
  group?: string;
}

export interface LanePlan {
  lanes: { jobs: string[]; seconds: number }[];
  /** The longest lane's estimated seconds. */
  seconds: number;
}

export const lanesVariable: string;
export const defaultLanes: number;
export function laneCount(value: string | undefined): number;
export function readEstimates(file: string): Record<string, number>;
export function longestFirst<T extends Job>(jobs: readonly T[], estimates: Readonly<Record<string, number>>): T[];
export function planLanes(jobs: readonly Job[], lanes: number, estimates: Readonly<Record<string, number>>): LanePlan;
export function runInLanes<T extends Job, R>(jobs: readonly T[], lanes: number, estimates: Readonly<Record<string, number>>, run: (job: T, lane: number) => Promise<R>): Promise<R[]>;

/** A job of a test stage: a tier run whole, or one file of a per-file tier. */
export interface TestJob extends Job {
  tier: string;
  /** The vitest arguments narrowing the tier to this job (the file), or none. */
  args: string[];
  /** A per-file tier run whole (one lane): its files, whose estimates it sums. */
  files?: string[];
}

export interface TestStage {
  tiers: string[];
  jobs: TestJob[];
}

export const leadingTiers: ReadonlySet<string>;
export const perFileTiers: ReadonlySet<string>;
export function fileGroup(file: string): string | undefined;
export function tierFiles(root: string, tier: string): string[];
export function testStages(tiers: readonly string[], lanes: number, filesOf: (tier: string) => string[]): TestStage[];
export function withTierEstimates(stages: readonly TestStage[], estimates: Readonly<Record<string, number>>): Record<string, number>;
