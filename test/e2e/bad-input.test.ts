/**
 * Bad input through the built CLI (`node bin/provisioner.js`), as a user meets it: a file
 * that is not what it should be is a config error (exit 3) naming the file and the reason,
 * never a stack trace and "a bug in provisioner", and nothing is written but the debug log.
 * Needs no bundle: every case fails before a binary would run. dist/ is rebuilt first when
 * older than src/.
 */
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/errors.js';
import { cli, ensureBuilt } from './support/cli.js';

const runTimeoutMs = 60_000;

/** Seven levels of nine aliases each: 9^7 (about 4.8 million) strings once expanded, from 300 bytes. */
const aliasBomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...'bcdefg'.split('').map((name, i) => `${name}: &${name} [${Array(9).fill(`*${'abcdefg'[i]}`).join(',')}]`)].join('\n') + '\n';

/** Every file under `dir`, relative, sorted. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name))).sort();
}

/** What the CLI printed is the typed error's form: the message, details, next step; no stack frames. */
function expectNoStackTrace(stderr: string): void {
  expect(stderr).not.toMatch(/^\s+(- )?at .+\(.*:\d+:\d+\)$/m);
  expect(stderr).not.toContain('This is a bug in provisioner');
}

let dir: string;

beforeAll(ensureBuilt, 600_000);
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-bad-input-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('bad input is a config error', () => {
  it('an alias-bomb install config: exit 3 naming the file and the alias limit, nothing written but the debug log', async () => {
    const file = path.join(dir, 'install-config.yaml');
    await writeFile(file, aliasBomb);

    const run = await cli(['create', 'manifests', '--dir', dir], runTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(ExitCode.config);
    expect(run.stderr).toContain(`${file} resolves more YAML aliases than the install config limit of 100`);
    expectNoStackTrace(run.stderr);
    expect(run.stdout).toBe('');
    expect(await filesUnder(dir)).toEqual(['install-config.yaml', path.join('logs', 'provisioner.log')]);
  });

  it('a garbage kubeconfig given by flag: exit 3 naming the flag and the file before anything starts', async () => {
    const kubeconfig = path.join(dir, 'garbage.kubeconfig');
    await writeFile(kubeconfig, 'this is not a kubeconfig\n');

    const run = await cli(['create', 'cluster', '--dir', dir, '--management-kubeconfig', kubeconfig], runTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(ExitCode.config);
    expect(run.stderr).toContain(`${kubeconfig} is not a valid kubeconfig`);
    expect(run.stderr).toContain('--management-kubeconfig');
    expectNoStackTrace(run.stderr);
    expect(await filesUnder(dir)).toEqual(['garbage.kubeconfig', path.join('logs', 'provisioner.log')]);
  });
});

describe('a mistyped --dir', () => {
  it('is a usage error (exit 2) naming the directory for every command that needs an install, and creates nothing', async () => {
    const missing = path.join(dir, 'typo');
    for (const command of [['create', 'cluster'], ['destroy', 'cluster'], ['destroy', 'bootstrap'], ['wait-for', 'install-complete'], ['management', 'stop']]) {
      const run = await cli([...command, '--dir', missing], runTimeoutMs);
      expect(run.exitCode, `${command.join(' ')}: ${run.stderr}`).toBe(ExitCode.usage);
      expect(run.stderr).toContain(`No install directory at ${missing}: ${command.join(' ')} needs one`);
      expectNoStackTrace(run.stderr);
      expect(await readdir(dir), `after ${command.join(' ')}`).toEqual([]);
    }
  });

  it('naming a directory without an install config: create cluster is a config error (exit 3) and records no run there', async () => {
    const run = await cli(['create', 'cluster', '--dir', dir], runTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(ExitCode.config);
    expect(run.stderr).toContain(`${path.join(dir, 'install-config.yaml')} does not exist`);
    expectNoStackTrace(run.stderr);
    expect(await filesUnder(dir)).toEqual([path.join('logs', 'provisioner.log')]);
  });
});
