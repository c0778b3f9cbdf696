import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, ExitCode, UsageError, exitCodeOf } from '../errors.js';
import { checkKubeconfigFile } from './kubeconfig-file.js';

const valid = `apiVersion: v1
kind: Config
current-context: admin@mgmt
contexts:
  - name: admin@mgmt
    context: {cluster: mgmt, user: admin}
clusters:
  - name: mgmt
    cluster: {server: 'https://127.0.0.1:6443'}
users:
  - name: admin
    user: {}
`;

describe('checkKubeconfigFile', () => {
  let dir: string;
  let file: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kubeconfig-file-'));
    file = path.join(dir, 'kubeconfig');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function failure(content: string): Promise<ConfigError> {
    await writeFile(file, content);
    const error = await checkKubeconfigFile(file, '--management-kubeconfig').then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect(exitCodeOf(error)).toBe(ExitCode.config);
    expect((error as ConfigError).message).toContain(file);
    expect((error as ConfigError).hint).toContain('--management-kubeconfig');
    return error as ConfigError;
  }

  it('accepts a kubeconfig whose current context names a cluster with a server', async () => {
    await writeFile(file, valid);
    await expect(checkKubeconfigFile(file, '--pivot-to')).resolves.toBeUndefined();
  });

  it('refuses garbage given by flag as a config error naming the file and line, before any client exists', async () => {
    // The client library takes plain text for an empty kubeconfig and fails later, far from the flag.
    expect((await failure('just some text\n')).problems).toEqual([{ path: '(document)', message: expect.stringMatching(/expected a mapping/) }]);
    const syntax = await failure('clusters: [\n  {name: a\n');
    expect(syntax.message).toBe(`${file} is not valid YAML`);
    expect(syntax.problems[0]?.message).toMatch(/^line \d+, column \d+: /);
    await failure('\u0000\u0001\u0002binary');
  });

  it('names what a kubeconfig lacks', async () => {
    expect((await failure(valid.replace('current-context: admin@mgmt\n', ''))).problems[0]?.path).toBe('current-context');
    expect((await failure(valid.replace('name: admin@mgmt', 'name: other'))).problems[0]?.message).toBe('no context named "admin@mgmt" with a cluster');
    expect((await failure(valid.replace("server: 'https://127.0.0.1:6443'", "insecure-skip-tls-verify: true"))).problems[0]?.message).toBe('no cluster named "mgmt" with a server');
  });

  it('refuses an alias bomb and an oversized file with the limit that was hit', async () => {
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]', ...'bcdefg'.split('').map((name, i) => `${name}: &${name} [${Array(9).fill(`*${'abcdefg'[i]}`).join(', ')}]`)];
    expect((await failure(levels.join('\n'))).message).toMatch(/more YAML aliases than the kubeconfig limit of 100/);
    expect((await failure(`# ${'x'.repeat(4 * 1024 * 1024)}\n${valid}`)).message).toMatch(/over the kubeconfig size limit of 4 MiB/);
  });

  it('a missing file is a usage error naming the flag', async () => {
    const error = await checkKubeconfigFile(file, '--to-kubeconfig').then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).message).toBe(`${file} (given by --to-kubeconfig) does not exist`);
  });
});
