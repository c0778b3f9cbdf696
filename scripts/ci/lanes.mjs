// Test jobs over N lanes, longest first: run-tests.mjs runs a tier's files (or whole tiers) as
// separate vitest or go processes, at most N at once, each lane taking the longest job left
// when it frees. Estimates are the last measured times (test-times.json); a job with none
// counts as the longest known, so a new file starts early instead of stretching the tail.
// Jobs of one `group` never run at once: a lane that frees takes the longest job whose group
// is not running, and waits when only such jobs are left.
import { readdirSync, readFileSync } from 'node:fs';

/** The variable that sets the lane count. */
export const lanesVariable = 'PROVISIONER_TEST_LANES';

/**
 * The lane count when the variable is unset: 2, measured on the 2-core CI machine (a quiet fresh-clone run:
 * 36.5 min with two lanes against 57 min one at a time; docs/testing.md). 1 runs every tier as one process.
 */
export const defaultLanes = 2;

/** The lane count from `value` (the variable's text): `defaultLanes` when unset; a positive integer up to 8, else an error naming the variable. */
export function laneCount(value) {
  if (value === undefined || value === '') return defaultLanes;
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > 8) {
    throw new Error(`${lanesVariable}=${value}: expected a whole number from 1 to 8 (how many test processes run at once; default ${defaultLanes})`);
  }
  return count;
}

/**
 * Tiers whose jobs start before the pool's others, whatever their length: the quick ones, so a
 * broken unit or Go test shows within minutes of the start.
 */
export const leadingTiers = new Set(['unit', 'go']);

/** The tiers whose files each run as a job (a vitest process) of their own when lanes > 1. */
export const perFileTiers = new Set(['integration', 'e2e', 'conformance']);

/**
 * The group of a test file whose jobs never run at once, or undefined:
 * - `kubelets`: the files that run kubelets on namespace hosts (test/e2e/hosts*.test.ts, the
 *   conformance cluster). Their kubelets, containerds and API servers hold inotify instances
 *   (about 7 a kubelet), of which a user has fs.inotify.max_user_instances (128 by default), and
 *   a controller that finds none left exits with "too many open files" (seen with other
 *   sessions' clusters running).
 * - `in-memory moves`: the files that move in-memory clusters between control planes
 *   (test/integration/pivot*.test.ts, test/e2e/pivot.test.ts). A moved cluster keeps its port,
 *   which is free between the source's fence and the target's listen; the integration files
 *   seed about 30 clusters in all (a port each), and e2e/pivot.test.ts reads its moved cluster's API there, so
 *   they do not run beside each other (docs/testing.md, "In-memory clusters at once").
 */
export function fileGroup(file) {
  if (/^test\/e2e\/hosts[^/]*\.test\.ts$/.test(file) || file.startsWith('test/conformance/')) return 'kubelets';
  if (/^test\/integration\/pivot[^/]*\.test\.ts$/.test(file) || file === 'test/e2e/pivot.test.ts') return 'in-memory moves';
  return undefined;
}

/** A per-file tier's test files (its vitest project's include: test/<tier>/**\/*.test.ts) under `root`, relative to it, sorted. */
export function tierFiles(root, tier) {
  return readdirSync(`${root}/test/${tier}`, { recursive: true })
    .filter((name) => String(name).endsWith('.test.ts'))
    .map((name) => `test/${tier}/${name}`)
    .sort();
}

/**
 * The stages `tiers` run in, in order, each with its jobs ({ name, tier, group, args }): at one
 * lane every tier is a stage and a job of its own (one vitest or go process); with more, every
 * tier shares one stage, a pool, so no lane waits at a tier's end for the other's last job (a
 * cold go tier, compiling staticcheck and the provider's tests, ran minutes past the unit tier
 * while the other lane sat idle) and the integration files fill the lanes beside the e2e files;
 * each file of a `perFileTiers` tier is a job there. `filesOf(tier)` lists a tier's files.
 */
export function testStages(tiers, lanes, filesOf) {
  const stages = lanes > 1 ? [{ tiers: [...tiers] }] : tiers.map((tier) => ({ tiers: [tier] }));
  return stages.map(({ tiers: stageTiers }) => ({
    tiers: stageTiers,
    jobs: stageTiers.flatMap((tier) =>
      lanes > 1 && perFileTiers.has(tier)
        ? filesOf(tier).map((file) => ({ name: file, tier, group: fileGroup(file), args: [file] }))
        : [{ name: tier, tier, group: undefined, args: [], ...(perFileTiers.has(tier) ? { files: filesOf(tier) } : {}) }],
    ),
  }));
}

/**
 * `estimates` with one for each whole-tier job of `stages` that has none and lists its `files`
 * (a per-file tier run as one process, at one lane): the sum of its files' estimates.
 */
export function withTierEstimates(stages, estimates) {
  const added = { ...estimates };
  for (const job of stages.flatMap((stage) => stage.jobs)) {
    if (added[job.name] === undefined && job.files) added[job.name] = job.files.reduce((sum, file) => sum + (estimates[file] ?? 0), 0);
  }
  return added;
}

/** The last measured seconds per job name (a test file relative to the repository, or a tier's name), from `file`. */
export function readEstimates(file) {
  return JSON.parse(readFileSync(file, 'utf8')).seconds ?? {};
}

/**
 * `jobs` ({ name, tier? }) in the order lanes take them: a `leadingTiers` job first, then longest
 * first by `estimates` (seconds by name); a job with no estimate counts as the longest known; ties by name.
 */
export function longestFirst(jobs, estimates) {
  const longest = Math.max(0, ...Object.values(estimates));
  const seconds = (job) => estimates[job.name] ?? longest;
  const rank = (job) => (leadingTiers.has(job.tier) ? 0 : 1);
  return [...jobs].sort((a, b) => rank(a) - rank(b) || seconds(b) - seconds(a) || a.name.localeCompare(b.name));
}

/**
 * What the scheduler will do if every job takes its estimate: each lane's jobs in order and
 * its estimated seconds (waits included), and the estimated wall time (the longest lane).
 */
export function planLanes(jobs, lanes, estimates) {
  const longest = Math.max(0, ...Object.values(estimates));
  const queue = longestFirst(jobs, estimates);
  const plan = Array.from({ length: Math.min(lanes, Math.max(1, jobs.length)) }, () => ({ jobs: [], seconds: 0 }));
  /** Each planned job's group and [start, end). */
  const placed = [];
  while (queue.length > 0) {
    const lane = plan.reduce((free, candidate) => (candidate.seconds < free.seconds ? candidate : free));
    const now = lane.seconds;
    const busy = (job) => job.group !== undefined && placed.some((p) => p.group === job.group && p.start <= now && now < p.end);
    const index = queue.findIndex((job) => !busy(job));
    if (index < 0) {
      // Every job left waits for its group: this lane frees when the first of those ends.
      lane.seconds = Math.min(...placed.filter((p) => p.end > now && queue.some((job) => job.group === p.group)).map((p) => p.end));
      continue;
    }
    const [job] = queue.splice(index, 1);
    const seconds = estimates[job.name] ?? longest;
    placed.push({ group: job.group, start: now, end: now + seconds });
    lane.jobs.push(job.name);
    lane.seconds = now + seconds;
  }
  return { lanes: plan, seconds: Math.max(0, ...plan.map((lane) => lane.seconds)) };
}

/**
 * Runs `jobs` longest first over `lanes` lanes: `run(job, lane)` (lane numbered from 1) starts
 * as soon as a lane is free and no job of its `group` runs. Resolves to each job's result, in
 * the order of `jobs`.
 */
export async function runInLanes(jobs, lanes, estimates, run) {
  const queue = longestFirst(jobs, estimates);
  const results = new Map();
  const running = new Set();
  /** Resolvers of lanes waiting for a group to free. */
  let waiting = [];
  const next = async () => {
    for (;;) {
      const index = queue.findIndex((job) => job.group === undefined || ![...running].some((other) => other.group === job.group));
      if (index >= 0) {
        const [job] = queue.splice(index, 1);
        running.add(job);
        return job;
      }
      if (queue.length === 0) return undefined;
      await new Promise((resolve) => waiting.push(resolve));
    }
  };
  const lane = async (number) => {
    for (let job = await next(); job !== undefined; job = await next()) {
      try {
        results.set(job, await run(job, number));
      } finally {
        running.delete(job);
        const woken = waiting;
        waiting = [];
        for (const resolve of woken) resolve();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(lanes, jobs.length) }, (_, index) => lane(index + 1)));
  return jobs.map((job) => results.get(job));
}
