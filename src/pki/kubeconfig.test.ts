import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderKubeconfig, writeKubeconfig } from './kubeconfig.js';

const options = { server: 'https://127.0.0.1:6443', caCertPem: 'CA PEM\n', clientCertPem: 'CERT PEM\n', clientKeyPem: 'KEY PEM\n' };
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('kubeconfig', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pki-kubeconfig-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('renders clusters, users and the current context with embedded data', () => {
    const config = parse(renderKubeconfig({ ...options, namespace: 'capi-system' }));
    expect(config).toEqual({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'provisioner', cluster: { server: 'https://127.0.0.1:6443', 'certificate-authority-data': b64('CA PEM\n') } }],
      users: [{ name: 'provisioner-admin', user: { 'client-certificate-data': b64('CERT PEM\n'), 'client-key-data': b64('KEY PEM\n') } }],
      contexts: [{ name: 'provisioner-admin@provisioner', context: { cluster: 'provisioner', user: 'provisioner-admin', namespace: 'capi-system' } }],
      'current-context': 'provisioner-admin@provisioner',
      preferences: {},
    });
  });

  it('honours names and writes the file 0600', async () => {
    const path = join(dir, 'admin.kubeconfig');
    await writeKubeconfig(path, { ...options, clusterName: 'mgmt', userName: 'me', contextName: 'ctx' });
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const config = parse(await readFile(path, 'utf8'));
    expect(config['current-context']).toBe('ctx');
    expect(config.contexts[0].context).toEqual({ cluster: 'mgmt', user: 'me' });
  });
});
