/**
 * Owns a set of ManagedProcesses: starts them in the order given, rolling back on failure;
 * restarts one that crashes after it was ready, with bounded exponential backoff; stops them
 * all in reverse order, once.
 */
import { InfrastructureError, InternalError, messageOf } from '../errors.js';
import { log, nullSink, type EventSink, type ProcessEvent } from '../events.js';
import { describeExit, ProcessError } from './errors.js';
import { sleep } from '../concurrency.js';
import { readLogTail } from './log-file.js';
import type { ExitInfo, ManagedProcess } from './managed-process.js';

export interface RestartPolicy {
  /** Delay before the first restart. Default 1 s. */
  initialDelayMs: number;
  /** The delay doubles per restart up to this. Default 30 s. */
  maxDelayMs: number;
  /** Restarts allowed within `windowMs`; one more crash is fatal. Default 5 (0 disables restarts). */
  maxRestarts: number;
  /** Sliding window the restarts are counted in. Default 10 min. */
  windowMs: number;
}

const defaultRestartPolicy: RestartPolicy = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  maxRestarts: 5,
  windowMs: 10 * 60_000,
};

/** Added to each process's stop grace to bound its stop in `stopAll`. */
const stopMarginMs = 5_000;

export interface SupervisorOptions {
  /** Receives `restarting` and `failed` process events (the processes emit their own). Default: dropped. */
  events?: EventSink;
  /** Overrides of `defaultRestartPolicy`. */
  restart?: Partial<RestartPolicy>;
  /**
   * Called once per process whose restart budget is used up (after its `failed` event), so
   * the caller can fail what it is doing at once. Default: nothing (the event still goes out).
   */
  onFatal?: (error: ProcessError) => void;
  /** Aborting stops every process (as `stopAll`). */
  signal?: AbortSignal;
  /** Time limit of one process's stop in `stopAll`. Default: its stop grace + 5 s. */
  stopTimeoutMs?: number;
}

export class Supervisor {
  private readonly events: EventSink;
  private readonly policy: RestartPolicy;
  private readonly owned: ManagedProcess[] = [];
  private readonly restartTimes = new Map<ManagedProcess, number[]>();
  /**
   * One per owned process, aborted when it is given up (stopSome, stopAll): unsubscribes its
   * exit handler and cancels its pending restart, which would otherwise start again a process
   * nobody owns any more, on the ports the next start of its replacement needs.
   */
  private readonly ownership = new Map<ManagedProcess, AbortController>();
  /** Aborted by stopAll: cancels restart waits and in-flight starts. */
  private readonly shutdown = new AbortController();
  private stopAllPromise: Promise<void> | undefined;

  constructor(private readonly options: SupervisorOptions = {}) {
    this.events = options.events ?? nullSink;
    this.policy = { ...defaultRestartPolicy, ...options.restart };
    const { signal } = options;
    if (signal?.aborted) void this.stopAll().catch(() => {});
    else signal?.addEventListener('abort', () => void this.stopAll().catch(() => {}), { once: true });
  }

  /** The processes owned, in start order. */
  get processes(): readonly ManagedProcess[] {
    return this.owned;
  }

  get(name: string): ManagedProcess | undefined {
    return this.owned.find((p) => p.name === name);
  }

  /**
   * Starts `processes` one after another in the order given (dependencies first) and takes
   * ownership of them. If one fails, the ones this call started are stopped in reverse order
   * and the start error is rethrown (stop failures become warn logs). Processes from
   * earlier calls stay up: `stopAll` is for those. May be called several times (e.g. etcd and
   * the API server first, controllers once CRDs are installed).
   */
  async start(processes: readonly ManagedProcess[]): Promise<void> {
    if (this.stopAllPromise) throw new InternalError('Supervisor.start after stopAll');
    const started: ManagedProcess[] = [];
    for (const proc of processes) {
      if (this.owned.includes(proc)) throw new InternalError(`${proc.name} is already supervised`);
      try {
        await proc.start({ signal: this.shutdown.signal });
      } catch (error) {
        const stopErrors = await this.stopEach([...started].reverse());
        for (const stopError of stopErrors) log(this.events, 'warn', `While rolling back after ${proc.name} failed: ${messageOf(stopError)}`);
        for (const proc of started) this.release(proc);
        throw error;
      }
      started.push(proc);
      this.owned.push(proc);
      const owned = new AbortController();
      this.ownership.set(proc, owned);
      owned.signal.addEventListener('abort', proc.onUnexpectedExit((info) => void this.restart(proc, info)), { once: true });
    }
  }

  /**
   * Stops every owned process in reverse start order, each within its time limit, and
   * rejects with one InfrastructureError listing every failure. Runs once: concurrent and
   * later calls get the same promise.
   */
  stopAll(): Promise<void> {
    if (!this.stopAllPromise) {
      this.shutdown.abort();
      this.stopAllPromise = (async () => {
        const order = [...this.owned].reverse();
        const errors = await this.stopEach(order);
        for (const proc of order) this.release(proc);
        throwStopErrors(errors);
      })();
    }
    return this.stopAllPromise;
  }

  /**
   * Stops the owned processes `which` accepts, in reverse start order, each given `graceMs`
   * after SIGTERM (default: its own stop grace), and gives them up (no restart); the others
   * keep running. Rejects like `stopAll` when one does not stop.
   */
  async stopSome(which: (proc: ManagedProcess) => boolean, options: { graceMs?: number } = {}): Promise<void> {
    const chosen = [...this.owned].reverse().filter(which);
    // Given up before they are signalled: their exit is not a crash to restart from.
    for (const proc of chosen) this.release(proc);
    const errors = await this.stopEach(chosen, options.graceMs);
    throwStopErrors(errors);
  }

  private release(proc: ManagedProcess): void {
    this.ownership.get(proc)?.abort();
    this.ownership.delete(proc);
    const index = this.owned.indexOf(proc);
    if (index >= 0) this.owned.splice(index, 1);
  }

  private async stopEach(processes: readonly ManagedProcess[], graceMs?: number): Promise<unknown[]> {
    const errors: unknown[] = [];
    for (const proc of processes) {
      const limit = this.options.stopTimeoutMs ?? (graceMs ?? proc.stopGraceMs) + stopMarginMs;
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          proc.stop(graceMs === undefined ? {} : { graceMs }),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`${proc.name} did not stop within ${limit} ms`)), limit);
          }),
        ]);
      } catch (error) {
        errors.push(error);
      } finally {
        clearTimeout(timer);
      }
    }
    return errors;
  }

  /** Handles one unexpected exit: restart after backoff, or report `failed` when the budget is used up. */
  private async restart(proc: ManagedProcess, info: ExitInfo): Promise<void> {
    const owned = this.ownership.get(proc);
    if (!owned) return;
    // Given up (stopSome) or shut down (stopAll) meanwhile: no restart, and an in-flight start stops.
    const cancelled = AbortSignal.any([this.shutdown.signal, owned.signal]);
    let last = info;
    for (;;) {
      if (cancelled.aborted) return;
      const now = Date.now();
      const recent = (this.restartTimes.get(proc) ?? []).filter((t) => now - t < this.policy.windowMs);
      if (recent.length >= this.policy.maxRestarts) {
        this.fail(proc, last, recent.length);
        return;
      }
      const delayMs = Math.min(this.policy.initialDelayMs * 2 ** recent.length, this.policy.maxDelayMs);
      recent.push(now);
      this.restartTimes.set(proc, recent);
      this.emit(proc, {
        state: 'restarting',
        exitCode: last.exitCode,
        signal: last.signal,
        logTail: last.logTail,
        logFile: proc.logFile,
        message: `restart ${recent.length} of ${this.policy.maxRestarts} in ${delayMs} ms after it exited with ${describeExit(last.exitCode, last.signal)}`,
      });
      await sleep(delayMs, cancelled);
      if (cancelled.aborted) return;
      try {
        await proc.start({ signal: cancelled });
        return; // ready again; its next unexpected exit calls restart() afresh
      } catch (error) {
        if (cancelled.aborted) return;
        last =
          error instanceof ProcessError
            ? { exitCode: error.exitStatus, signal: error.exitSignal, logTail: [...error.logTail] }
            : { exitCode: null, signal: null, logTail: [...(await readLogTail(proc.logFile)), messageOf(error)] };
      }
    }
  }

  private fail(proc: ManagedProcess, last: ExitInfo, restarts: number): void {
    const error = new ProcessError(
      `${proc.name} kept exiting: ${restarts} restart(s) in ${Math.round(this.policy.windowMs / 60_000)} min, last exit with ${describeExit(last.exitCode, last.signal)}`,
      {
        processName: proc.name,
        reason: 'restarts',
        exitStatus: last.exitCode,
        exitSignal: last.signal,
        logTail: last.logTail,
        logFile: proc.logFile,
      },
    );
    this.emit(proc, {
      state: 'failed',
      exitCode: last.exitCode,
      signal: last.signal,
      logTail: last.logTail,
      logFile: proc.logFile,
      message: error.message,
    });
    this.options.onFatal?.(error);
  }

  private emit(proc: ManagedProcess, event: Omit<ProcessEvent, 'type' | 'name'>): void {
    this.events.emit({ type: 'process', name: proc.name, ...event });
  }
}

/** One InfrastructureError listing every stop failure, if there was any. */
function throwStopErrors(errors: readonly unknown[]): void {
  if (errors.length === 0) return;
  throw new InfrastructureError(`${errors.length} process(es) could not be stopped cleanly`, {
    details: errors.map(messageOf),
    hint: 'Run `provisioner destroy bootstrap` to stop anything left running.',
  });
}
