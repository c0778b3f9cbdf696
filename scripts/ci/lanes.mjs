// Test jobs over N lanes, longest first: run-tests.mjs runs a tier's files (or whole tiers) as
// separate vitest or go processes, at most N at once, each lane taking the longest job left
// when it frees. Estimates are the last measured times (test-times.json); a job with none
// counts as the longest known, so a new file starts early instead of stretching the tail.
import { readFileSync } from 'node:fs';

/** The variable that sets the lane count. */
export const lanesVariable = 'PROVISIONER_TEST_LANES';

/** The lane count from `value` (the variable's text): default 1; a positive integer up to 8, else an error naming the variable. */
export function laneCount(value) {
  if (value === undefined || value === '') return 1;
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > 8) {
    throw new Error(`${lanesVariable}=${value}: expected a whole number from 1 to 8 (how many test processes run at once; default 1)`);
  }
  return count;
}

/** The last measured seconds per job name (a test file relative to the repository, or a tier's name), from `file`. */
export function readEstimates(file) {
  return JSON.parse(readFileSync(file, 'utf8')).seconds ?? {};
}

/** `jobs` ({ name }) longest first by `estimates` (seconds by name); a job with no estimate counts as the longest known; ties by name. */
export function longestFirst(jobs, estimates) {
  const longest = Math.max(0, ...Object.values(estimates));
  const seconds = (job) => estimates[job.name] ?? longest;
  return [...jobs].sort((a, b) => seconds(b) - seconds(a) || a.name.localeCompare(b.name));
}

/**
 * What the scheduler will do if every job takes its estimate: each lane's jobs in order and
 * its estimated seconds, and the estimated wall time (the longest lane).
 */
export function planLanes(jobs, lanes, estimates) {
  const longest = Math.max(0, ...Object.values(estimates));
  const plan = Array.from({ length: lanes }, () => ({ jobs: [], seconds: 0 }));
  for (const job of longestFirst(jobs, estimates)) {
    const lane = plan.reduce((free, candidate) => (candidate.seconds < free.seconds ? candidate : free));
    lane.jobs.push(job.name);
    lane.seconds += estimates[job.name] ?? longest;
  }
  return { lanes: plan, seconds: Math.max(0, ...plan.map((lane) => lane.seconds)) };
}

/**
 * Runs `jobs` longest first over `lanes` lanes: `run(job, lane)` (lane numbered from 1) starts
 * as soon as a lane is free. Resolves to each job's result, in the order of `jobs`.
 */
export async function runInLanes(jobs, lanes, estimates, run) {
  const queue = longestFirst(jobs, estimates);
  const results = new Map();
  const lane = async (number) => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) results.set(job, await run(job, number));
  };
  await Promise.all(Array.from({ length: Math.min(lanes, jobs.length) }, (_, index) => lane(index + 1)));
  return jobs.map((job) => results.get(job));
}
