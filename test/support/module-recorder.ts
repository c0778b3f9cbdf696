/**
 * Runs a TypeScript entry point of this repository in a child Node (through tsx) with a module
 * hook that records the URL of every module it resolves: for tests of what a start or a request
 * imports (src/cli/startup.test.ts, src/kube/client-library.test.ts). Timings are noise on a
 * shared machine; what is imported is not.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execa } from 'execa';

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
  /** The child's exit code (0 when it succeeded; undefined when it was killed). */
  code: number | undefined;
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
    const { stdout, stderr, exitCode: code } = await execa(process.execPath, ['--import', 'tsx', '--import', pathToFileURL(register).href, entry, ...args], {
      cwd: repoRoot,
      env: { ...process.env, NO_COLOR: '1' },
      timeout: 60_000,
      reject: false,
    });
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
