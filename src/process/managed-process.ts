/**
 * One supervised child process with one lifecycle (envtest's model): configure, start (ready
 * when the caller's probe passes; fails fast if the process exits first; times out), stop
 * (SIGTERM, grace, SIGKILL). It knows nothing of what the process is.
 *
 * Children never outlive the CLI: on Linux the child is started through util-linux `setpriv
 * --pdeathsig KILL`, so the kernel SIGKILLs it the moment the CLI dies, even by SIGKILL.
 * PR_SET_PDEATHSIG follows the *thread* that spawned the child: start processes from the main
 * thread, not a worker thread. Where setpriv is missing (or lacks --pdeathsig) the child is
 * spawned plainly and the pidfile (`stateDir`) is what cleans it up: the next run's
 * `stopStale` finds it by pid and start time and stops it.
 *
 * Every child leads its own session and process group (setsid), so a terminal's Ctrl-C, which
 * goes to the CLI's foreground process group, reaches the CLI alone: the CLI then stops its
 * children itself, in its order. Stopping signals the child's whole group, so whatever the
 * child started stops with it.
 *
 * `detached: true` is for processes meant to outlive the CLI (a lasting management cluster):
 * no death signal, output straight into the log file, the child unref'd. The log cap then
 * applies only when the process is (re)started, since no one is reading its output.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { access, constants as fsConstants } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { EnvironmentError, InternalError, InterruptedError, messageOf } from '../errors.js';
import { nullSink, type EventSink, type ProcessEvent } from '../events.js';
import { hashArgs } from './args.js';
import { buildChildEnv, type ChildEnvOptions } from './env.js';
import { describeExit, ProcessError } from './errors.js';
import { defaultLogMaxBytes, readLogTail, rotateIfOver, RotatingLogFile } from './log-file.js';
import { removePidfile, stateDirEnv, writePidfile } from './pidfile.js';
import { polling, until, type Observation } from '../progress/until.js';
import { processStartTime } from './proc.js';
import type { ReadinessProbe } from './probes.js';

/** Default time a start may take until the probe passes: 60 s. */
const defaultStartTimeoutMs = 60_000;
/** Default pause between probe attempts: 250 ms. */
const defaultProbeIntervalMs = 250;
/** Default limit of one probe attempt: 5 s (never more than the time left). */
const defaultProbeTimeoutMs = 5_000;
/** Default wait after SIGTERM before SIGKILL: 10 s. */
const defaultStopGraceMs = 10_000;
/** Wait after SIGKILL before reporting the process as unkillable. */
const killWaitMs = 5_000;
/** After exit, how long to wait for the last output still in the pipes. */
const drainWaitMs = 1_000;
/** Where util-linux installs setpriv on Debian and most distributions. */
const setprivPath = '/usr/bin/setpriv';

export type ProcessState = 'idle' | 'starting' | 'ready' | 'stopping' | 'stopped' | 'exited';

export interface ManagedProcessOptions {
  /** Component name: log file `<logDir>/<name>.log`, pidfile `<stateDir>/pids/<name>.json`, events. */
  name: string;
  /** Path of the executable (absolute, or a name looked up on the child's PATH). */
  binary: string;
  /** Arguments, e.g. from `renderArgs`. Must hold no secrets: they are in the log header and /proc. Default none. */
  args?: readonly string[];
  /** The child's environment: allow-list plus extras (see `buildChildEnv`). Default: the default allow-list only. */
  env?: Omit<ChildEnvOptions, 'source'>;
  /** Working directory. Default: the CLI's. */
  cwd?: string;
  /** Directory of the log file; created if missing. */
  logDir: string;
  /** Size cap of the log file before it rotates to `<name>.log.1`. Default 20 MiB. */
  logMaxBytes?: number;
  /** Ready when this resolves true. Default: ready as soon as the process is spawned. */
  readiness?: ReadinessProbe;
  /** Time allowed for the probe to pass. Default 60 s. */
  startTimeoutMs?: number;
  /** Pause between probe attempts. Default 250 ms. */
  probeIntervalMs?: number;
  /** Limit of one probe attempt. Default 5 s. */
  probeTimeoutMs?: number;
  /** Wait after SIGTERM before SIGKILL. Default 10 s. */
  stopGraceMs?: number;
  /** Outlive the CLI (see the module comment). Default false. */
  detached?: boolean;
  /** Where the pidfile registry lives; without it no pidfile is written. Default none. */
  stateDir?: string;
  /** Ports it listens on, by role; recorded in the pidfile and events. Default none. */
  ports?: Record<string, number>;
  /** Receives `process` events. Default: dropped. */
  events?: EventSink;
  /**
   * Path of util-linux setpriv, used to give the child PR_SET_PDEATHSIG=SIGKILL; null spawns
   * plainly. Default `/usr/bin/setpriv` on Linux when it exists and supports --pdeathsig.
   */
  pdeathsigWrapper?: string | null;
}

/** How a process ended. */
export interface ExitInfo {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Its last log lines (20). */
  logTail: string[];
}

export interface StartOptions {
  /** Aborting stops the process and rejects the start with InterruptedError. */
  signal?: AbortSignal;
}

type StartOutcome = { kind: 'ready' } | { kind: 'timeout'; lastProbeError?: string } | { kind: 'aborted' } | { kind: 'exited'; info: ExitInfo };

export class ManagedProcess {
  readonly name: string;
  readonly logFile: string;
  readonly stopGraceMs: number;
  private readonly options: ManagedProcessOptions;
  private readonly events: EventSink;
  private child: ChildProcess | undefined;
  private exitInfo: Promise<ExitInfo> | undefined;
  private currentState: ProcessState = 'idle';
  private stopping: Promise<void> | undefined;
  private startAbort: AbortController | undefined;
  private readonly exitListeners = new Set<(info: ExitInfo) => void>();

  constructor(options: ManagedProcessOptions) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(options.name)) throw new InternalError(`Process name ${JSON.stringify(options.name)} cannot be a file name`);
    this.options = options;
    this.name = options.name;
    this.logFile = join(options.logDir, `${options.name}.log`);
    this.stopGraceMs = options.stopGraceMs ?? defaultStopGraceMs;
    this.events = options.events ?? nullSink;
  }

  get state(): ProcessState {
    return this.currentState;
  }

  /** Pid of the current child, while it runs. */
  get pid(): number | undefined {
    return this.child && this.child.exitCode === null && this.child.signalCode === null ? this.child.pid : undefined;
  }

  get ports(): Record<string, number> {
    return this.options.ports ?? {};
  }

  /**
   * Called when the process exits after it was ready without `stop()` being asked for
   * (the 'exit' event; no polling). Returns an unsubscribe function.
   */
  onUnexpectedExit(listener: (info: ExitInfo) => void): () => void {
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  /**
   * Spawns the process and resolves when the readiness probe passes. Rejects with
   * ProcessError when it exits first (at once, with its exit code or signal and log tail)
   * or is not ready within `startTimeoutMs` (it is then stopped); with EnvironmentError when
   * the binary cannot be run; with InterruptedError when `signal` aborts or `stop()` is called.
   * May be called again after the process exited or was stopped.
   */
  async start(options: StartOptions = {}): Promise<void> {
    if (this.currentState === 'starting' || this.currentState === 'ready' || this.currentState === 'stopping') {
      throw new InternalError(`${this.name} is already ${this.currentState}`);
    }
    if (options.signal?.aborted) throw this.interrupted();
    this.currentState = 'starting';
    this.stopping = undefined;
    const abort = new AbortController();
    this.startAbort = abort;
    const onAbort = () => abort.abort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const child = await this.spawnChild();
      if (abort.signal.aborted) {
        // stop() or the caller's signal came while we were spawning.
        this.currentState = 'starting';
        await this.stop();
        throw this.interrupted();
      }
      const exitInfo = this.exitInfo;
      if (exitInfo === undefined) throw new InternalError(`${this.name}: no exit watcher`);
      this.emit({ state: 'starting', pid: child.pid, ports: this.options.ports, logFile: this.logFile });
      await this.recordPidfile(child);

      const outcome = await Promise.race<StartOutcome>([
        exitInfo.then((info) => ({ kind: 'exited', info })),
        this.probeUntilReady(abort.signal),
      ]);
      // stop() was called or the caller aborted while we waited: whatever won the race, it is an interruption.
      const interrupted = this.currentState !== 'starting' || options.signal?.aborted === true;
      abort.abort(); // ends the probe loop when the exit won the race
      if (interrupted) {
        await this.stop();
        throw this.interrupted();
      }
      switch (outcome.kind) {
        case 'ready':
          this.currentState = 'ready';
          this.emit({ state: 'ready', pid: child.pid, ports: this.options.ports });
          return;
        case 'exited': {
          const { info } = outcome;
          throw new ProcessError(`${this.name} exited with ${describeExit(info.exitCode, info.signal)} before it was ready`, {
            processName: this.name,
            reason: 'exited',
            exitStatus: info.exitCode,
            exitSignal: info.signal,
            logTail: info.logTail,
            logFile: this.logFile,
          });
        }
        case 'timeout': {
          const timeoutMs = this.options.startTimeoutMs ?? defaultStartTimeoutMs;
          const why = `not ready after ${formatMs(timeoutMs)}${outcome.lastProbeError ? ` (last check: ${outcome.lastProbeError})` : ''}`;
          this.stopping = this.terminate(child, `stopped: ${why}`, this.stopGraceMs);
          await this.stopping;
          const logTail = await readLogTail(this.logFile);
          throw new ProcessError(`${this.name} was ${why}`, {
            processName: this.name,
            reason: 'timeout',
            exitStatus: null,
            exitSignal: null,
            logTail,
            logFile: this.logFile,
          });
        }
        case 'aborted':
          await this.stop();
          throw this.interrupted();
      }
    } catch (error) {
      if (this.currentState === 'starting') this.currentState = 'exited';
      throw error;
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      if (this.startAbort === abort) this.startAbort = undefined;
    }
  }

  /**
   * SIGTERM, wait up to `graceMs` (default `stopGraceMs`; 0: SIGKILL right after), then
   * SIGKILL. Idempotent: concurrent calls share one stop; a process that is not running
   * resolves at once. Rejects only when the process survives SIGKILL (a process stuck in the kernel).
   */
  stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return this.stopping;
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
      this.startAbort?.abort(); // a start still before its spawn gives up
      if (this.currentState !== 'idle') this.currentState = 'stopped';
      return Promise.resolve();
    }
    this.stopping = this.terminate(child, 'stopped', options.graceMs ?? this.stopGraceMs);
    return this.stopping;
  }

  private interrupted(): InterruptedError {
    return new InterruptedError(`Start of ${this.name} was interrupted`, { hint: 'Run the command again to continue.' });
  }

  private async terminate(child: ChildProcess, message: string, graceMs: number): Promise<void> {
    this.currentState = 'stopping';
    this.startAbort?.abort();
    const exitInfo = this.exitInfo ?? Promise.resolve(undefined);
    this.signalChild(child, 'SIGTERM');
    if (!(await settlesWithin(exitInfo, graceMs))) {
      this.signalChild(child, 'SIGKILL');
      if (!(await settlesWithin(exitInfo, killWaitMs))) {
        throw new InternalError(`${this.name} (pid ${child.pid}) did not exit after SIGKILL`, {
          hint: `Check the process with \`ps -o stat= -p ${child.pid}\`; a process in state D is stuck in the kernel.`,
        });
      }
    }
    this.currentState = 'stopped';
    if (this.options.stateDir !== undefined && child.pid !== undefined) await removePidfile(this.options.stateDir, this.name, child.pid);
    this.emit({ state: 'stopped', pid: child.pid, message });
  }

  private signalChild(child: ChildProcess, signal: NodeJS.Signals): void {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    try {
      // The child leads its own process group (see spawnChild): signal all of it, grandchildren included.
      process.kill(-child.pid, signal);
    } catch {
      child.kill(signal);
    }
  }

  private async spawnChild(): Promise<ChildProcess> {
    const { binary, detached = false } = this.options;
    const args = [...(this.options.args ?? [])];
    if (binary.includes('/')) {
      try {
        await access(binary, fsConstants.X_OK);
      } catch (error) {
        throw new EnvironmentError(`Cannot run ${this.name}: ${binary} is missing or not executable`, {
          hint: 'Reinstall provisioner or re-extract its bundle (see `provisioner version`).',
          cause: error,
        });
      }
    }
    mkdirSync(this.options.logDir, { recursive: true });
    const maxBytes = this.options.logMaxBytes ?? defaultLogMaxBytes;
    const header = `=== ${new Date().toISOString()} provisioner: starting ${this.name}: ${[binary, ...args].join(' ')}\n`;
    const env = buildChildEnv(this.options.env ?? {});
    // Lets the next run find this child even if this process dies before it records the pidfile.
    if (this.options.stateDir !== undefined) env[stateDirEnv] = this.options.stateDir;

    let child: ChildProcess;
    let log: RotatingLogFile | undefined;
    if (detached) {
      rotateIfOver(this.logFile, maxBytes);
      const fd = openSync(this.logFile, 'a', 0o644);
      try {
        writeSync(fd, header);
        child = spawn(binary, args, { cwd: this.options.cwd, env, detached: true, stdio: ['ignore', fd, fd] });
      } finally {
        closeSync(fd);
      }
      child.unref();
    } else {
      log = new RotatingLogFile(this.logFile, maxBytes);
      log.open();
      log.write(header);
      const wrapper = this.options.pdeathsigWrapper === undefined ? defaultPdeathsigWrapper() : this.options.pdeathsigWrapper;
      const [command, commandArgs] = wrapper === null ? [binary, args] : [wrapper, ['--pdeathsig', 'KILL', '--', binary, ...args]];
      // `detached` here means only setsid: out of the CLI's process group, so a terminal's Ctrl-C
      // does not reach the child before the CLI's ordered stop. The death signal still ties it to us.
      child = spawn(command, commandArgs, { cwd: this.options.cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      const sink = log;
      child.stdout?.on('data', (chunk: Buffer) => sink.write(chunk));
      child.stderr?.on('data', (chunk: Buffer) => sink.write(chunk));
    }

    if (child.pid === undefined) {
      const error = await new Promise<Error>((resolve) => child.once('error', resolve));
      log?.close();
      throw new EnvironmentError(`Cannot start ${this.name}: ${messageOf(error)}`, {
        hint: `Check that ${binary} can be executed by this user.`,
        cause: error,
      });
    }
    child.on('error', () => {}); // errors after spawn (e.g. a failed kill) surface through 'exit'
    this.child = child;
    this.exitInfo = this.watchExit(child, log);
    return child;
  }

  /** Resolves on the child's 'exit' (after its last output is in the log) and reports an unexpected one. */
  private watchExit(child: ChildProcess, log: RotatingLogFile | undefined): Promise<ExitInfo> {
    const drained = Promise.all([streamEnded(child.stdout), streamEnded(child.stderr)]).then(() => log?.close());
    const exited = new Promise<{ exitCode: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (exitCode, signal) => resolve({ exitCode, signal })),
    );
    const info = exited.then(async ({ exitCode, signal }) => {
      await settlesWithin(drained, drainWaitMs);
      return { exitCode, signal, logTail: await readLogTail(this.logFile) };
    });
    void info.then((result) => this.onExit(child, result));
    return info;
  }

  private async onExit(child: ChildProcess, info: ExitInfo): Promise<void> {
    if (this.child !== child) return;
    const wasReady = this.currentState === 'ready';
    if (!wasReady && this.currentState !== 'starting') return; // asked for by stop()
    if (wasReady) this.currentState = 'exited';
    this.emit({
      state: 'exited',
      pid: child.pid,
      exitCode: info.exitCode,
      signal: info.signal,
      logTail: info.logTail,
      logFile: this.logFile,
      message: `${this.name} exited with ${describeExit(info.exitCode, info.signal)}`,
    });
    if (this.options.stateDir !== undefined && child.pid !== undefined) {
      await removePidfile(this.options.stateDir, this.name, child.pid).catch(() => {});
    }
    if (wasReady) for (const listener of this.exitListeners) listener(info);
  }

  private async recordPidfile(child: ChildProcess): Promise<void> {
    const { stateDir } = this.options;
    if (stateDir === undefined || child.pid === undefined) return;
    const startTime = processStartTime(child.pid);
    if (startTime === undefined) return; // already gone: the exit race reports it
    await writePidfile(stateDir, {
      name: this.name,
      pid: child.pid,
      startTime,
      binary: this.options.binary,
      argsHash: hashArgs(this.options.binary, this.options.args ?? []),
      ports: this.options.ports ?? {},
      logFile: this.logFile,
      detached: this.options.detached ?? false,
      ownerPid: process.pid,
      startedAt: new Date().toISOString(),
    });
  }

  private async probeUntilReady(signal: AbortSignal): Promise<StartOutcome> {
    const probe = this.options.readiness;
    if (probe === undefined) return { kind: 'ready' };
    const attemptLimit = this.options.probeTimeoutMs ?? defaultProbeTimeoutMs;
    // A probe's answer is never progress: "no progress for the start timeout" is "not ready within it". The
    // first observation goes out before the first probe, so the deadline counts from here, not from its answer.
    const look = async (stopped: AbortSignal): Promise<Observation<string | undefined>> => {
      try {
        const ready = await probe(AbortSignal.any([stopped, AbortSignal.timeout(attemptLimit)]));
        return { state: ready ? 'done' : 'waiting', value: undefined, progress: 'probing' };
      } catch (error) {
        return { state: 'waiting', value: messageOf(error), progress: 'probing' };
      }
    };
    const probing = polling(look, this.options.probeIntervalMs ?? defaultProbeIntervalMs);
    const notReady = new Error('not ready');
    let lastProbeError: string | undefined;
    try {
      await until<string | undefined>(
        (observe, fail) => {
          observe({ state: 'waiting', value: undefined, progress: 'probing' });
          return probing(observe, fail);
        },
        {
          what: `${this.name} to be ready`,
          noProgressTimeoutMs: this.options.startTimeoutMs ?? defaultStartTimeoutMs,
          signal,
          onStall: (last) => {
            lastProbeError = last?.value;
            return notReady;
          },
        },
      );
      return { kind: 'ready' };
    } catch (error) {
      if (error === notReady) return lastProbeError === undefined ? { kind: 'timeout' } : { kind: 'timeout', lastProbeError };
      if (signal.aborted) return { kind: 'aborted' };
      throw error;
    }
  }

  private emit(event: Omit<ProcessEvent, 'type' | 'name'>): void {
    this.events.emit({ type: 'process', name: this.name, ...event });
  }
}

let cachedWrapper: string | null | undefined;

/** `/usr/bin/setpriv` when on Linux it exists and knows --pdeathsig (util-linux >= 2.33); otherwise null. */
export function defaultPdeathsigWrapper(): string | null {
  if (cachedWrapper === undefined) {
    cachedWrapper = null;
    if (process.platform === 'linux' && existsSync(setprivPath)) {
      const help = spawnSync(setprivPath, ['--help'], { encoding: 'utf8', timeout: 5_000 });
      if (help.status === 0 && help.stdout.includes('--pdeathsig')) cachedWrapper = setprivPath;
    }
  }
  return cachedWrapper;
}

function streamEnded(stream: Readable | null): Promise<void> {
  if (stream === null || stream.readableEnded || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}

/** Whether `promise` settles within `ms`; the timer is cleared either way. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
