/**
 * Executing a plan: server-side apply with our field manager, rank by rank (order.ts),
 * with bounded parallelism within a rank and retries with exponential backoff on
 * transient failures; deletes last, in reverse rank order. And the preflight:
 * `dryRunPlan` sends every create and patch as a server-side dry-run, so the real CRD
 * schemas and admission webhooks judge the manifests before anything is written.
 *
 * A failure is reported object by object: the result lists every object with its
 * outcome, and the thrown error has one detail line per failed object with the
 * server's message. The rest of the failing rank is still attempted (every problem of
 * that rank is reported at once), but no later rank is, and nothing is pruned: later
 * objects name the ones that failed, and a delete must never run before the new
 * generation is fully in place (an old template may still be what a machine uses).
 */
import { ConfigError, InfrastructureError, InterruptedError, messageOf, type FieldProblem, type ProvisionerErrorOptions } from '../errors.js';
import { log, nullSink, type EventSink } from '../events.js';
import { KubeApiError, type KubeObject } from '../kube/client.js';
import { describeObject, type ApplyClient, type ObjectRef } from './client.js';
import { defaultRetryPolicy, mapLimit, sleep as realSleep, withRetry, type RetryPolicy, type Sleep } from '../concurrency.js';
import { rankName } from './order.js';
import type { Plan, PlanAction, PlanEntry } from './plan.js';

/** Requests at once within one rank: 8, a quarter of KubeClient's 32 sockets; more buys nothing on 2 cores. */
export const defaultConcurrency = 8;

export interface ExecuteOptions {
  /** Requests at once within one rank. Default `defaultConcurrency` (8). */
  concurrency?: number;
  /** Default `defaultRetryPolicy`: 8 attempts, 250 ms doubling to at most 8 s. */
  retry?: Partial<RetryPolicy>;
  /** Run the plan's deletes. Default true. */
  prune?: boolean;
  /** Default: events dropped. */
  sink?: EventSink;
  signal?: AbortSignal;
  /** The backoff clock. Default: concurrency's `sleep` (an abort cuts a wait short). Tests inject a fake. */
  sleep?: Sleep;
}

export type Outcome = 'created' | 'patched' | 'unchanged' | 'deleted' | 'gone' | 'failed' | 'skipped';
export const outcomes: readonly Outcome[] = ['created', 'patched', 'unchanged', 'deleted', 'gone', 'failed', 'skipped'];

export interface ObjectFailure {
  /** HTTP status; 0 when the server was not reached. */
  statusCode: number;
  reason: string;
  /** The server's message. */
  message: string;
  /** The server refused the object itself (schema, webhook, unknown kind or namespace): the manifest must change. */
  refused: boolean;
}

export interface ObjectResult {
  ref: ObjectRef;
  key: string;
  action: PlanAction;
  outcome: Outcome;
  /** Requests made (0 for unchanged and skipped). */
  attempts: number;
  durationMs: number;
  error?: ObjectFailure;
}

export interface ApplyResult {
  /** Every object of the plan, in plan order. */
  objects: ObjectResult[];
  counts: Record<Outcome, number>;
  durationMs: number;
}

/** A failed apply with its full result. */
export interface ApplyFailure {
  readonly result: ApplyResult;
}

/** The server refused some objects for their content: the manifests must change. */
export class ManifestsRejectedError extends ConfigError implements ApplyFailure {
  constructor(message: string, problems: readonly FieldProblem[], options: ProvisionerErrorOptions, readonly result: ApplyResult) {
    super(message, problems, options);
  }
}

/** Some objects could not be applied for reasons other than their content (server, webhooks, network). */
export class ApplyFailedError extends InfrastructureError implements ApplyFailure {
  constructor(message: string, options: ProvisionerErrorOptions, readonly result: ApplyResult) {
    super(message, options);
  }
}

/** The apply was interrupted; what was applied stays, and applying again resumes. */
export class ApplyInterruptedError extends InterruptedError implements ApplyFailure {
  constructor(message: string, options: ProvisionerErrorOptions, readonly result: ApplyResult) {
    super(message, options);
  }
}

/** The result carried by an error executePlan threw, if it is one. */
export function applyResultOf(error: unknown): ApplyResult | undefined {
  return error instanceof ManifestsRejectedError || error instanceof ApplyFailedError || error instanceof ApplyInterruptedError ? error.result : undefined;
}

/**
 * A refusal of the object itself, which no retry changes: 400 (malformed), 404 (a kind no
 * CRD serves, a namespace that does not exist), 422 (schema or webhook validation), an
 * admission webhook's denial (whatever its code), and server-side apply's 500 for a field
 * the schema does not declare (`isInvalidPatch`).
 */
export function isRefusal(error: unknown): boolean {
  if (!(error instanceof KubeApiError)) return false;
  if (error.statusCode === 400 || error.statusCode === 404 || error.statusCode === 422) return true;
  return error.isDenied || error.isInvalidPatch;
}

/**
 * Worth another attempt: what KubeApiError calls transient (no answer, 429, 5xx such as a
 * webhook that cannot be called yet) and optimistic-lock conflicts (409), never a refusal.
 */
export function isRetryable(error: unknown): boolean {
  if (!(error instanceof KubeApiError) || isRefusal(error)) return false;
  return error.isTransient || error.isConflict;
}

function failureOf(error: unknown): ObjectFailure {
  if (error instanceof KubeApiError) {
    // KubeApiError prefixes the object's name; the detail line names the object already.
    const prefix = error.object ? `${error.object}: ` : '';
    const message = prefix && error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
    return { statusCode: error.statusCode, reason: error.reason, message, refused: isRefusal(error) };
  }
  return { statusCode: 0, reason: 'Error', message: messageOf(error), refused: false };
}

/** A detail line is one line: webhook messages can carry multi-line Go diffs. The result keeps the message as sent. */
function oneLine(message: string): string {
  return message.replace(/\s+/g, ' ').trim();
}

function zeroCounts(): Record<Outcome, number> {
  return Object.fromEntries(outcomes.map((o) => [o, 0])) as Record<Outcome, number>;
}

const applyProgressTask = 'apply:objects';

/** Applies the plan. Returns the result when every object succeeded; otherwise throws an ApplyFailure error. */
export async function executePlan(client: ApplyClient, plan: Plan, options: ExecuteOptions = {}): Promise<ApplyResult> {
  const started = performance.now();
  const sink = options.sink ?? nullSink;
  const policy: RetryPolicy = { ...defaultRetryPolicy, ...options.retry };
  const concurrency = options.concurrency ?? defaultConcurrency;
  const sleep = options.sleep ?? realSleep;
  const prune = options.prune ?? true;
  const signal = options.signal;

  const results = new Map<PlanEntry, ObjectResult>();
  const resultOf = (entry: PlanEntry, outcome: Outcome, attempts = 0, durationMs = 0, error?: ObjectFailure): ObjectResult => ({
    ref: entry.ref,
    key: entry.key,
    action: entry.action,
    outcome,
    attempts,
    durationMs,
    ...(error ? { error } : {}),
  });

  const work = plan.entries.filter((e) => e.action !== 'unchanged' && (prune || e.action !== 'delete'));
  for (const entry of plan.entries) if (entry.action === 'unchanged') results.set(entry, resultOf(entry, 'unchanged'));
  const total = work.length;
  let done = 0;
  const progress = (final = false) =>
    sink.emit({ type: 'progress', task: applyProgressTask, label: 'Applying objects', current: done, total, unit: 'objects', ...(final ? { done: true } : {}) });
  progress();

  // Groups of entries run one after another: applies by rank, then deletes by reverse rank.
  const phases: { label: string; entries: PlanEntry[] }[] = [];
  for (const entry of work) {
    const label = `${entry.action === 'delete' ? 'delete' : 'apply'} ${rankName(entry.rank)}`;
    const last = phases[phases.length - 1];
    if (last && last.label === label) last.entries.push(entry);
    else phases.push({ label, entries: [entry] });
  }

  let failedPhase: string | undefined;
  for (const phase of phases) {
    if (signal?.aborted || failedPhase) break;
    log(sink, 'debug', `apply: ${phase.label} (${phase.entries.length} object(s))`);
    let phaseFailed = false;
    await mapLimit(
      phase.entries,
      concurrency,
      async (entry) => {
        const result = await runEntry(client, entry, policy, sleep, sink, signal);
        results.set(entry, result);
        if (result.outcome === 'failed') phaseFailed = true;
        done += 1;
        progress();
        const fields = { kind: entry.ref.kind, name: entry.ref.name, ...(entry.ref.namespace ? { namespace: entry.ref.namespace } : {}), outcome: result.outcome, attempts: result.attempts, durationMs: Math.round(result.durationMs) };
        log(sink, 'debug', `${result.outcome} ${describeObject(entry.ref)}${result.error ? `: ${result.error.message}` : ''}`, fields);
      },
      signal,
    );
    if (phaseFailed) failedPhase = phase.label;
  }
  progress(true);

  const objects: ObjectResult[] = plan.entries.map((entry) => results.get(entry) ?? resultOf(entry, 'skipped'));
  const counts = zeroCounts();
  for (const o of objects) counts[o.outcome] += 1;
  const result: ApplyResult = { objects, counts, durationMs: performance.now() - started };
  const failed = objects.filter((o) => o.outcome === 'failed');
  const detail = (o: ObjectResult) => `${describeObject(o.ref)}: ${oneLine(o.error?.message ?? 'failed')}`;

  if (signal?.aborted) {
    throw new ApplyInterruptedError(
      `apply interrupted: ${counts.skipped} of ${objects.length} objects not applied`,
      { details: failed.map(detail), hint: 'Run the command again: what was applied stays, and the next apply does only what is left.' },
      result,
    );
  }
  if (failed.length === 0) return result;

  const skippedNote = counts.skipped > 0 ? `; ${counts.skipped} later object(s) and deletes not attempted` : '';
  const message = `${failed.length} of ${objects.length} objects failed to apply (at ${failedPhase ?? 'apply'})${skippedNote}`;
  // A ConfigError only when every failure is the server refusing the object itself:
  // then the manifests (likely user-edited) must change, and that is the whole fix. Any
  // other failure (retries exhausted on 5xx, no connection) is the control plane's.
  if (failed.every((o) => o.error?.refused)) {
    const problems: FieldProblem[] = failed.map((o) => ({ path: describeObject(o.ref), message: oneLine(o.error?.message ?? 'refused') }));
    throw new ManifestsRejectedError(message, problems, { hint: 'Correct the objects listed in the manifests (the server names the field), or regenerate them; `--dry-run` checks them without writing anything.' }, result);
  }
  throw new ApplyFailedError(
    message,
    {
      details: failed.map(detail),
      hint: 'Check that the local control plane and its provider controllers are running (their logs are in the install directory), then run the command again: the apply resumes.',
    },
    result,
  );
}

async function runEntry(client: ApplyClient, entry: PlanEntry, policy: RetryPolicy, sleep: Sleep, sink: EventSink, signal?: AbortSignal): Promise<ObjectResult> {
  const started = performance.now();
  const base = { ref: entry.ref, key: entry.key, action: entry.action };
  if (entry.action === 'conflict') {
    // Another set's object: the manifests claim what is not theirs (a config problem). An
    // object still being deleted: a passing state of the cluster, not of the manifests.
    const byOwner = entry.blockedBy !== 'deletion';
    const error: ObjectFailure = { statusCode: 409, reason: byOwner ? 'OwnedByAnotherSet' : 'BeingDeleted', message: `not applied: ${entry.reasons.join(', ')}`, refused: byOwner };
    return { ...base, outcome: 'failed', attempts: 0, durationMs: 0, error };
  }
  const op = entry.action === 'delete' ? () => client.delete(entry.object, { propagation: 'Background' }) : () => client.apply(entry.object);
  const attempted = await withRetry<KubeObject | boolean>(op, {
    policy,
    isRetryable,
    sleep,
    ...(signal ? { signal } : {}),
    onRetry: (error, attempt, delayMs) =>
      log(sink, 'debug', `retrying ${describeObject(entry.ref)} in ${delayMs} ms (attempt ${attempt + 1} of ${policy.maxAttempts}): ${messageOf(error)}`),
  });
  const durationMs = performance.now() - started;
  if (!attempted.ok) return { ...base, outcome: 'failed', attempts: attempted.attempts, durationMs, error: failureOf(attempted.error) };
  const outcome: Outcome = entry.action === 'delete' ? (attempted.value === false ? 'gone' : 'deleted') : entry.action === 'create' ? 'created' : 'patched';
  return { ...base, outcome, attempts: attempted.attempts, durationMs };
}

/** Namespace that server-side dry-runs use for objects whose namespace the plan has yet to create. */
export const dryRunStandInNamespace = 'default';

export interface DryRunProblem {
  ref: ObjectRef;
  key: string;
  statusCode: number;
  reason: string;
  /** The server's message. */
  message: string;
  /** Set when the object was checked in a stand-in namespace, because its own is still to be created. */
  checkedInNamespace?: string;
}

export interface DryRunReport {
  /** Objects sent as a dry-run (the plan's creates and patches). */
  checked: number;
  problems: DryRunProblem[];
  durationMs: number;
}

export interface DryRunOptions {
  /** Requests at once. Default `defaultConcurrency` (8). */
  concurrency?: number;
  /** Default `defaultRetryPolicy`. */
  retry?: Partial<RetryPolicy>;
  sink?: EventSink;
  signal?: AbortSignal;
  sleep?: Sleep;
}

/**
 * The preflight: a server-side dry-run of every create and patch, so the real CRD
 * schemas and webhooks judge each object; writes nothing. Returns every refusal, object
 * by object. An object in a namespace that the plan itself creates cannot be dry-run
 * there (the namespace does not exist yet), so it is checked in `default` instead:
 * schemas and Cluster API's webhooks do not depend on the namespace. Throws an
 * InfrastructureError only when objects could not be checked at all (server unreachable
 * after retries), listing those and any refusals found.
 */
export async function dryRunPlan(client: ApplyClient, plan: Plan, options: DryRunOptions = {}): Promise<DryRunReport> {
  const started = performance.now();
  const sink = options.sink ?? nullSink;
  const policy: RetryPolicy = { ...defaultRetryPolicy, ...options.retry };
  const sleep = options.sleep ?? realSleep;
  const newNamespaces = new Set(plan.entries.filter((e) => e.action === 'create' && e.ref.kind === 'Namespace' && e.ref.apiVersion === 'v1').map((e) => e.ref.name));
  const toCheck = plan.entries.filter((e) => e.action === 'create' || e.action === 'patch');
  const problems: DryRunProblem[] = [];
  const unchecked: string[] = [];
  let done = 0;
  await mapLimit(
    toCheck,
    options.concurrency ?? defaultConcurrency,
    async (entry) => {
      const ns = entry.object.metadata.namespace;
      const standIn = ns !== undefined && newNamespaces.has(ns);
      const obj = standIn ? { ...entry.object, metadata: { ...entry.object.metadata, namespace: dryRunStandInNamespace } } : entry.object;
      const attempted = await withRetry(() => client.apply(obj, { dryRun: true }), { policy, isRetryable, sleep, ...(options.signal ? { signal: options.signal } : {}) });
      done += 1;
      sink.emit({ type: 'progress', task: 'apply:dry-run', label: 'Checking objects (server-side dry-run)', current: done, total: toCheck.length, unit: 'objects' });
      if (attempted.ok) return;
      const failure = failureOf(attempted.error);
      log(sink, 'debug', `dry-run refused ${describeObject(entry.ref)}: ${failure.message}`);
      if (failure.refused) {
        problems.push({ ref: entry.ref, key: entry.key, statusCode: failure.statusCode, reason: failure.reason, message: failure.message, ...(standIn ? { checkedInNamespace: dryRunStandInNamespace } : {}) });
      } else {
        unchecked.push(`${describeObject(entry.ref)}: ${oneLine(failure.message)}`);
      }
    },
    options.signal,
  );
  sink.emit({ type: 'progress', task: 'apply:dry-run', label: 'Checking objects (server-side dry-run)', current: done, total: toCheck.length, unit: 'objects', done: true });
  options.signal?.throwIfAborted();
  // Plan order, not completion order.
  const order = new Map(plan.entries.map((e, i) => [e.key, i]));
  problems.sort((a, b) => (order.get(a.key) ?? 0) - (order.get(b.key) ?? 0));
  if (unchecked.length > 0) {
    throw new InfrastructureError(`could not check ${unchecked.length} of ${toCheck.length} objects against the server`, {
      details: [...unchecked, ...problems.map((p) => `${describeObject(p.ref)}: ${oneLine(p.message)}`)],
      hint: 'Check that the local control plane and its provider controllers are running (their logs are in the install directory), then run the command again.',
    });
  }
  return { checked: toCheck.length, problems, durationMs: performance.now() - started };
}
