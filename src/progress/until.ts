/**
 * The one way provisioner waits. `until` ends when what it observes says done, and fails
 * when nothing observed changed for `noProgressTimeoutMs` — a deadline that moves: every
 * change in an observation's `progress` (what the user would see) moves it, anything else
 * (a resourceVersion, a watch restarting, the same answer polled again) does not. It fails
 * at once when an observation says failed, when `fatal` rejects, or when `signal` aborts.
 *
 * Observations come from a source: watches (`wait/waiter.ts watching`) or polling
 * (`polling` here) feed the same deadline. This module knows nothing of Kubernetes, so
 * `process/` waits with it too.
 */
import { sleep } from '../concurrency.js';
import { InterruptedError } from '../errors.js';

/** Default time without any observable change before a wait fails: 10 minutes. */
const defaultNoProgressTimeoutMs = 10 * 60_000;

/** One look at what is being waited on. */
export type Observation<T> =
  | {
      state: 'waiting' | 'done';
      /** What was seen: returned when done, handed to `onStall` otherwise. */
      value: T;
      /** What the user would see of it; a change here is progress. */
      progress: string;
    }
  | { state: 'failed'; value: T; progress: string; error: unknown };

/**
 * Starts feeding observations: `observe` for each new look, `fail` when the source itself
 * broke (the wait then fails with that error). Returns a function that stops it.
 */
export type ObservationSource<T> = (observe: (observation: Observation<T>) => void, fail: (error: unknown) => void) => () => void;

export interface UntilOptions<T> {
  /** What is waited for, for messages: `Interrupted while waiting for <what>`. */
  what: string;
  /** Fails when no observation changed its `progress` for this long. Default 10 min. */
  noProgressTimeoutMs?: number;
  /** The error of a stall, from the last observation (none yet when the source never reported). */
  onStall: (last: Observation<T> | undefined, stalledMs: number) => Error;
  /** Called with each observation whose `progress` differs from the one before (the first included). Default: nothing. */
  onProgress?: (observation: Observation<T>) => void;
  signal?: AbortSignal;
  /** Rejecting this promise fails the wait at once (e.g. a controller crashed past its restart budget). Default: never. */
  fatal?: Promise<never>;
}

/** Resolves with the value of the first `done` observation; rejects as the module comment says. */
export function until<T>(source: ObservationSource<T>, options: UntilOptions<T>): Promise<T> {
  const timeoutMs = options.noProgressTimeoutMs ?? defaultNoProgressTimeoutMs;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let stallTimer: NodeJS.Timeout | undefined;
    let last: Observation<T> | undefined;
    let lastProgressAt = Date.now();
    let stopSource: (() => void) | undefined;

    const finish = (outcome: { error: unknown } | { value: T }) => {
      if (settled) return;
      settled = true;
      clearTimeout(stallTimer);
      options.signal?.removeEventListener('abort', onAbort);
      stopSource?.();
      if ('error' in outcome) reject(outcome.error);
      else resolve(outcome.value);
    };
    const armStallTimer = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => finish({ error: options.onStall(last, Date.now() - lastProgressAt) }), timeoutMs);
    };
    const onAbort = () => finish({ error: new InterruptedError(`Interrupted while waiting for ${options.what}`, { hint: 'Run the same command again to resume.' }) });
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    options.fatal?.catch((error: unknown) => finish({ error }));

    const observe = (observation: Observation<T>) => {
      if (settled) return;
      const progressed = last === undefined || observation.progress !== last.progress;
      last = observation;
      if (progressed) {
        lastProgressAt = Date.now();
        armStallTimer();
        try {
          options.onProgress?.(observation);
        } catch (error) {
          return finish({ error });
        }
      }
      if (observation.state === 'done') finish({ value: observation.value });
      else if (observation.state === 'failed') finish({ error: observation.error });
    };

    armStallTimer();
    const stop = source(observe, (error) => finish({ error }));
    // A source may settle the wait before it returns its stop function.
    if (settled) stop();
    else stopSource = stop;
  });
}

/**
 * A source that looks every `intervalMs`, counted from the end of each look (looks never
 * overlap). A look that throws fails the wait: a look that can meet expected errors (a
 * server not answering yet) returns them as a `waiting` observation instead.
 */
export function polling<T>(look: (signal: AbortSignal) => Promise<Observation<T>> | Observation<T>, intervalMs: number): ObservationSource<T> {
  return (observe, fail) => {
    const stopped = new AbortController();
    const loop = async () => {
      while (!stopped.signal.aborted) {
        const observation = await look(stopped.signal);
        if (stopped.signal.aborted) return;
        observe(observation);
        await sleep(intervalMs, stopped.signal);
      }
    };
    loop().catch(fail);
    return () => stopped.abort();
  };
}
