import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InterruptedError } from '../errors.js';
import { polling, until, type Observation, type ObservationSource } from './until.js';

/** A source the test drives by hand: `push` observes, `break` fails. */
function manualSource<T>() {
  let observe: (o: Observation<T>) => void = () => {};
  let fail: (error: unknown) => void = () => {};
  const state = { stopped: false };
  const source: ObservationSource<T> = (o, f) => {
    observe = o;
    fail = f;
    return () => (state.stopped = true);
  };
  return { source, state, push: (o: Observation<T>) => observe(o), break: (error: unknown) => fail(error) };
}

const waiting = (progress: string): Observation<string> => ({ state: 'waiting', value: progress, progress });
const stall = (last: Observation<string> | undefined, ms: number) => new Error(`stalled ${ms} ms at ${last?.progress ?? 'nothing'}`);

async function outcome(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => ({ resolved: value }),
    (error: unknown) => error,
  );
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('until', () => {
  it('resolves with the value of the first done observation and stops its source', async () => {
    const s = manualSource<string>();
    const wait = until(s.source, { what: 'x', onStall: stall });
    s.push(waiting('one'));
    s.push({ state: 'done', value: 'finished', progress: 'two' });
    await expect(wait).resolves.toBe('finished');
    expect(s.state.stopped).toBe(true);
  });

  it('fails when the progress did not change for the timeout, counted from the last change, naming the last observation', async () => {
    const s = manualSource<string>();
    const result = outcome(until(s.source, { what: 'x', noProgressTimeoutMs: 200, onStall: stall }));
    s.push(waiting('a'));
    await vi.advanceTimersByTimeAsync(150);
    s.push(waiting('b'));
    await vi.advanceTimersByTimeAsync(150);
    // The same progress again (a re-list, a repeated poll) does not move the deadline.
    s.push(waiting('b'));
    await vi.advanceTimersByTimeAsync(49);
    s.push(waiting('b'));
    await vi.advanceTimersByTimeAsync(1);
    expect(((await result) as Error).message).toBe('stalled 200 ms at b');
    expect(s.state.stopped).toBe(true);
  });

  it('fails after the timeout when the source never reports', async () => {
    const s = manualSource<string>();
    const result = outcome(until(s.source, { what: 'x', noProgressTimeoutMs: 100, onStall: stall }));
    await vi.advanceTimersByTimeAsync(100);
    expect(((await result) as Error).message).toBe('stalled 100 ms at nothing');
  });

  it('keeps waiting while the progress keeps changing, for longer than the timeout in all', async () => {
    const s = manualSource<string>();
    let settled = false;
    const wait = until(s.source, { what: 'x', noProgressTimeoutMs: 200, onStall: stall }).finally(() => (settled = true));
    for (let step = 0; step < 10; step++) {
      s.push(waiting(`step ${step}`));
      await vi.advanceTimersByTimeAsync(150);
    }
    expect(settled).toBe(false);
    s.push({ state: 'done', value: 'ok', progress: 'done' });
    await expect(wait).resolves.toBe('ok');
  });

  it('calls onProgress once per change of progress', async () => {
    const s = manualSource<string>();
    const seen: string[] = [];
    const wait = until(s.source, { what: 'x', onStall: stall, onProgress: (o) => seen.push(o.progress) });
    for (const p of ['a', 'a', 'b', 'b', 'a']) s.push(waiting(p));
    s.push({ state: 'done', value: 'ok', progress: 'a' });
    await wait;
    expect(seen).toEqual(['a', 'b', 'a']);
  });

  it('fails at once with the error of a failed observation, of a broken source, or of fatal', async () => {
    const failing = manualSource<string>();
    const failed = outcome(until(failing.source, { what: 'x', onStall: stall }));
    failing.push({ state: 'failed', value: 'v', progress: 'p', error: new Error('machine failed') });
    expect(((await failed) as Error).message).toBe('machine failed');

    const broken = manualSource<string>();
    const brokenWait = outcome(until(broken.source, { what: 'x', onStall: stall }));
    broken.break(new Error('watch gone'));
    expect(((await brokenWait) as Error).message).toBe('watch gone');
    expect(broken.state.stopped).toBe(true);

    let crash: (error: Error) => void = () => {};
    const fatal = new Promise<never>((_, reject) => (crash = reject));
    const crashing = manualSource<string>();
    const crashed = outcome(until(crashing.source, { what: 'x', onStall: stall, fatal }));
    crash(new Error('controller crashed'));
    expect(((await crashed) as Error).message).toBe('controller crashed');
  });

  it('rejects with InterruptedError when the signal aborts, and does not start the source when it already has', async () => {
    const controller = new AbortController();
    const s = manualSource<string>();
    const wait = outcome(until(s.source, { what: 'the things', onStall: stall, signal: controller.signal }));
    controller.abort();
    const error = await wait;
    expect(error).toBeInstanceOf(InterruptedError);
    expect((error as Error).message).toBe('Interrupted while waiting for the things');
    expect(s.state.stopped).toBe(true);

    let started = false;
    const never: ObservationSource<string> = () => {
      started = true;
      return () => {};
    };
    expect(await outcome(until(never, { what: 'x', onStall: stall, signal: controller.signal }))).toBeInstanceOf(InterruptedError);
    expect(started).toBe(false);
  });
});

describe('polling', () => {
  it('looks every interval, after each look ends, until a look says done', async () => {
    const looks: number[] = [];
    const look = async (): Promise<Observation<number>> => {
      looks.push(Date.now());
      await new Promise((resolve) => setTimeout(resolve, 30)); // a look that takes time
      return looks.length >= 3 ? { state: 'done', value: looks.length, progress: 'done' } : { state: 'waiting', value: looks.length, progress: String(looks.length) };
    };
    const wait = until(polling(look, 100), { what: 'x', onStall: () => new Error('stalled') });
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(wait).resolves.toBe(3);
    expect(looks.map((t) => t - looks[0]!)).toEqual([0, 130, 260]);
  });

  it('stalls when every look sees the same thing, and stops looking', async () => {
    let looks = 0;
    const wait = outcome(until(polling(() => (looks++, waiting('same')), 50), { what: 'x', noProgressTimeoutMs: 500, onStall: stall }));
    await vi.advanceTimersByTimeAsync(500);
    expect(((await wait) as Error).message).toBe('stalled 500 ms at same');
    const looked = looks;
    await vi.advanceTimersByTimeAsync(500);
    expect(looks).toBe(looked);
  });

  it('fails with what a look throws', async () => {
    const wait = outcome(until(polling(() => Promise.reject(new Error('cannot look')), 50), { what: 'x', onStall: stall }));
    await vi.advanceTimersByTimeAsync(0);
    expect(((await wait) as Error).message).toBe('cannot look');
  });
});
