import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, ExitCode, UsageError, exitCodeOf } from '../errors.js';
import { checkKubeconfigFile, currentCluster, staticCredentials } from './kubeconfig-file.js';

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

describe('currentCluster and staticCredentials', () => {
  const kubeconfig = (cluster: Record<string, unknown>, user: Record<string, unknown>) => ({
    'current-context': 'admin@mgmt',
    contexts: [{ name: 'admin@mgmt', context: { cluster: 'mgmt', user: 'admin' } }],
    clusters: [{ name: 'other', cluster: { server: 'https://198.18.0.9:6443' } }, { name: 'mgmt', cluster: { server: 'https://127.0.0.1:6443', ...cluster } }],
    users: [{ name: 'nobody', user: { token: 'not-this-one' } }, { name: 'admin', user }],
  });

  it("reads the current context's cluster, its CA file resolved against the kubeconfig's directory", () => {
    expect(currentCluster(kubeconfig({ 'certificate-authority': 'pki/ca.crt' }, {}), '/etc/kube')).toEqual({ name: 'mgmt', server: 'https://127.0.0.1:6443', caFile: '/etc/kube/pki/ca.crt' });
    expect(currentCluster(kubeconfig({ 'certificate-authority-data': 'Q0E=' }, {}))).toEqual({ name: 'mgmt', server: 'https://127.0.0.1:6443', caData: 'Q0E=' });
    expect(currentCluster({ ...kubeconfig({}, {}), 'current-context': 'gone' })).toEqual({ path: 'contexts', message: 'no context named "gone" with a cluster' });
  });

  it("reads certificates and tokens of the current context's user, files resolved against the kubeconfig's directory", () => {
    const embedded = kubeconfig({ 'certificate-authority-data': 'Q0E=', 'insecure-skip-tls-verify': false }, { 'client-certificate-data': 'Q0VSVA==', 'client-key-data': 'S0VZ' });
    expect(staticCredentials(embedded)).toEqual({ caData: 'Q0E=', certData: 'Q0VSVA==', keyData: 'S0VZ' });
    const files = kubeconfig(
      { 'certificate-authority': 'ca.crt', 'tls-server-name': 'kubernetes', 'insecure-skip-tls-verify': true, extensions: [{ name: 'cluster_info', extension: { provider: 'minikube.sigs.k8s.io' } }] },
      { 'client-certificate': '/abs/admin.crt', 'client-key': 'admin.key', 'token-file': 'token' },
    );
    expect(staticCredentials(files, '/home/u/.kube')).toEqual({
      caFile: '/home/u/.kube/ca.crt',
      serverName: 'kubernetes',
      insecure: true,
      certFile: '/abs/admin.crt',
      keyFile: '/home/u/.kube/admin.key',
      tokenFile: '/home/u/.kube/token',
    });
    expect(staticCredentials(kubeconfig({}, { token: 'abc' }))).toEqual({ token: 'abc' });
  });

  it('leaves to the client library a user that runs a plugin or names anything else, and a context without a user', () => {
    expect(staticCredentials(kubeconfig({}, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'aws' } }))).toBeUndefined();
    expect(staticCredentials(kubeconfig({}, { 'auth-provider': { name: 'oidc', config: {} } }))).toBeUndefined();
    expect(staticCredentials(kubeconfig({}, { username: 'admin', password: 'secret' }))).toBeUndefined();
    expect(staticCredentials(kubeconfig({}, { token: 'abc', as: 'someone' }))).toBeUndefined();
    expect(staticCredentials(kubeconfig({ 'proxy-url': 'http://proxy:3128' }, { token: 'abc' }))).toBeUndefined();
    expect(staticCredentials({ ...kubeconfig({}, {}), users: [] })).toBeUndefined();
    expect(staticCredentials('not a kubeconfig')).toBeUndefined();
  });
});
