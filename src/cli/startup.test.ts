/**
 * Start-up cost is what `--version` and `--help` import: the CLI runs in a child Node with
 * a module hook that records the URL of every module resolved, and the heavy libraries a
 * command needs only when it runs (the Kubernetes client, ink, react) must not be among
 * them. This checks what is imported, not how long it takes: timings are noise on a shared
 * machine (`npm run bench -- startup` measures them).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importsPackage, ModuleRecorder, repoRoot, type RecordedRun } from '../../test/support/module-recorder.js';

const mainTs = path.join(repoRoot, 'src/main.ts');

/**
 * Loaded only by commands that run: none of them may be imported to print help or the
 * version. yaml comes with the platform registry (~75 ms of CPU with the config schemas).
 */
const heavy = ['@kubernetes/client-node', 'ink', 'react', 'yaml'];

let recorder: ModuleRecorder;
let dir: string;

beforeAll(async () => {
  recorder = await ModuleRecorder.create();
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-startup-'));
});

afterAll(async () => {
  await recorder.remove();
  await rm(dir, { recursive: true, force: true });
});

/** Runs the CLI from source with the recorder; checks it exits with `exitCode` (default 0). */
async function runRecorded(args: string[], exitCode = 0): Promise<RecordedRun> {
  const run = await recorder.run(mainTs, args);
  expect(run.code, run.stderr).toBe(exitCode);
  return run;
}

/** The packages among `urls` that are in `heavy`. */
function heavyPackagesIn(urls: string[]): string[] {
  return heavy.filter((pkg) => importsPackage(urls, pkg));
}

// A child Node compiling the CLI through tsx takes seconds on a loaded machine, beyond the unit tier's 20 s default.
describe('start-up imports', { timeout: 60_000 }, () => {
  it('--version imports neither the Kubernetes client nor ink, react or yaml', async () => {
    const { stdout, urls } = await runRecorded(['--version']);
    const { version } = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(stdout.trim()).toBe(version);
    // The recorder saw the CLI load: an empty log would pass the check below for nothing.
    expect(urls).toContain(pathToFileURL(mainTs).href);
    expect(urls.some((url) => url.includes('/node_modules/commander/'))).toBe(true);
    expect(heavyPackagesIn(urls)).toEqual([]);
  });

  it('--help lists every command without importing them', async () => {
    const { stdout, urls } = await runRecorded(['--help']);
    expect(stdout).toMatch(/^\s+create\b/m);
    expect(stdout).toMatch(/^\s+version\b/m);
    expect(heavyPackagesIn(urls)).toEqual([]);
  });

  it("a subcommand's --help shows its full options without importing what it runs", async () => {
    const { stdout, urls } = await runRecorded(['create', 'cluster', '--help']);
    expect(stdout).toContain('--pivot-to <kubeconfig|self>');
    expect(stdout).toContain('--no-progress-timeout <minutes>');
    expect(heavyPackagesIn(urls)).toEqual([]);
    expect(urls.some((url) => url.includes('/src/services/'))).toBe(false);
  });

  it('a command that runs imports the Kubernetes client only when a client first needs its credentials', async () => {
    // No management cluster in an empty directory: the service runs, names what is missing and exits 2, having sent no request.
    const empty = await mkdtemp(path.join(dir, 'install-'));
    const { stderr, urls } = await runRecorded(['hosts', 'list', '--dir', empty], 2);
    expect(stderr).toContain(`No running management cluster in ${empty}`);
    expect(urls.some((url) => url.includes('/src/services/'))).toBe(true);
    expect(urls.some((url) => url.includes('/src/kube/client.ts'))).toBe(true);
    expect(heavyPackagesIn(urls)).toEqual(['yaml']);
  });

  it('create install-config --help still lists the flags each platform declares', async () => {
    const { stdout } = await runRecorded(['create', 'install-config', '--help']);
    expect(stdout).toMatch(/--platform <platform>\s+where machines run \(choices: "inmemory"/);
    expect(stdout).toContain('--region <');
  });
});
