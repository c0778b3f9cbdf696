/**
 * User hooks: executables named in the install config, run at a stage of `create
 * cluster`. Each gets the stage, the install directory and the local control plane's
 * kubeconfig path (a path, never credentials) in its environment, built from an
 * allow-list; its output goes to `<dir>/logs/hooks/<stage>-<n>.log`. A non-zero exit or
 * a timeout fails the stage with the exit code and the output's last lines.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { HookError, InterruptedError } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { buildChildEnv } from '../process/env.js';
import { readLogTail } from '../process/log-file.js';

export interface UserHook {
  path: string;
  args: readonly string[];
  /** Milliseconds before the hook is stopped and the stage fails. */
  timeoutMs: number;
}

export interface HookContext {
  stage: string;
  dir: string;
  kubeconfig: string;
  events: EventSink;
  signal?: AbortSignal;
}

/** Lines of a failed hook's output quoted in the error. */
const tailLines = 20;
/** Wait after SIGTERM to a hook's process group (on a timeout or an interrupt) before SIGKILL: 5 s to clean up. */
const hookStopGraceMs = 5_000;

export async function runUserHooks(hooks: readonly UserHook[], context: HookContext): Promise<void> {
  const logDir = path.join(context.dir, 'logs', 'hooks');
  await mkdir(logDir, { recursive: true, mode: 0o700 });
  for (const [index, hook] of hooks.entries()) {
    const executable = path.resolve(context.dir, hook.path);
    const logFile = path.join(logDir, `${context.stage}-${index + 1}.log`);
    const started = performance.now();
    log(context.events, 'info', `Running ${context.stage} hook ${hook.path}`);
    const subprocess = execa(executable, [...hook.args], {
      cwd: context.dir,
      env: buildChildEnv({
        extra: { PROVISIONER_STAGE: context.stage, PROVISIONER_DIR: context.dir, KUBECONFIG: context.kubeconfig },
      }),
      extendEnv: false,
      stdin: 'ignore',
      // stdout and stderr interleaved as the hook wrote them.
      all: true,
      timeout: hook.timeoutMs,
      reject: false,
      ...(context.signal ? { cancelSignal: context.signal } : {}),
      // Its own process group, so a timeout or Ctrl-C stops the hook's children too: a
      // child (`sleep`, `kubectl wait`) holds the output pipe, and the stage would wait for it.
      detached: true,
    });
    let timedOut = false;
    const signalGroup = (signal: NodeJS.Signals) => {
      try {
        if (subprocess.pid !== undefined) process.kill(-subprocess.pid, signal);
      } catch {
        // The group is already gone.
      }
    };
    // SIGTERM to the hook and everything it started, so each can clean up; SIGKILL what is left after the grace.
    let killTimer: NodeJS.Timeout | undefined;
    const stopGroup = () => {
      if (killTimer !== undefined) return;
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => signalGroup('SIGKILL'), hookStopGraceMs);
    };
    const killGroup = () => signalGroup('SIGKILL');
    const timer = setTimeout(() => {
      timedOut = true;
      stopGroup();
    }, hook.timeoutMs);
    context.signal?.addEventListener('abort', stopGroup, { once: true });
    // A detached child outlives us unless stopped: execa's own cleanup skips detached children.
    process.once('exit', killGroup);
    // Resolves once the hook has exited and every holder of its output pipe has closed it.
    const result = await subprocess;
    clearTimeout(timer);
    if (killTimer !== undefined) {
      // Stopped: what is left of its group (outside the pipe, past SIGTERM) goes now.
      clearTimeout(killTimer);
      killGroup();
    }
    context.signal?.removeEventListener('abort', stopGroup);
    process.removeListener('exit', killGroup);
    await writeFile(logFile, typeof result.all === 'string' ? result.all : '', { mode: 0o600 });
    const output = await readLogTail(logFile, tailLines);
    const took = Math.round(performance.now() - started);
    const details = [...output.map((l) => `| ${l}`), `full output: ${logFile}`];
    if (result.failed && result.isCanceled && !timedOut) {
      // Stopped because the run was interrupted (Ctrl-C): not the hook's fault, and the exit code says interrupted.
      throw new InterruptedError(`The ${context.stage} hook ${hook.path} was interrupted`, {
        details,
        hint: 'Run `provisioner create cluster` again to resume; the hook runs again from the start.',
      });
    }
    if (result.failed) {
      const why = result.timedOut || timedOut
        ? `did not finish within ${Math.round(hook.timeoutMs / 1000)} s`
        : result.exitCode !== undefined
            ? `exited with code ${result.exitCode}`
            : `could not run (${result.shortMessage})`;
      throw new HookError(`The ${context.stage} hook ${hook.path} ${why}`, {
        details,
        hint: 'Fix the hook (or remove it from install-config.yaml), then run `provisioner create cluster` again to resume.',
      });
    }
    log(context.events, 'info', `${context.stage} hook ${hook.path} succeeded in ${took} ms`, { log: logFile });
  }
}
