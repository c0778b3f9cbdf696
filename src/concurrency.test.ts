import { describe, expect, it } from 'vitest';
import { backoffDelay, defaultRetryPolicy, mapLimit, withRetry, type Sleep } from './concurrency.js';

describe('backoff', () => {
  it('doubles from the initial delay up to the ceiling', () => {
    const policy = { maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 500 };
    expect([1, 2, 3, 4, 5].map((a) => backoffDelay(policy, a))).toEqual([100, 200, 400, 500, 500]);
    expect(defaultRetryPolicy.maxAttempts).toBeGreaterThan(1);
  });
});

describe('withRetry', () => {
  const policy = { maxAttempts: 4, initialDelayMs: 10, maxDelayMs: 1000 };

  it('retries retryable errors with backoff until success', async () => {
    const waits: number[] = [];
    const sleep: Sleep = async (ms) => void waits.push(ms);
    let calls = 0;
    const result = await withRetry(async () => {
      calls += 1;
      if (calls < 3) throw new Error('transient');
      return 'ok';
    }, { policy, sleep, isRetryable: () => true });
    expect(result).toEqual({ ok: true, value: 'ok', attempts: 3 });
    expect(waits).toEqual([10, 20]);
  });

  it('waits what the server asks (Retry-After) instead of the backoff, at most the ceiling', async () => {
    const waits: number[] = [];
    const sleep: Sleep = async (ms) => void waits.push(ms);
    const asked = [30, undefined, 5_000];
    await withRetry(async () => { throw new Error('busy'); }, { policy, sleep, isRetryable: () => true, retryAfterMs: () => asked[waits.length] });
    expect(waits).toEqual([30, 20, 1000]);
  });

  it('gives up after maxAttempts, and at once on a final error', async () => {
    const sleep: Sleep = async () => {};
    const exhausted = await withRetry(async () => { throw new Error('x'); }, { policy, sleep, isRetryable: () => true });
    expect(exhausted.ok).toBe(false);
    expect(exhausted.attempts).toBe(4);
    const final = await withRetry(async () => { throw new Error('x'); }, { policy, sleep, isRetryable: () => false });
    expect(final.attempts).toBe(1);
  });

  it('stops when the wait is aborted, keeping the last error', async () => {
    const controller = new AbortController();
    const sleep: Sleep = async () => {
      controller.abort();
    };
    const result = await withRetry(async () => { throw new Error('server down'); }, { policy, sleep, signal: controller.signal, isRetryable: () => true });
    expect(result).toMatchObject({ ok: false, attempts: 1 });
    expect(!result.ok && (result.error as Error).message).toBe('server down');
  });
});

describe('mapLimit', () => {
  it('never runs more than the limit at once, and runs every item', async () => {
    let inFlight = 0;
    let max = 0;
    const seen: number[] = [];
    await mapLimit([...Array(20).keys()], 3, async (item) => {
      inFlight += 1;
      max = Math.max(max, inFlight);
      await new Promise((r) => setTimeout(r, 1));
      seen.push(item);
      inFlight -= 1;
    });
    expect(max).toBe(3);
    expect(seen.sort((a, b) => a - b)).toEqual([...Array(20).keys()]);
  });

  it('answers the results in the items\' order', async () => {
    expect(await mapLimit([30, 10, 20], 3, async (ms, index) => {
      await new Promise((r) => setTimeout(r, ms));
      return `${index}:${ms}`;
    })).toEqual(['0:30', '1:10', '2:20']);
  });

  it('starts nothing new once a call has failed, and rejects with that failure', async () => {
    const seen: number[] = [];
    const run = mapLimit([1, 2, 3, 4], 2, async (item) => {
      seen.push(item);
      if (item === 1) await new Promise((r) => setTimeout(r, 5)); // still running when item 2 fails
      if (item === 2) throw new Error('item 2 failed');
    });
    await expect(run).rejects.toThrow('item 2 failed');
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([1, 2]);
  });

  it('starts nothing new once aborted', async () => {
    const controller = new AbortController();
    const seen: number[] = [];
    await mapLimit([1, 2, 3, 4], 1, async (item) => {
      seen.push(item);
      if (item === 2) controller.abort();
    }, controller.signal);
    expect(seen).toEqual([1, 2]);
  });
});
