import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, UsageError } from '../../errors.js';
import { buildProgram } from '../program.js';

let dir: string;
let out: string;
let err: string;
const stdinTTY = process.stdin.isTTY;

async function cli(...args: string[]): Promise<void> {
  const program = buildProgram({
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    signal: new AbortController().signal,
    onRenderer: () => {},
  });
  program.exitOverride();
  await program.parseAsync(['node', 'provisioner', ...args]);
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-cli-'));
  out = '';
  err = '';
  // Without a terminal the commands take flags only (no prompt).
  Object.defineProperty(process.stdin, 'isTTY', { value: false, configurable: true });
});
afterEach(async () => {
  Object.defineProperty(process.stdin, 'isTTY', { value: stdinTTY, configurable: true });
  await rm(dir, { recursive: true, force: true });
});

describe('provisioner create', () => {
  it('install-config then manifests, from flags', async () => {
    await cli('create', 'install-config', '--dir', dir, '--name', 'demo', '--control-plane-replicas', '1', '--workers', '3');
    expect(out).toBe(`Wrote ${path.join(dir, 'install-config.yaml')}\n`);
    expect(await readFile(path.join(dir, 'install-config.yaml'), 'utf8')).toContain('quantity: 3');
    out = '';
    await cli('create', 'manifests', '--dir', dir);
    expect(out).toMatch(/^Manifests in .*cluster-api: 8 files \(8 created\)\n$/);
    expect((await readdir(path.join(dir, 'cluster-api'))).length).toBe(8);
  });

  it('needs --name without a terminal', async () => {
    await expect(cli('create', 'install-config', '--dir', dir)).rejects.toBeInstanceOf(UsageError);
  });

  it('needs --region for aws', async () => {
    await expect(cli('create', 'install-config', '--dir', dir, '--name', 'demo', '--platform', 'aws')).rejects.toThrow(/--region is required/);
  });

  it('takes --regenerate from the environment, comma-separated, and refuses names it does not generate', async () => {
    await cli('create', 'install-config', '--dir', dir, '--name', 'demo');
    process.env.PROVISIONER_REGENERATE = 'nope-a.yaml, nope-b.yaml';
    try {
      await expect(cli('create', 'manifests', '--dir', dir)).rejects.toThrow(/nope-a\.yaml, nope-b\.yaml/);
    } finally {
      delete process.env.PROVISIONER_REGENERATE;
    }
  });

  it('exits with the config error when the install config is invalid', async () => {
    await cli('create', 'install-config', '--dir', dir, '--name', 'demo');
    await expect(cli('create', 'install-config', '--dir', dir, '--name', 'demo')).rejects.toBeInstanceOf(ConfigError);
  });
});

describe('provisioner diff and explain', () => {
  it('diff prints the per-object report on stdout', async () => {
    await cli('create', 'install-config', '--dir', dir, '--name', 'demo');
    await cli('create', 'manifests', '--dir', dir);
    out = '';
    await cli('diff', '--dir', dir);
    expect(out).toContain('No differences: the 8 manifests on disk are what the install config generates.');
  });

  it('explain prints the field documentation on stdout', async () => {
    await cli('explain', 'install-config.networking.podCIDRs');
    expect(out).toContain('FIELD:    install-config.networking.podCIDRs <[]string(cidr)> (default: ["192.168.0.0/16"])');
  });
});
