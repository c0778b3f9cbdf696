/**
 * Start-up cost is what `--version` and `--help` import: the CLI runs in a child Node with
 * a module hook that records the URL of every module resolved, and the heavy libraries a
 * command needs only when it runs (the Kubernetes client, ink, react) must not be among
 * them. This checks what is imported, not how long it takes: timings are noise on a shared
 * machine (`npm run bench -- startup` measures them).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const mainTs = path.join(repoRoot, 'src/main.ts');

/**
 * Loaded only by commands that run: none of them may be imported to print help or the
 * version. yaml comes with the platform registry (~75 ms of CPU with the config schemas).
 */
const heavy = ['@kubernetes/client-node', 'ink', 'react', 'yaml'];

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

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-startup-'));
  await writeFile(path.join(dir, 'hooks.mjs'), hooksSource);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * Runs the CLI from source with the recording hook; returns its stdout and stderr and every module
 * URL it resolved. `exitCode`: what the CLI must exit with (default 0).
 */
async function runRecorded(name: string, args: string[], exitCode = 0): Promise<{ stdout: string; stderr: string; urls: string[] }> {
  const logFile = path.join(dir, `${name}.log`);
  const register = path.join(dir, `register-${name}.mjs`);
  await writeFile(logFile, '');
  await writeFile(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(path.join(dir, 'hooks.mjs')).href)}, { data: { logFile: ${JSON.stringify(logFile)} } });\n`,
  );
  // tsx first, the recorder last: the hook registered last runs first and sees tsx's final answer.
  const { stdout, stderr, code } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--import', pathToFileURL(register).href, mainTs, ...args], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: '1' },
    timeout: 60_000,
  }).then(
    ({ stdout, stderr }) => ({ stdout, stderr, code: 0 }),
    (error: { stdout: string; stderr: string; code?: unknown }) => ({ stdout: error.stdout, stderr: error.stderr, code: error.code }),
  );
  expect(code, stderr).toBe(exitCode);
  const urls = (await readFile(logFile, 'utf8')).split('\n').filter(Boolean);
  return { stdout, stderr, urls };
}

/** The packages among `urls` that are in `heavy`. */
function heavyPackagesIn(urls: string[]): string[] {
  return heavy.filter((pkg) => urls.some((url) => url.includes(`/node_modules/${pkg}/`)));
}

// A child Node compiling the CLI through tsx takes seconds on a loaded machine, beyond the unit tier's 20 s default.
describe('start-up imports', { timeout: 60_000 }, () => {
  it('--version imports neither the Kubernetes client nor ink, react or yaml', async () => {
    const { stdout, urls } = await runRecorded('version', ['--version']);
    const { version } = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(stdout.trim()).toBe(version);
    // The recorder saw the CLI load: an empty log would pass the check below for nothing.
    expect(urls).toContain(pathToFileURL(mainTs).href);
    expect(urls.some((url) => url.includes('/node_modules/commander/'))).toBe(true);
    expect(heavyPackagesIn(urls)).toEqual([]);
  });

  it('--help lists every command without importing them', async () => {
    const { stdout, urls } = await runRecorded('help', ['--help']);
    expect(stdout).toMatch(/^\s+create\b/m);
    expect(stdout).toMatch(/^\s+version\b/m);
    expect(heavyPackagesIn(urls)).toEqual([]);
  });

  it("a subcommand's --help shows its full options without importing what it runs", async () => {
    const { stdout, urls } = await runRecorded('create-cluster-help', ['create', 'cluster', '--help']);
    expect(stdout).toContain('--pivot-to <kubeconfig|self>');
    expect(stdout).toContain('--no-progress-timeout <minutes>');
    expect(heavyPackagesIn(urls)).toEqual([]);
    expect(urls.some((url) => url.includes('/src/services/'))).toBe(false);
  });

  it('a command that runs imports the Kubernetes client only when a client first needs its credentials', async () => {
    // No management cluster in an empty directory: the service runs, names what is missing and exits 2, having sent no request.
    const empty = await mkdtemp(path.join(dir, 'install-'));
    const { stderr, urls } = await runRecorded('hosts-list', ['hosts', 'list', '--dir', empty], 2);
    expect(stderr).toContain(`No running management cluster in ${empty}`);
    expect(urls.some((url) => url.includes('/src/services/'))).toBe(true);
    expect(urls.some((url) => url.includes('/src/kube/client.ts'))).toBe(true);
    expect(heavyPackagesIn(urls)).toEqual(['yaml']);
  });

  it('create install-config --help still lists the flags each platform declares', async () => {
    const { stdout } = await runRecorded('create-install-config-help', ['create', 'install-config', '--help']);
    expect(stdout).toMatch(/--platform <platform>\s+where machines run \(choices: "inmemory"/);
    expect(stdout).toContain('--region <');
  });
});
