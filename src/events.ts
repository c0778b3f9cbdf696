/**
 * The engine's typed event stream. Services and domain modules emit these; the UI
 * (src/cli/ui) decides how they look: ink on a TTY, plain lines otherwise, JSON
 * lines with `--output json`. Nothing outside src/cli/ui prints.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const levelRank: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** True when a log event at `level` passes a `minLevel` filter (debug < info < warn < error). */
export function atLeast(level: LogLevel, minLevel: LogLevel): boolean {
  return levelRank[level] >= levelRank[minLevel];
}

/** A free-form message, with structured fields for the debug log and JSON output. */
export interface LogEvent {
  type: 'log';
  level: LogLevel;
  message: string;
  fields?: Record<string, string | number | boolean>;
}

/** Progress on a countable task (bytes extracted, objects applied, machines ready). */
export interface ProgressEvent {
  type: 'progress';
  /** Stable id of the task, e.g. `extract:kube-apiserver`. */
  task: string;
  /** Human label, e.g. `Extracting kube-apiserver`. */
  label: string;
  current: number;
  /** Omitted when the total is unknown. */
  total?: number;
  unit?: 'bytes' | 'objects' | 'machines' | 'items';
  done?: boolean;
}

/** A lifecycle stage (of create cluster, management start, pivot...) started or ended. */
export interface StageEvent {
  type: 'stage';
  stage: string;
  state: 'started' | 'succeeded' | 'failed' | 'skipped';
  /** Set when the stage ended. */
  durationMs?: number;
  message?: string;
  /** Set when the stage ended, where counted: Kubernetes API requests (watch starts included) this process made during it. */
  requests?: number;
}

/** A supervised process changed state. */
export interface ProcessEvent {
  type: 'process';
  /** Component name, e.g. `etcd`, `kube-apiserver`, `capi-controller-manager`. */
  name: string;
  state: 'starting' | 'ready' | 'exited' | 'restarting' | 'stopped' | 'failed';
  pid?: number;
  /** Ports the process listens on, by role (e.g. `{ secure: 43211, health: 43212 }`). */
  ports?: Record<string, number>;
  exitCode?: number | null;
  signal?: string | null;
  /** Last lines of its log when it exited or failed. */
  logTail?: string[];
  logFile?: string;
  message?: string;
}

/** The observed state of one Kubernetes object that the engine waits on. */
export interface ObjectEvent {
  type: 'object';
  kind: string;
  namespace?: string;
  name: string;
  /** Phase or summary, e.g. `Provisioned`, `Running`. */
  phase?: string;
  ready: boolean;
  /** The condition that blocks readiness, with its reason and message. */
  blocking?: { condition: string; reason?: string; message?: string };
  /** Parent object for tree rendering, as `Kind/name`. */
  parent?: string;
  /**
   * The object is gone (deleted and finalized): views drop it, so a deletion is seen
   * to progress. The other fields repeat its last state. Default: false.
   */
  deleted?: boolean;
}

/** A result the user asked for (a path, a table) — rendered on stdout. */
export interface ResultEvent {
  type: 'result';
  /** What kind of result, for JSON consumers: e.g. `version`, `kubeconfig`. */
  kind: string;
  /** Human text, printed as-is on stdout in text modes. */
  text: string;
  /** Machine-readable payload for `--output json`. */
  data?: unknown;
  /** The text and data carry a credential (e.g. a registration token): shown on stdout, never written to the debug log. Default false. */
  secret?: boolean;
}

export type ProvisionerEvent = LogEvent | ProgressEvent | StageEvent | ProcessEvent | ObjectEvent | ResultEvent;

/** Where events go. Services receive one; tests collect into an array. */
export interface EventSink {
  emit(event: ProvisionerEvent): void;
}

/** A sink that drops everything; for callers that do not care. */
export const nullSink: EventSink = { emit() {} };

/** Shorthand for log events. */
export function log(sink: EventSink, level: LogLevel, message: string, fields?: LogEvent['fields']): void {
  sink.emit(fields ? { type: 'log', level, message, fields } : { type: 'log', level, message });
}
