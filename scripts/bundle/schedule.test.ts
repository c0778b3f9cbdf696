import { describe, expect, it } from 'vitest';
import { buildFamilies, runFamilies } from './schedule.js';

const family = (name: string): string => name.split('-')[0]!;

describe('buildFamilies', () => {
  it('groups by family, keeps the order within one, and puts the largest family first', () => {
    expect(buildFamilies(['etcd', 'k36-kube', 'k35-capa', 'k36-capi', 'k35-capv', 'k36-e2e'], family)).toEqual([
      ['k36-kube', 'k36-capi', 'k36-e2e'],
      ['k35-capa', 'k35-capv'],
      ['etcd'],
    ]);
  });
});

/** A build that takes `ms` and records when it ran. */
function recorder(ms: Record<string, number>, fail?: string) {
  const events: string[] = [];
  let running = 0;
  let mostAtOnce = 0;
  const run = async (name: string): Promise<void> => {
    running += 1;
    mostAtOnce = Math.max(mostAtOnce, running);
    events.push(`start ${name}`);
    await new Promise((resolve) => setTimeout(resolve, ms[name] ?? 1));
    running -= 1;
    events.push(`end ${name}`);
    if (name === fail) throw new Error(`${name} failed`);
  };
  return { run, events, mostAtOnce: () => mostAtOnce };
}

describe('runFamilies', () => {
  it('runs a family in order on one worker while the other worker takes the next families', async () => {
    const r = recorder({ 'k36-kube': 40, 'k36-capi': 40, 'k35-capa': 10, 'k35-capv': 10, etcd: 10 });
    await runFamilies([['k36-kube', 'k36-capi'], ['k35-capa', 'k35-capv'], ['etcd']], 2, r.run);
    expect(r.mostAtOnce()).toBe(2);
    // Within a family one after another: capi starts only once kube ended.
    expect(r.events.indexOf('start k36-capi')).toBeGreaterThan(r.events.indexOf('end k36-kube'));
    // The second worker did both small families while the first still built the large one.
    expect(r.events.indexOf('end etcd')).toBeLessThan(r.events.indexOf('end k36-capi'));
    expect(r.events.filter((e) => e.startsWith('start'))).toHaveLength(5);
  });

  it('with one worker runs everything one after another', async () => {
    const r = recorder({});
    await runFamilies([['a', 'b'], ['c']], 1, r.run);
    expect(r.mostAtOnce()).toBe(1);
    expect(r.events).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('after a failure starts nothing new, lets the running build end, and throws the failure', async () => {
    const r = recorder({ 'k36-kube': 30, 'k35-capa': 5 }, 'k35-capa');
    await expect(runFamilies([['k36-kube', 'k36-capi'], ['k35-capa', 'k35-capv'], ['etcd']], 2, r.run)).rejects.toThrow('k35-capa failed');
    expect(r.events).toContain('end k36-kube');
    for (const never of ['k36-capi', 'k35-capv', 'etcd']) expect(r.events).not.toContain(`start ${never}`);
  });
});
