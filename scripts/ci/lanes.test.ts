import path from 'node:path';
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { laneCount, longestFirst, planLanes, readEstimates, runInLanes } from './lanes.mjs';

const jobs = (...names: string[]) => names.map((name) => ({ name }));

describe('test jobs over N lanes, longest first', () => {
  it('reads the lane count: default 1, a whole number from 1 to 8, else an error naming the variable and its default', () => {
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

  it('has an estimate for every e2e and conformance file and for the unit and go tiers (a file missing one is scheduled as the longest)', () => {
    const root = path.resolve(import.meta.dirname, '../..');
    const estimates = readEstimates(path.join(root, 'scripts/ci/test-times.json'));
    const files = ['test/e2e', 'test/conformance'].flatMap((dir) => readdirSync(path.join(root, dir)).filter((name) => name.endsWith('.test.ts')).map((name) => `${dir}/${name}`));
    expect(files.filter((file) => estimates[file] === undefined)).toEqual([]);
    expect(Object.keys(estimates).filter((name) => !files.includes(name) && !['unit', 'go'].includes(name))).toEqual([]);
  });
});
