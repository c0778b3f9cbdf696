import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileGroup, laneCount, longestFirst, planLanes, readEstimates, runInLanes, testStages, tierFiles, withTierEstimates } from './lanes.mjs';

const jobs = (...names: string[]) => names.map((name) => ({ name }));

describe('test jobs over N lanes, longest first', () => {
  it('reads the lane count: default 2, a whole number from 1 to 8, else an error naming the variable and its default', () => {
    expect(laneCount(undefined)).toBe(2);
    expect(laneCount('')).toBe(2);
    expect(laneCount('1')).toBe(1);
    expect(laneCount('2')).toBe(2);
    for (const bad of ['0', '9', '1.5', 'two', '-1']) expect(() => laneCount(bad)).toThrow(`PROVISIONER_TEST_LANES=${bad}: expected a whole number from 1 to 8 (how many test processes run at once; default 2)`);
  });

  it('orders jobs longest first; a job with no estimate counts as the longest known; ties by name', () => {
    const order = longestFirst(jobs('a', 'b', 'new', 'c', 'd'), { a: 10, b: 30, c: 20, d: 20 }).map((job) => job.name);
    expect(order).toEqual(['b', 'new', 'c', 'd', 'a']);
  });

  it('starts the unit and go tiers before any file, however short they are', () => {
    const pool = [{ name: 'test/e2e/long.test.ts', tier: 'e2e' }, { name: 'go', tier: 'go' }, { name: 'unit', tier: 'unit' }, { name: 'test/e2e/short.test.ts', tier: 'e2e' }];
    const order = longestFirst(pool, { 'test/e2e/long.test.ts': 300, 'test/e2e/short.test.ts': 5, go: 130, unit: 110 }).map((job) => job.name);
    expect(order).toEqual(['go', 'unit', 'test/e2e/long.test.ts', 'test/e2e/short.test.ts']);
    // On two lanes the file takes the lane unit frees, while go still runs.
    const plan = planLanes(pool, 2, { 'test/e2e/long.test.ts': 300, 'test/e2e/short.test.ts': 5, go: 130, unit: 110 });
    expect(plan.lanes).toEqual([
      { jobs: ['go', 'test/e2e/short.test.ts'], seconds: 135 },
      { jobs: ['unit', 'test/e2e/long.test.ts'], seconds: 410 },
    ]);
  });

  it('plans each job on the lane that frees first and gives the longest lane as the wall time', () => {
    const plan = planLanes(jobs('a', 'b', 'c', 'd', 'e'), 2, { a: 50, b: 40, c: 30, d: 20, e: 10 });
    expect(plan.lanes).toEqual([
      { jobs: ['a', 'd', 'e'], seconds: 80 },
      { jobs: ['b', 'c'], seconds: 70 },
    ]);
    expect(plan.seconds).toBe(80);
    expect(planLanes(jobs('a', 'b'), 1, { a: 5, b: 7 })).toEqual({ lanes: [{ jobs: ['b', 'a'], seconds: 12 }], seconds: 12 });
  });

  it('runs at most N jobs at once, longest first, a freed lane taking the next; results in the order of the jobs', async () => {
    let running = 0;
    let most = 0;
    const started: string[] = [];
    const lanesUsed = new Set<number>();
    const results = await runInLanes(jobs('short', 'long', 'mid', 'tiny'), 2, { short: 2, long: 9, mid: 5, tiny: 1 }, async (job, lane) => {
      running += 1;
      most = Math.max(most, running);
      started.push(job.name);
      lanesUsed.add(lane);
      await new Promise((resolve) => setTimeout(resolve, 5));
      running -= 1;
      return `${job.name} done`;
    });
    expect(most).toBe(2);
    expect(started).toEqual(['long', 'mid', 'short', 'tiny']);
    expect([...lanesUsed].sort()).toEqual([1, 2]);
    expect(results).toEqual(['short done', 'long done', 'mid done', 'tiny done']);
  });

  it('plans jobs of one group one after another: a lane takes the longest job whose group is free, or waits', () => {
    const hosts = (name: string) => ({ name, group: 'hosts' });
    const plan = planLanes([hosts('h1'), hosts('h2'), { name: 'm' }], 2, { h1: 50, h2: 40, m: 10 });
    expect(plan.lanes).toEqual([
      { jobs: ['h1', 'h2'], seconds: 90 },
      { jobs: ['m'], seconds: 50 },
    ]);
    expect(plan.seconds).toBe(90);
  });

  it('never runs two jobs of one group at once; the other lane goes on with jobs of no group', async () => {
    const running = new Set<string>();
    const together: string[][] = [];
    const order: string[] = [];
    const jobs = [{ name: 'h1', group: 'hosts' }, { name: 'h2', group: 'hosts' }, { name: 'h3', group: 'hosts' }, { name: 'a' }, { name: 'b' }];
    await runInLanes(jobs, 2, { h1: 9, h2: 8, h3: 7, a: 1, b: 1 }, async (job) => {
      running.add(job.name);
      order.push(job.name);
      together.push([...running].sort());
      await new Promise((resolve) => setTimeout(resolve, job.group ? 20 : 5));
      running.delete(job.name);
    });
    expect(order.slice(0, 2)).toEqual(['h1', 'a']);
    expect(order.sort()).toEqual(['a', 'b', 'h1', 'h2', 'h3']);
    for (const set of together) expect(set.filter((name) => name.startsWith('h')).length, set.join(' ')).toBeLessThanOrEqual(1);
  });

  const root = path.resolve(import.meta.dirname, '../..');
  const allTiers = ['unit', 'go', 'integration', 'e2e', 'conformance'];

  it('runs unit, go and every integration, e2e and conformance file as jobs of one pool; at one lane each tier whole, one after another', () => {
    const filesOf = (tier: string) => [`test/${tier}/a.test.ts`, `test/${tier}/hosts-b.test.ts`];
    const two = testStages(allTiers, 2, filesOf);
    expect(two.map((stage) => stage.tiers)).toEqual([allTiers]);
    expect(two[0]!.jobs.slice(0, 2).map((job) => job.name)).toEqual(['unit', 'go']);
    expect(two[0]!.jobs.slice(2)).toEqual([
      { name: 'test/integration/a.test.ts', tier: 'integration', group: undefined, args: ['test/integration/a.test.ts'] },
      { name: 'test/integration/hosts-b.test.ts', tier: 'integration', group: undefined, args: ['test/integration/hosts-b.test.ts'] },
      { name: 'test/e2e/a.test.ts', tier: 'e2e', group: undefined, args: ['test/e2e/a.test.ts'] },
      { name: 'test/e2e/hosts-b.test.ts', tier: 'e2e', group: 'kubelets', args: ['test/e2e/hosts-b.test.ts'] },
      { name: 'test/conformance/a.test.ts', tier: 'conformance', group: 'kubelets', args: ['test/conformance/a.test.ts'] },
      { name: 'test/conformance/hosts-b.test.ts', tier: 'conformance', group: 'kubelets', args: ['test/conformance/hosts-b.test.ts'] },
    ]);
    const one = testStages(allTiers, 1, filesOf);
    expect(one.map((stage) => stage.jobs.map((job) => job.name))).toEqual(allTiers.map((tier) => [tier]));
    expect(one[2]!.jobs[0]).toEqual({ name: 'integration', tier: 'integration', group: undefined, args: [], files: filesOf('integration') });
    // Tiers named share the pool too; e2e alone is still one job per file.
    expect(testStages(['go', 'e2e'], 2, filesOf).map((stage) => stage.tiers)).toEqual([['go', 'e2e']]);
    expect(testStages(['e2e'], 2, filesOf)[0]!.jobs.map((job) => job.name)).toEqual(filesOf('e2e'));
    // At one lane a whole per-file tier is estimated as the sum of its files.
    expect(withTierEstimates(one, { 'test/e2e/a.test.ts': 5, 'test/e2e/hosts-b.test.ts': 7, unit: 3 })).toMatchObject({ unit: 3, e2e: 12, integration: 0 });
    expect(fileGroup('test/e2e/hosts.test.ts')).toBe('kubelets');
    expect(fileGroup('test/e2e/support/hosts.test.ts')).toBeUndefined();
    expect(fileGroup('test/integration/hosts-registration.test.ts')).toBeUndefined();
    // The files that move in-memory clusters, one at a time: a moved cluster's port is free for a moment.
    for (const file of ['test/integration/pivot.test.ts', 'test/integration/pivot-self.test.ts', 'test/integration/pivot-back.test.ts', 'test/e2e/pivot.test.ts']) expect(fileGroup(file), file).toBe('in-memory moves');
    expect(fileGroup('test/e2e/create-cluster.test.ts')).toBeUndefined();
  });

  it('has an estimate for every integration, e2e and conformance file and for the unit and go tiers (a file missing one is scheduled as the longest)', () => {
    const estimates = readEstimates(path.join(root, 'scripts/ci/test-times.json'));
    const files = ['integration', 'e2e', 'conformance'].flatMap((tier) => tierFiles(root, tier));
    expect(files.filter((file) => estimates[file] === undefined)).toEqual([]);
    expect(Object.keys(estimates).filter((name) => !files.includes(name) && !['unit', 'go'].includes(name))).toEqual([]);
  });

  it('plans the real suite at two lanes under 35 minutes by its estimates, every tier in one pool', () => {
    const estimates = readEstimates(path.join(root, 'scripts/ci/test-times.json'));
    const stages = testStages(allTiers, 2, (tier) => tierFiles(root, tier));
    expect(stages).toHaveLength(1);
    const plan = planLanes(stages[0]!.jobs, 2, estimates);
    expect(plan.seconds, `estimated ${Math.round(plan.seconds)} s`).toBeLessThan(35 * 60);
    // The two lanes end within the longest job's estimate of each other, and begin with unit and go.
    const [a, b] = plan.lanes;
    expect(Math.abs(a!.seconds - b!.seconds)).toBeLessThan(Math.max(...Object.values(estimates)));
    expect([a!.jobs[0], b!.jobs[0]].sort()).toEqual(['go', 'unit']);
    expect(plan.lanes.flatMap((lane) => lane.jobs).filter((job) => job.startsWith('test/integration/'))).toHaveLength(tierFiles(root, 'integration').length);
  });
});
