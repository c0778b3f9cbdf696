/**
 * The one stage runner: a stage is a name and a body; running it journals it (started before
 * it is announced, so a kill right after the "started" event finds it in the journal), times
 * it, counts the Kubernetes API requests it made, emits its `stage` events, and records how it
 * ended (an abort of the command's signal is `interrupted`, any other error `failed`). A stage
 * marked `once` that an earlier run finished is skipped (its `whenDone` runs instead), which is
 * how a run after Ctrl-C, SIGKILL or a crash resumes. A stage may also be skipped for what the
 * stages before it found (`skip`), so a command whose steps depend on the world (an agent
 * that already checked in) still declares one fixed list. A dry run journals nothing, and neither
 * does a runner given no journal (a command whose resume is its own record: the Rancher and
 * Fleet hand-offs, destroy, gather).
 */
import { messageOf } from '../errors.js';
import type { EventSink } from '../events.js';
import { apiRequestsMade } from '../kube/client.js';
import type { Journal } from './journal.js';

/** A declared stage of a command. */
export interface Stage {
  name: string;
  run: () => Promise<unknown>;
  /** Whether this run has the stage at all (known before the list runs); a stage left out is neither journaled nor announced. Default true. */
  when?: boolean;
  /**
   * Asked when the stage's turn comes, so it is decided from what the earlier stages found:
   * why the stage is skipped (announced as `skipped` with this reason, not journaled), or
   * undefined to run it. Default: never skipped.
   */
  skip?: () => string | undefined;
  /** Skipped when an earlier run finished it. Default false: run on every run (applies and waits are idempotent). */
  once?: boolean;
  /** Runs instead of `run` when a `once` stage is skipped. Default none. */
  whenDone?: () => Promise<void>;
}

export interface StageRunnerOptions {
  /** Where stages are journaled. Default none: nothing is journaled and a `once` stage always runs. */
  journal?: Journal;
  sink: EventSink;
  /** The command's signal: no stage starts once it aborted, and a stage that fails after it is `interrupted`. Default none: the bodies see to interrupts themselves (gather, which writes its bundle at checkpoints of its own). */
  signal?: AbortSignal;
  /** Journal nothing (the events and timings still happen). Default false. */
  dryRun?: boolean;
}

export class StageRunner {
  /** The stages that ran to the end in this process, in order, with their durations. */
  readonly timings: { name: string; durationMs: number }[] = [];

  constructor(private readonly options: StageRunnerOptions) {}

  /** Runs one stage and returns its body's result; undefined when `skipIfDone` skipped it. */
  async run<T>(name: string, body: () => Promise<T>, options: { skipIfDone?: boolean } = {}): Promise<T | undefined> {
    const { journal, sink, signal } = this.options;
    const journaled = journal !== undefined && !this.options.dryRun;
    if (options.skipIfDone && journal?.succeeded(name)) {
      sink.emit({ type: 'stage', stage: name, state: 'skipped', message: 'done in an earlier run' });
      return undefined;
    }
    signal?.throwIfAborted();
    const started = performance.now();
    const requestsBefore = apiRequestsMade();
    if (journaled) await journal.start(name);
    sink.emit({ type: 'stage', stage: name, state: 'started' });
    try {
      const result = await body();
      const durationMs = performance.now() - started;
      this.timings.push({ name, durationMs });
      if (journaled) await journal.finish(name, 'succeeded', durationMs);
      sink.emit({ type: 'stage', stage: name, state: 'succeeded', durationMs, requests: apiRequestsMade() - requestsBefore });
      return result;
    } catch (error) {
      const durationMs = performance.now() - started;
      if (journaled) await journal.finish(name, signal?.aborted ? 'interrupted' : 'failed', durationMs, messageOf(error));
      sink.emit({ type: 'stage', stage: name, state: 'failed', durationMs, message: messageOf(error) });
      throw error;
    }
  }

  /** Runs a body that must produce a value (a stage that is never skipped). */
  async value<T>(name: string, body: () => Promise<T>): Promise<T> {
    return (await this.run(name, body)) as T;
  }

  /** Runs the declared stages in order; the first failure stops them. */
  async runAll(stages: readonly Stage[]): Promise<void> {
    for (const stage of stages) {
      if (stage.when === false) continue;
      const skipped = stage.skip?.();
      if (skipped !== undefined) {
        this.options.sink.emit({ type: 'stage', stage: stage.name, state: 'skipped', message: skipped });
        continue;
      }
      const done = stage.once === true && !this.options.dryRun && this.options.journal?.succeeded(stage.name) === true;
      await this.run(stage.name, stage.run, { skipIfDone: stage.once === true });
      if (done) await stage.whenDone?.();
    }
  }
}

/** Runs one step of a command as a stage named with the command's prefix. */
export type StageStep = <T>(name: string, body: () => Promise<T>) => Promise<T>;

/**
 * The steps of a command that resumes from its own record rather than the journal (the
 * Rancher and Fleet hand-offs, destroy): each runs on one unjournaled runner as the stage
 * `<prefix><name>`, timed and announced.
 */
export function stageSteps(prefix: string, options: { sink: EventSink; signal: AbortSignal }): StageStep {
  const stages = new StageRunner(options);
  return (name, body) => stages.value(`${prefix}${name}`, body);
}
