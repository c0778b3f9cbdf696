/** Typed failures of supervised processes. */
import { InfrastructureError, type ProvisionerErrorOptions } from '../errors.js';

export interface ProcessFailure {
  /** Component name. */
  processName: string;
  /** `exited`: it exited before it was ready; `timeout`: not ready in time; `restarts`: restart budget used up. */
  reason: 'exited' | 'timeout' | 'restarts';
  /** The process's exit code (`exitCode` is the CLI's exit class on every ProvisionerError). */
  exitStatus: number | null;
  exitSignal: NodeJS.Signals | null;
  /** Last lines of its log. */
  logTail: readonly string[];
  logFile: string;
}

/** A process did not become ready, or kept crashing. `details` holds its log tail. */
export class ProcessError extends InfrastructureError implements ProcessFailure {
  readonly processName: string;
  readonly reason: ProcessFailure['reason'];
  readonly exitStatus: number | null;
  readonly exitSignal: NodeJS.Signals | null;
  readonly logTail: readonly string[];
  readonly logFile: string;

  constructor(message: string, failure: ProcessFailure, options: ProvisionerErrorOptions = {}) {
    super(message, {
      hint: `See the last lines of its log below, and the whole log in ${failure.logFile}.`,
      ...options,
      details: [...failure.logTail.map((line) => `  ${line}`), ...(options.details ?? [])],
    });
    this.processName = failure.processName;
    this.reason = failure.reason;
    this.exitStatus = failure.exitStatus;
    this.exitSignal = failure.exitSignal;
    this.logTail = failure.logTail;
    this.logFile = failure.logFile;
  }
}

/** How an exit reads in a message: `code 1` or `signal SIGKILL`. */
export function describeExit(exitCode: number | null, signal: string | null): string {
  return signal ? `signal ${signal}` : `code ${exitCode ?? 'unknown'}`;
}
