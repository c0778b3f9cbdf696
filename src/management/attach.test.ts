/**
 * localManagement: the one description of an install's local control plane that
 * attachManagement starts (create cluster, destroy, wait-for, images load and pivot alike).
 */
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { validateInstallConfigText } from '../config/index.js';
import { controlPlaneGoGcEnv } from '../controlplane/components.js';
import { binariesDirEnv } from '../embedded/cache.js';
import { UsageError } from '../errors.js';
import { nullSink } from '../events.js';
import { installConfigSchema, platformNamed } from '../platforms/index.js';
import { localManagement, prepareLocalControlPlane } from './attach.js';

const dir = '/tmp/provisioner-attach-test';
const awsConfig = validateInstallConfigText(`apiVersion: provisioner.dev/v1alpha1
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
      file: ${dir}/aws-credentials
`, { schema: installConfigSchema }).config;
const base = { dir, sink: nullSink, signal: new AbortController().signal };

describe('localManagement', () => {
  it('runs the platform\'s controllers with their credentials files, loopback only', () => {
    const request = localManagement({ ...base, config: awsConfig });
    expect(request.credentials?.map((c) => c.path)).toEqual([`${dir}/aws-credentials`]);
    expect(request.controllers?.length).toBeGreaterThan(0);
    expect(request.listenAddress).toBeUndefined();
    expect(request.detached).toBe(platformNamed('aws').lifecycle.machinesInController);
  });

  it('takes a flag\'s listen address over the config\'s, naming the flag', () => {
    const request = localManagement({ ...base, config: awsConfig, listenAddress: { address: '198.19.0.1', flag: '--listen-address' } });
    expect([request.listenAddress, request.listenAddressFrom]).toEqual(['198.19.0.1', '--listen-address']);
  });

  it('reads objects only without reconcile: no controllers, credentials or listen address', () => {
    const request = localManagement({ ...base, config: awsConfig, reconcile: false, detached: false, listenAddress: { address: '198.19.0.1', flag: '--listen-address' } });
    expect(request).toMatchObject({ reconcile: false, detached: false });
    expect(request.controllers ?? request.credentials ?? request.listenAddress).toBeUndefined();
  });

  it('falls back to the platform\'s controllers when the config no longer reads', () => {
    const platform = platformNamed('aws');
    const request = localManagement({ ...base, config: undefined, platform });
    expect(request.controllers).toEqual(platform.controllers);
    expect(request.credentials).toBeUndefined();
  });
});

describe('prepareLocalControlPlane', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('refuses a bad PROVISIONER_CONTROL_PLANE_GOGC before it extracts a binary or writes to the directory', async () => {
    const binaries = `${dir}-binaries`;
    vi.stubEnv(controlPlaneGoGcEnv, 'off');
    vi.stubEnv(binariesDirEnv, binaries);
    await expect(prepareLocalControlPlane({ ...base, detached: false })).rejects.toThrow(UsageError);
    await expect(prepareLocalControlPlane({ ...base, detached: false })).rejects.toThrow(`${controlPlaneGoGcEnv} is "off"`);
    expect(existsSync(binaries), 'the binary cache').toBe(false);
    expect(existsSync(dir), 'the install directory').toBe(false);
  });
});
