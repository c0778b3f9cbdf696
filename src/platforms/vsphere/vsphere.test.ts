import { describe, expect, it } from 'vitest';
import { validateInstallConfigText, type InstallConfig } from '../../config/index.js';
import { ConfigError } from '../../errors.js';
import { generateManifests, installConfigSchema, platformControllers, platformFor } from '../index.js';
import { parseEntry, poolSize } from './address-pool.js';

const config = (network: string) => `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: vs
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
platform:
  vsphere:
    server: vcenter.example.com
    datacenter: DC0
    datastore: LocalDS_0
${network}
    resourcePool: /DC0/host/DC0_C0/Resources
    folder: /DC0/vm
    template: ubuntu
    controlPlaneEndpoint:
      host: 10.0.0.10
`;

const pool = (addresses: string, extra = '') => config(`    network:
      name: VM Network
      addressPool:
        addresses: ${addresses}
        prefix: 24
        gateway: 10.0.0.1
${extra}`);

function load(text: string) {
  return validateInstallConfigText(text, { schema: installConfigSchema });
}

function problems(text: string): readonly { path: string; message: string; hint?: string | undefined }[] {
  try {
    load(text);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('the config was accepted');
}

interface Device { networkName: string; dhcp4: boolean; addressesFromPools?: unknown[]; nameservers?: string[] }
function devices(cfg: InstallConfig): Device[][] {
  return generateManifests(cfg).manifests
    .filter((m) => m.object.kind === 'VSphereMachineTemplate')
    .map((m) => (m.object as unknown as { spec: { template: { spec: { network: { devices: Device[] } } } } }).spec.template.spec.network.devices);
}

describe('vsphere address pool', () => {
  it('reads entries as the manager does: address, range, CIDR without network and broadcast, gateway excluded', () => {
    expect(parseEntry('10.0.0.8/29')).toEqual({ first: 167772169, last: 167772174 });
    expect(parseEntry('10.0.0.9/29')).toEqual({ problem: '"10.0.0.9/29" has host bits set' });
    expect(parseEntry('10.0.0.9-10.0.0.3')).toEqual({ problem: '"10.0.0.9-10.0.0.3" ends before it starts' });
    expect(poolSize({ addresses: ['10.0.0.1-10.0.0.10', '10.0.0.5', '10.0.0.8/30'], gateway: '10.0.0.1' })).toBe(9);
  });

  it('without a pool: one DHCP device, no pool object, no pool controller', () => {
    const { config: cfg } = load(config('    network:\n      name: VM Network'));
    expect(devices(cfg).flat()).toEqual([{ networkName: 'VM Network', dhcp4: true, dhcp6: false }, { networkName: 'VM Network', dhcp4: true, dhcp6: false }]);
    expect(generateManifests(cfg).manifests.some((m) => m.object.kind === 'AddressPool')).toBe(false);
    expect(platformControllers(platformFor(cfg), cfg).map((c) => c.provider)).not.toContain('agent-provisioner');
  });

  it('with a pool: the AddressPool named like the cluster, every template claims from it, and its manager runs', () => {
    const { config: cfg, warnings } = load(pool('[10.0.0.20-10.0.0.29]', '        nameservers: [10.0.0.2]\n'));
    expect(warnings.filter((w) => w.path.includes('addressPool'))).toEqual([]);
    const set = generateManifests(cfg);
    const poolManifest = set.manifests.find((m) => m.object.kind === 'AddressPool')!;
    expect(poolManifest.file).toBe('02_infrastructure-resource_addresspool-vs.yaml');
    expect(poolManifest.object).toMatchObject({
      apiVersion: 'ipam.provisioner.dev/v1alpha1',
      metadata: { name: 'vs', namespace: 'vs', labels: { 'cluster.x-k8s.io/cluster-name': 'vs' } },
      spec: { addresses: ['10.0.0.20-10.0.0.29'], prefix: 24, gateway: '10.0.0.1' },
    });
    // Applied before the machine templates that name it.
    expect(set.manifests.indexOf(poolManifest)).toBeLessThan(set.manifests.findIndex((m) => m.object.kind === 'VSphereMachineTemplate'));
    expect(devices(cfg).flat()).toEqual(Array(2).fill({
      networkName: 'VM Network', dhcp4: false, dhcp6: false,
      addressesFromPools: [{ apiGroup: 'ipam.provisioner.dev', kind: 'AddressPool', name: 'vs' }], nameservers: ['10.0.0.2'],
    }));
    expect(platformControllers(platformFor(cfg), cfg).map((c) => c.binary)).toEqual(['capi-manager', 'capi-manager', 'capi-manager', 'capv-manager', 'capi-manager']);
    // nameservers defaults to none, written where declared.
    expect(load(pool('[10.0.0.20-10.0.0.29]')).config.platform.vsphere).toMatchObject({ network: { addressPool: { nameservers: [] } } });
  });

  it('refuses a pool smaller than the machines, addresses outside the gateway\'s network and bad entries, naming the field', () => {
    expect(problems(pool('[10.0.0.1-10.0.0.4]'))).toContainEqual(expect.objectContaining({
      path: 'platform.vsphere.network.addressPool.addresses', message: expect.stringContaining('the pool holds 3 addresses (gateway excluded) for 5 machines'),
    }));
    expect(problems(pool('[10.0.0.20-10.0.0.29, 10.0.1.5]'))).toContainEqual(expect.objectContaining({
      path: 'platform.vsphere.network.addressPool.addresses[1]', message: expect.stringContaining('10.0.1.5 lies outside 10.0.0.0/24, the gateway\'s network with prefix 24'),
    }));
    expect(problems(pool('[10.0.0.300]'))).toContainEqual(expect.objectContaining({
      path: 'platform.vsphere.network.addressPool.addresses[0]', message: expect.stringContaining('"10.0.0.300" is not an IPv4 address, range (a-b) or CIDR block'),
    }));
    expect(problems(config('    network: VM Network'))).toContainEqual(expect.objectContaining({
      path: 'platform.vsphere.network', message: expect.stringContaining('must be a mapping, got the string "VM Network"'), hint: expect.stringContaining('network: {name: <port group>}'),
    }));
  });

  it('warns when the pool has no address left for a rolling update', () => {
    const { warnings } = load(pool('[10.0.0.2-10.0.0.6]'));
    expect(warnings).toContainEqual(expect.objectContaining({ path: 'platform.vsphere.network.addressPool.addresses', message: expect.stringMatching(/exactly 5 addresses for 5 machines/) }));
  });
});
