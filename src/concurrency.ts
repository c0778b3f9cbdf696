/**
 * Bounded parallelism, retry with exponential backoff and the one `sleep`, for any module's
 * requests (the apply engine, pivot, provider install, the extraction cache). Pure helpers:
 * the clock (`sleep`) is injectable so tests run instantly. Waiting for something to happen
 * is `progress/until`'s job; a sleep here only spaces attempts.
 */

/**
 * Runs `fn` over `items` with at most `limit` at once and answers the results in the items'
 * order. Starts nothing new once `signal` aborts or once one call has failed (that failure
 * is what the caller gets).
 */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>, signal?: AbortSignal): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failed && !signal?.aborted) {
      const index = next++;
      try {
        results[index] = await fn(items[index] as T, index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, () => worker()));
  return results;
}

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** Wait after the first failure; doubles after each further one. */
  initialDelayMs: number;
  /** Ceiling of one wait. */
  maxDelayMs: number;
}

/**
 * Default retry policy: 8 attempts, waits of 250 ms doubling up to 8 s (0.25, 0.5, 1, 2, 4,
 * 8, 8: about 24 s in all). That outlasts what we retry for: a provider's webhook server
 * still binding its port after its controller reported ready, an optimistic-lock
 * conflict with a controller writing the same object, a 429 or a 5xx of an API server
 * under load. No jitter: the only client of a loopback control plane is us, so there is
 * no crowd of clients whose retries jitter would spread.
 */
export const defaultRetryPolicy: RetryPolicy = { maxAttempts: 8, initialDelayMs: 250, maxDelayMs: 8_000 };

/** The wait before attempt `attempt + 1`, after `attempt` failures (1-based). */
export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.initialDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
}

/** Resolves after `ms`, or at once when `signal` aborts; never rejects (the caller checks `signal.aborted`). */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/**
 * The one sleep. An abort ends it early instead of rejecting, so every caller treats an abort
 * the same way: it looks at `signal.aborted` (or `signal.throwIfAborted()`) after the sleep.
 */
export const sleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

export type Attempted<T> = { ok: true; value: T; attempts: number } | { ok: false; error: unknown; attempts: number };

export interface RetryOptions {
  policy: RetryPolicy;
  isRetryable(error: unknown): boolean;
  sleep: Sleep;
  signal?: AbortSignal;
  onRetry?(error: unknown, attempt: number, delayMs: number): void;
  /** The server's own wait for this failure (a Retry-After), used instead of the backoff, at most `maxDelayMs`. Default: none. */
  retryAfterMs?(error: unknown): number | undefined;
}

/** Calls `op` until it succeeds, fails for good, runs out of attempts, or the signal aborts during a wait. */
export async function withRetry<T>(op: () => Promise<T>, options: RetryOptions): Promise<Attempted<T>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return { ok: true, value: await op(), attempts: attempt };
    } catch (error) {
      if (attempt >= options.policy.maxAttempts || !options.isRetryable(error) || options.signal?.aborted) return { ok: false, error, attempts: attempt };
      const wait = Math.min(options.retryAfterMs?.(error) || backoffDelay(options.policy, attempt), options.policy.maxDelayMs);
      options.onRetry?.(error, attempt, wait);
      await options.sleep(wait, options.signal);
      if (options.signal?.aborted) return { ok: false, error, attempts: attempt }; // aborted while waiting: the last error stands
    }
  }
}
