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
