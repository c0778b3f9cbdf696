/**
 * Helpers for end-to-end tests (and the `create` benchmark): the CLI spawned as a user runs
 * it (`node bin/provisioner.js`), in the foreground or in the background with its output
 * collected, plus what a user would look at afterwards — the journal, the pidfiles, the
 * nodes of the new cluster through the bundled kubectl, and /proc.
 */
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { parse, stringify } from 'yaml';
import { ensureBinaries } from '../../../src/embedded/cache.js';
import { packageRoot } from '../../../src/embedded/catalog.js';
import type { JournalData } from '../../../src/lifecycle/journal.js';

export const cliPath = path.join(packageRoot, 'bin', 'provisioner.js');

/** Newest mtime of the compiled sources under `dir` (tests excluded). */
async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, await newestSource(file));
    else if (/\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name)) newest = Math.max(newest, await stat(file).then((s) => s.mtimeMs, () => 0));
  }
  return newest;
}

/** `npm run build` when dist/main.js is missing or older than a source file. */
export async function ensureBuilt(): Promise<void> {
  const built = await stat(path.join(packageRoot, 'dist', 'main.js')).then((s) => s.mtimeMs, () => 0);
  if (built >= (await newestSource(path.join(packageRoot, 'src')))) return;
  const build = await execa('npm', ['run', 'build'], { cwd: packageRoot, reject: false, all: true });
  if (build.exitCode !== 0) throw new Error(`npm run build failed:\n${build.all}`);
}

export interface CliRun {
  exitCode: number | undefined;
  signal: string | undefined;
  stdout: string;
  stderr: string;
  durationMs: number;
}

/** Runs the CLI to its end (never rejects on a non-zero exit). */
export async function cli(args: readonly string[], timeoutMs: number): Promise<CliRun> {
  const started = performance.now();
  const run = await execa(process.execPath, [cliPath, ...args], { cwd: packageRoot, reject: false, timeout: timeoutMs, stdin: 'ignore' });
  return { exitCode: run.exitCode, signal: run.signal, stdout: run.stdout, stderr: run.stderr, durationMs: performance.now() - started };
}

/** A CLI run in the background, its output collected as it comes. */
export interface BackgroundCli {
  child: ResultPromise;
  pid: number;
  stdout(): string;
  stderr(): string;
  /** Set once the process ended. */
  ended(): boolean;
  /** Resolves when `pattern` shows on stderr; rejects if the process ends first or after `timeoutMs`. */
  waitForStderr(pattern: RegExp, timeoutMs: number): Promise<void>;
  /** The run's end, as `cli()` reports it. */
  result(): Promise<CliRun>;
}

export interface StartCliOptions {
  /**
   * Start the CLI as the leader of its own process group, as a shell starts a foreground
   * job, so `process.kill(-pid, 'SIGINT')` is what a terminal's Ctrl-C sends. Default false.
   */
  processGroup?: boolean;
}

export function startCli(args: readonly string[], timeoutMs: number, options: StartCliOptions = {}): BackgroundCli {
  const started = performance.now();
  const child = execa(process.execPath, [cliPath, ...args], { cwd: packageRoot, reject: false, timeout: timeoutMs, stdin: 'ignore', detached: options.processGroup ?? false });
  let out = '';
  let err = '';
  let done = false;
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const finished = child.then((r) => {
    done = true;
    return { exitCode: r.exitCode, signal: r.signal, stdout: out, stderr: err, durationMs: performance.now() - started } satisfies CliRun;
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${cliPath}`);
  return {
    child,
    pid: child.pid,
    stdout: () => out,
    stderr: () => err,
    ended: () => done,
    result: () => finished,
    waitForStderr: async (pattern, waitMs) => {
      const deadline = Date.now() + waitMs;
      while (!pattern.test(err)) {
        if (done) throw new Error(`the CLI ended before /${pattern.source}/ showed on its stderr:\n${err}`);
        if (Date.now() > deadline) throw new Error(`timed out after ${waitMs} ms waiting for /${pattern.source}/ on the CLI's stderr:\n${err}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
  };
}

/** The bundled kubectl, extracted to the cache if needed. Throws (with the bundle hint) when the bundle is missing. */
let kubectlPath: Promise<string> | undefined;
export function kubectl(): Promise<string> {
  kubectlPath ??= ensureBinaries(['kubectl']).then((paths) => {
    const found = paths.kubectl;
    if (!found) throw new Error('the bundle has no kubectl');
    return found;
  });
  return kubectlPath;
}

export interface NodeView {
  name: string;
  ready: boolean;
}

/** `kubectl --kubeconfig <kubeconfig> get nodes -o json`, reduced to name and Ready=True. */
export async function getNodes(kubeconfig: string): Promise<NodeView[]> {
  const run = await execa(await kubectl(), ['--kubeconfig', kubeconfig, 'get', 'nodes', '-o', 'json', '--request-timeout=30s'], { reject: false, timeout: 60_000 });
  if (run.exitCode !== 0) throw new Error(`kubectl get nodes exited ${run.exitCode}: ${run.stderr}`);
  const list = JSON.parse(run.stdout) as { items: { metadata: { name: string }; status?: { conditions?: { type: string; status: string }[] } }[] };
  return list.items.map((n) => ({ name: n.metadata.name, ready: n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false }));
}

export async function readJournal(dir: string): Promise<JournalData> {
  return JSON.parse(await readFile(path.join(dir, '.provisioner', 'journal.json'), 'utf8')) as JournalData;
}

/** Edits `<dir>/install-config.yaml` (parsed, changed by `edit`, written back), as a user would. */
export async function editInstallConfig(dir: string, edit: (doc: Record<string, unknown>) => void): Promise<void> {
  const file = path.join(dir, 'install-config.yaml');
  const doc = parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  edit(doc);
  await writeFile(file, stringify(doc));
}

/** A fake but well-formed AWS access key pair: what the e2e tests hand CAPA, and grep the log bundle for. */
export const fakeAwsKeys = { id: 'AKIAE2EFAKE000000000', secret: 'e2eFakeSecretValue0000000000000000000000' } as const;

/** Writes `<dir>/aws-credentials` (mode 0600, profile `default`) with the fake keys and points the install config at it. */
export async function useFakeAwsCredentials(dir: string): Promise<void> {
  const file = path.join(dir, 'aws-credentials');
  await writeFile(file, `[default]\naws_access_key_id = ${fakeAwsKeys.id}\naws_secret_access_key = ${fakeAwsKeys.secret}\n`, { mode: 0o600 });
  await editInstallConfig(dir, (doc) => {
    const platform = doc.platform as { aws: Record<string, unknown> };
    platform.aws.credentials = { file: 'aws-credentials' };
  });
}

/** Pids of running processes whose command line mentions `text` (e.g. an install dir), from /proc. */
export async function processesMentioning(text: string): Promise<{ pid: number; cmdline: string }[]> {
  const found: { pid: number; cmdline: string }[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(text)) continue;
    // A zombie waiting for its parent's wait() runs nothing.
    const status = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    if (/\) Z /.test(status)) continue;
    found.push({ pid: Number(name), cmdline: cmdline.replaceAll('\0', ' ').trim() });
  }
  return found;
}

export interface ProcStats {
  /** utime + stime, in ms. */
  cpuMs: number;
  /** Peak resident set (VmHWM), in bytes. */
  peakRssBytes: number;
}

/** CPU time and peak RSS of a running process from /proc; undefined once it is gone. */
export async function procStats(pid: number): Promise<ProcStats | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    // Fields after the `(comm)`, which may hold spaces: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const hwm = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
    return { cpuMs: (ticks * 1000) / clockTicksPerSecond, peakRssBytes: Number(hwm ?? 0) * 1024 };
  } catch {
    return undefined;
  }
}

/** USER_HZ: 100 on every Linux this runs on (`getconf CLK_TCK`). */
export const clockTicksPerSecond = 100;
