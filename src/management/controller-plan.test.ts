import { describe, expect, it } from 'vitest';
import type { BundledComponents } from '../embedded/manifest.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { platforms, type ControllerRequirement, type CredentialFileReference } from '../platforms/index.js';
import { credentialsArgs, credentialsEnv, planProviders } from './attach.js';

/** A bundle as the build writes it: the core and in-memory providers served by capi-manager, AWS's own, and a CRD-only one. */
const components: BundledComponents[] = [
  ['cluster-api', 'capi-manager'],
  ['bootstrap-kubeadm', 'capi-manager'],
  ['control-plane-kubeadm', 'capi-manager'],
  ['infrastructure-docker', 'capi-manager'],
  ['infrastructure-aws', 'capa-manager'],
  ['infrastructure-crd-only', undefined],
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
    expect(planned.map((p) => p.controller)).toEqual(['capi-manager', 'capi-manager', 'capi-manager', 'capi-manager']);
    expect(planned.find((p) => p.component.provider === 'infrastructure-docker')?.env).toMatchObject({ POD_IP: '127.0.0.1' });
    expect(planned.find((p) => p.component.provider === 'cluster-api')?.env).toBeUndefined();
  });

  it('on aws starts core and capa only, with its gates and the credentials file by path for capa alone', () => {
    const planned = planProviders(components, { controllers: platform('aws').controllers, credentials, sink: new RecordingSink() });
    expect(planned.map((p) => p.component.provider)).toEqual(['cluster-api', 'bootstrap-kubeadm', 'control-plane-kubeadm', 'infrastructure-aws']);
    expect(planned.map((p) => p.controller)).toEqual(['capi-manager', 'capi-manager', 'capi-manager', 'capa-manager']);
    const capa = planned.find((p) => p.controller === 'capa-manager');
    expect(capa?.env).toEqual({ AWS_SHARED_CREDENTIALS_FILE: '/home/u/.aws/credentials', AWS_PROFILE: 'ops' });
    expect(capa?.featureGates).toEqual({ AutoControllerIdentityCreator: true, EKS: false, MachinePool: false });
    // The credentials file goes to the controller that reads it, and to no other.
    expect(planned.filter((p) => p.env?.AWS_SHARED_CREDENTIALS_FILE).map((p) => p.controller)).toEqual(['capa-manager']);
  });

  it('turns ClusterTopology on for the core and kubeadm control-plane providers, and the dev provider (its DevClusterTemplate webhook reads it)', () => {
    const planned = planProviders(components, { controllers: platform('inmemory').controllers, credentials: [], sink: new RecordingSink() });
    const gates = (provider: string) => planned.find((p) => p.component.provider === provider)?.featureGates;
    expect(gates('cluster-api')).toEqual({ ClusterTopology: true });
    expect(gates('control-plane-kubeadm')).toEqual({ ClusterTopology: true });
    expect(gates('infrastructure-docker')).toEqual({ ClusterTopology: true });
    expect(gates('bootstrap-kubeadm')).toBeUndefined();
  });

  it('without a selection (management start) runs every bundled controller with the settings the platforms declare', () => {
    const planned = planProviders(components, { credentials: [], sink: new RecordingSink() });
    expect(planned.map((p) => p.component.provider)).toEqual(components.map((c) => c.provider));
    expect(planned.map((p) => p.controller).filter(Boolean)).toEqual(['capi-manager', 'capi-manager', 'capi-manager', 'capi-manager', 'capa-manager']);
    expect(planned.find((p) => p.component.provider === 'infrastructure-docker')?.env).toMatchObject({ POD_IP: '127.0.0.1' });
    // No install config, so no credentials: capa runs without them (it reports each AWSCluster it cannot reconcile).
    expect(planned.find((p) => p.controller === 'capa-manager')?.env).toBeUndefined();
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

describe('credentialsArgs', () => {
  it('passes a file read by flag to its controller only', () => {
    const byFlag: CredentialFileReference[] = [{ path: '/d/vsphere.yaml', fileFlag: 'credentials-file', settings: {}, controllers: ['capv-manager'] }];
    expect(credentialsArgs(byFlag, 'capv-manager')).toEqual({ 'credentials-file': '/d/vsphere.yaml' });
    expect(credentialsEnv(byFlag, 'capv-manager')).toEqual({});
    expect(credentialsArgs(byFlag, 'capi-manager')).toEqual({});
  });
});

describe('planProviders with a requirement marked bundled: false', () => {
  const crdOnly: ControllerRequirement = { binary: 'crd-only-manager', provider: 'infrastructure-crd-only', featureGates: {}, bundled: false };

  it('installs the CRDs of a controller the bundle lacks, with a warning, and runs nothing for it', () => {
    const sink = new RecordingSink();
    const planned = planProviders(components, { controllers: [...platform('inmemory').controllers.slice(0, 3), crdOnly], credentials: [], sink });
    expect(planned.map((p) => p.component.provider)).toEqual(['cluster-api', 'bootstrap-kubeadm', 'control-plane-kubeadm', 'infrastructure-crd-only']);
    expect(planned.find((p) => p.component.provider === 'infrastructure-crd-only')?.controller).toBeUndefined();
    expect(JSON.stringify(sink.events)).toContain('crd-only-manager is not in the bundle yet');
  });

  it('refuses a bundle that lacks a binary marked bundled: true', () => {
    const withoutCapd = components.map((c) => (c.provider === 'infrastructure-docker' ? { ...c, binary: undefined } : c)) as BundledComponents[];
    expect(() => planProviders(withoutCapd, { controllers: platform('inmemory').controllers, credentials: [], sink: new RecordingSink() })).toThrow(/infrastructure-docker CRDs but not capi-manager/);
  });
});
