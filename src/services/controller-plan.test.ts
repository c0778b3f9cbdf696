import { describe, expect, it } from 'vitest';
import type { BundledComponents } from '../embedded/manifest.js';
import { RecordingSink } from '../events.js';
import { platforms, type CredentialFileReference } from '../platforms/index.js';
import { credentialsEnv, planProviders } from './local-controlplane.js';

/** A bundle as the build writes it: the core providers, the in-memory provider's, and a CRD-only one. */
const components: BundledComponents[] = [
  ['cluster-api', 'capi-manager'],
  ['bootstrap-kubeadm', 'kubeadm-bootstrap-manager'],
  ['control-plane-kubeadm', 'kubeadm-control-plane-manager'],
  ['infrastructure-docker', 'capd-manager'],
  ['infrastructure-aws', undefined],
].map(([provider, binary]) => ({
  provider: provider!,
  type: 'InfrastructureProvider',
  namespace: `${provider}-system`,
  version: 'v0.0.0',
  ...(binary ? { binary } : {}),
  file: `components/${provider}.yaml`,
  sha256: '0'.repeat(64),
}));

const platform = (name: string) => platforms.find((p) => p.name === name)!;
const credentials: CredentialFileReference[] = [{ path: '/home/u/.aws/credentials', fileEnv: 'AWS_SHARED_CREDENTIALS_FILE', settings: { AWS_PROFILE: 'ops' }, controllers: ['capa-manager'] }];

describe('planProviders', () => {
  it('runs exactly the in-memory platform\'s controllers and installs only their providers', () => {
    const planned = planProviders(components, { controllers: platform('inmemory').controllers, credentials: [], sink: new RecordingSink() });
    expect(planned.map((p) => p.component.provider)).toEqual(['cluster-api', 'bootstrap-kubeadm', 'control-plane-kubeadm', 'infrastructure-docker']);
    expect(planned.map((p) => p.controller)).toEqual(['capi-manager', 'kubeadm-bootstrap-manager', 'kubeadm-control-plane-manager', 'capd-manager']);
    expect(planned.find((p) => p.controller === 'capd-manager')?.env).toMatchObject({ POD_IP: '127.0.0.1' });
    expect(planned.find((p) => p.controller === 'capi-manager')?.env).toBeUndefined();
  });

  it('on aws starts no in-memory provider, and installs the CRDs of a controller the bundle lacks with a warning', () => {
    const sink = new RecordingSink();
    const planned = planProviders(components, { controllers: platform('aws').controllers, credentials, sink });
    expect(planned.map((p) => p.component.provider)).toEqual(['cluster-api', 'bootstrap-kubeadm', 'control-plane-kubeadm', 'infrastructure-aws']);
    expect(planned.map((p) => p.controller).filter(Boolean)).toEqual(['capi-manager', 'kubeadm-bootstrap-manager', 'kubeadm-control-plane-manager']);
    expect(JSON.stringify(sink.events)).toContain('capa-manager is not in the bundle yet');
    // The credentials file goes to the controller that reads it, and to no other.
    expect(planned.some((p) => p.env?.AWS_SHARED_CREDENTIALS_FILE)).toBe(false);
  });

  it('without a selection (management start) runs every bundled controller with the settings the platforms declare', () => {
    const planned = planProviders(components, { credentials: [], sink: new RecordingSink() });
    expect(planned.map((p) => p.component.provider)).toEqual(components.map((c) => c.provider));
    expect(planned.map((p) => p.controller).filter(Boolean)).toEqual(['capi-manager', 'kubeadm-bootstrap-manager', 'kubeadm-control-plane-manager', 'capd-manager']);
    expect(planned.find((p) => p.controller === 'capd-manager')?.env).toMatchObject({ POD_IP: '127.0.0.1' });
  });

  it('refuses a platform whose provider the bundle does not carry at all', () => {
    expect(() => planProviders(components.slice(0, 3), { controllers: platform('inmemory').controllers, credentials: [], sink: new RecordingSink() })).toThrow(/no infrastructure-docker provider/);
  });
});

describe('credentialsEnv', () => {
  it('points only the reading controller at the file, by path, with its non-secret settings', () => {
    expect(credentialsEnv(credentials, 'capa-manager')).toEqual({ AWS_SHARED_CREDENTIALS_FILE: '/home/u/.aws/credentials', AWS_PROFILE: 'ops' });
    expect(credentialsEnv(credentials, 'capi-manager')).toEqual({});
  });
});

describe('planProviders with a bundle that carries a controller its platform marks bundled: false', () => {
  const withCapa = components.map((c) => (c.provider === 'infrastructure-aws' ? { ...c, binary: 'capa-manager' } : c));

  it('runs it, with its feature gates and the credentials file by path', () => {
    const planned = planProviders(withCapa, { controllers: platform('aws').controllers, credentials, sink: new RecordingSink() });
    const capa = planned.find((p) => p.component.provider === 'infrastructure-aws');
    expect(capa?.controller).toBe('capa-manager');
    expect(capa?.env).toEqual({ AWS_SHARED_CREDENTIALS_FILE: '/home/u/.aws/credentials', AWS_PROFILE: 'ops' });
    expect(capa?.featureGates).toMatchObject({ AutoControllerIdentityCreator: true });
  });

  it('refuses a bundle that lacks a binary marked bundled: true', () => {
    const withoutCapd = components.map((c) => (c.provider === 'infrastructure-docker' ? { ...c, binary: undefined } : c)) as BundledComponents[];
    expect(() => planProviders(withoutCapd, { controllers: platform('inmemory').controllers, credentials: [], sink: new RecordingSink() })).toThrow(/not capd-manager/);
  });
});
