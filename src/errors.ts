/**
 * Typed errors. Every failure the CLI reports is one of these classes; `main.ts`
 * is the only place that turns them into an exit code. Each carries the next step
 * for the user (`hint`), because "what do I do now" is the question after every error.
 */

/** Exit codes by failure class. Documented in README.md ("Exit codes"). */
export const ExitCode = {
  ok: 0,
  /** A bug in provisioner: please report it with the log bundle. */
  internal: 1,
  /** Bad command-line usage (unknown flag, missing argument). */
  usage: 2,
  /** The install config or the manifests are invalid, or a user edit conflicts. */
  config: 3,
  /** The local environment is not usable: missing bundle, held lock, unusable port, disk. */
  environment: 4,
  /** Infrastructure did not become ready, or a control-plane process failed. */
  infrastructure: 5,
  /** Machines or nodes failed or stopped making progress. */
  machines: 6,
  /** A lifecycle hook (platform or user executable) failed. */
  hook: 7,
  /** A remote cluster (management or pivot target) refused or lacks what we need. */
  external: 8,
  /** Interrupted by SIGINT/SIGTERM; the install dir is resumable. 128 + SIGINT. */
  interrupted: 130,
} as const;
export type ExitCodeName = keyof typeof ExitCode;

export interface ProvisionerErrorOptions {
  /** The next step to take, in one sentence. */
  hint?: string;
  /** Extra lines (per-field problems, per-object failures) printed under the message. */
  details?: readonly string[];
  cause?: unknown;
}

/**
 * How a service names a field of its request in a message (`requestField('listenAddress')`):
 * services know no flag names; the CLI writes the flag that set the field in its place
 * (src/cli/request-fields.ts), so the user reads the flag they typed.
 */
export function requestField(field: string): string {
  return `\u2039${field}\u203a`;
}

/** Every `requestField` in `text`, replaced by `name(field)`. */
export function nameRequestFields(text: string, name: (field: string) => string): string {
  return text.replace(/\u2039([A-Za-z][A-Za-z0-9]*)\u203a/g, (_, field: string) => name(field));
}

/** Base class: a failure with a class (exit code), a message and the next step. */
export abstract class ProvisionerError extends Error {
  abstract readonly exitCode: ExitCodeName;
  readonly hint: string | undefined;
  readonly details: readonly string[];

  constructor(message: string, options: ProvisionerErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
    this.details = options.details ?? [];
  }

  /** Writes `name(field)` for every `requestField` in the message, hint and details. */
  nameRequestFields(name: (field: string) => string): void {
    this.message = nameRequestFields(this.message, name);
    Object.assign(this, { hint: this.hint === undefined ? undefined : nameRequestFields(this.hint, name), details: this.details.map((d) => nameRequestFields(d, name)) });
  }

  /** Replaces the next step, for a caller that knows better than the layer that threw (e.g. a move run by another command). */
  replaceHint(hint: string): void {
    Object.assign(this, { hint });
  }
}

/** The user asked for something that cannot work as given (flags, arguments). */
export class UsageError extends ProvisionerError {
  readonly exitCode = 'usage' as const;
}

/** One problem in a configuration file, located by its field path. */
export interface FieldProblem {
  /** Dotted path into the document, e.g. `machinePools[1].quantity`. */
  path: string;
  message: string;
  hint?: string;
}

/** The install config, a manifest or an edit is invalid; lists every problem found. */
export class ConfigError extends ProvisionerError {
  readonly exitCode = 'config' as const;
  readonly problems: readonly FieldProblem[];

  constructor(message: string, problems: readonly FieldProblem[] = [], options: ProvisionerErrorOptions = {}) {
    super(message, {
      ...options,
      details: [
        ...problems.map((p) => `${p.path}: ${p.message}${p.hint ? ` (${p.hint})` : ''}`),
        ...(options.details ?? []),
      ],
    });
    this.problems = problems;
  }
}

/** This machine cannot do what was asked: bundle missing, lock held, port or disk trouble. */
export class EnvironmentError extends ProvisionerError {
  readonly exitCode = 'environment' as const;
}

/** A control-plane process or the infrastructure failed. */
export class InfrastructureError extends ProvisionerError {
  readonly exitCode = 'infrastructure' as const;
}

/** Machines or nodes failed, or stopped making progress. */
export class MachinesError extends ProvisionerError {
  readonly exitCode = 'machines' as const;
}

/** A lifecycle hook failed. */
export class HookError extends ProvisionerError {
  readonly exitCode = 'hook' as const;
}

/** A remote cluster refused a request or lacks a required provider. */
export class ExternalError extends ProvisionerError {
  readonly exitCode = 'external' as const;
}

/** The run was interrupted by a signal; state on disk is resumable. */
export class InterruptedError extends ProvisionerError {
  readonly exitCode = 'interrupted' as const;
}

/** Something that should not happen: a bug in provisioner. */
export class InternalError extends ProvisionerError {
  readonly exitCode = 'internal' as const;
}

/** The exit code for any thrown value: typed errors by class, anything else is a bug. */
export function exitCodeOf(error: unknown): number {
  if (error instanceof ProvisionerError) return ExitCode[error.exitCode];
  return ExitCode.internal;
}

/** Message of an unknown thrown value, for logs. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
