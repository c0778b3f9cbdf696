/**
 * Runs a TypeScript entry point of this repository in a child Node (through tsx) with a module
 * hook that records the URL of every module it resolves: for tests of what a start or a request
 * imports (src/cli/startup.test.ts, src/kube/client-library.test.ts). Timings are noise on a
 * shared machine; what is imported is not.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Resolve hook (runs on Node's hooks thread): appends every resolved URL to the log file. */
const hooksSource = `import { appendFileSync } from 'node:fs';
let logFile;
export function initialize(data) { logFile = data.logFile; }
export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  appendFileSync(logFile, result.url + '\\n');
  return result;
}
`;

export interface RecordedRun {
  stdout: string;
  stderr: string;
  /** The child's exit code (0 when it succeeded). */
  code: unknown;
  /** Every module URL the child resolved, in order. */
  urls: string[];
}

export class ModuleRecorder {
  private runs = 0;

  private constructor(private readonly dir: string) {}

  static async create(): Promise<ModuleRecorder> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-module-recorder-'));
    await writeFile(path.join(dir, 'hooks.mjs'), hooksSource);
    return new ModuleRecorder(dir);
  }

  /** Runs `entry` (a .ts or .mts file) with `args`, cwd the repository; never rejects on a non-zero exit (the caller checks `code`). */
  async run(entry: string, args: readonly string[]): Promise<RecordedRun> {
    this.runs += 1;
    const logFile = path.join(this.dir, `run-${this.runs}.log`);
    const register = path.join(this.dir, `register-${this.runs}.mjs`);
    await writeFile(logFile, '');
    await writeFile(
      register,
      `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(path.join(this.dir, 'hooks.mjs')).href)}, { data: { logFile: ${JSON.stringify(logFile)} } });\n`,
    );
    // tsx first, the recorder last: the hook registered last runs first and sees tsx's final answer.
    const { stdout, stderr, code } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--import', pathToFileURL(register).href, entry, ...args], {
      cwd: repoRoot,
      env: { ...process.env, NO_COLOR: '1' },
      timeout: 60_000,
    }).then(
      ({ stdout, stderr }) => ({ stdout, stderr, code: 0 as unknown }),
      (error: { stdout: string; stderr: string; code?: unknown }) => ({ stdout: error.stdout, stderr: error.stderr, code: error.code }),
    );
    const urls = (await readFile(logFile, 'utf8')).split('\n').filter(Boolean);
    return { stdout, stderr, code, urls };
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Whether `urls` hold a module of the npm package `name`. */
export function importsPackage(urls: readonly string[], name: string): boolean {
  return urls.some((url) => url.includes(`/node_modules/${name}/`));
}
