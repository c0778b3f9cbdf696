/**
 * A pivot that has to start the install's stopped local control plane (its resume after a
 * kill) starts it as create cluster did: the platform's controllers with the credentials
 * files they read and the listen address where the hosts reach it. Before, pivot.ts gave the
 * controllers only, so a resumed AWS pivot ran CAPA without its credentials and a hosts
 * pivot started no forwarder for the agents. The attach is intercepted: what matters is the
 * install pivot hands attachManagement, and the local control plane that makes
 * (localManagement), not a control plane.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { ConfigError } from '../errors.js';
import { nullSink } from '../events.js';
import type { InstallManagement, LocalControlPlaneRequest } from '../management/attach.js';

const seen: LocalControlPlaneRequest[] = [];
vi.mock('../management/attach.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../management/attach.js')>();
  return {
    ...actual,
    attachManagement: async (install: InstallManagement) => {
      seen.push(actual.localManagement(install));
      throw new Error('attach intercepted');
    },
  };
});
const { pivot } = await import('./pivot.js');

let dir = '';
beforeEach(async () => {
  seen.length = 0;
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-pivot-source-'));
  await mkdir(controlPlaneLayout(dir).etcdDataDir, { recursive: true });
  await writeFile(path.join(dir, 'target.kubeconfig'), `apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: t, user: {token: x}}]
contexts: [{name: t, context: {cluster: t, user: t}}]
current-context: t
`, { mode: 0o600 });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('pivot starts its source as create cluster did', () => {
  it('hands the platform\'s controllers their credentials files', async () => {
    const credentials = path.join(dir, 'aws-credentials');
    await writeFile(credentials, '[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = example\n', { mode: 0o600 });
    await writeFile(path.join(dir, 'install-config.yaml'), `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: prod
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
platform:
  aws:
    region: eu-west-3
    credentials:
      file: ${credentials}
`);
    await expect(pivot({ dir, toKubeconfig: path.join(dir, 'target.kubeconfig'), sink: nullSink, signal: new AbortController().signal })).rejects.toThrow('attach intercepted');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.credentials?.map((c) => [c.path, c.fileEnv])).toEqual([[credentials, 'AWS_SHARED_CREDENTIALS_FILE']]);
    expect(seen[0]!.controllers?.length).toBeGreaterThan(0);
  });

  it('refuses a listen address in the install config that is not this machine\'s, naming the field, instead of starting without it', async () => {
    await writeFile(path.join(dir, 'install-config.yaml'), `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: prod
bootstrap:
  listenAddress: 198.19.255.254
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
`);
    const error = await pivot({ dir, toKubeconfig: path.join(dir, 'target.kubeconfig'), sink: nullSink, signal: new AbortController().signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain('bootstrap.listenAddress');
    expect(seen).toHaveLength(0);
  });
});
