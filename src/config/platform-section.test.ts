/**
 * Config knows no platform: these tests compose the install config from two made-up
 * platforms and check that everything platform-specific comes from their sections.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { composeInstallConfigSchema } from './install-config.js';
import { validateInstallConfigText } from './load.js';
import { platformNameOf, type PlatformConfigSection } from './platform-section.js';
import { defaulted, optional, s } from './schema.js';

const sim: PlatformConfigSection = {
  name: 'sim',
  schema: s.object({}, { doc: 'A simulated platform.' }),
  machineSchema: s.object({ delay: defaulted(s.string({ doc: 'Delay.' }), '1s') }, { doc: 'Simulated machines.' }),
  rules: [],
  providerNamespaces: ['sim-system'],
};

const cloud: PlatformConfigSection = {
  name: 'cloud',
  schema: s.object({ size: defaulted(s.string({ doc: 'Default size.' }), 'small'), zone: optional(s.string({ doc: 'Zone.' })) }, { doc: 'A cloud.' }),
  machineSchema: s.object({ size: optional(s.string({ doc: 'Size.' })) }, { doc: 'Cloud machines.' }),
  machineDefaults(machine, { section, roles }) {
    machine.size ??= roles.includes('controlPlane') ? 'large' : section.size;
  },
  rules: [
    {
      name: 'cloud-zone',
      reads: ['platform'],
      check(_config, report) {
        report.warn(['platform', 'cloud', 'zone'], 'cloud rule ran');
      },
    },
  ],
  providerNamespaces: ['cloud-system'],
};

const schema = composeInstallConfigSchema([sim, cloud], 'sim');

const base = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
`;

function problems(text: string): string[] {
  try {
    validateInstallConfigText(text, { schema });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => p.path).sort();
    throw error;
  }
  return [];
}

describe('an install config composed from the registered platforms', () => {
  it('defaults to the default platform and fills its machine settings', () => {
    const { config, warnings } = validateInstallConfigText(base, { schema });
    expect(platformNameOf(config)).toBe('sim');
    expect(config.machinePools[1]?.platform).toEqual({ sim: { delay: '1s' } });
    expect(warnings.map((w) => w.path)).not.toContain('platform.cloud.zone');
  });

  it('takes another platform\'s section, its computed machine defaults and its rules', () => {
    const { config, warnings } = validateInstallConfigText(`${base}platform:\n  cloud: {size: medium}\n`, { schema });
    expect(platformNameOf(config)).toBe('cloud');
    expect(config.machinePools.map((p) => p.platform)).toEqual([{ cloud: { size: 'large' } }, { cloud: { size: 'medium' } }]);
    expect(warnings.map((w) => w.path)).toEqual(['platform.cloud.zone']);
  });

  it('refuses an unknown platform, two at once, and machine settings of another platform', () => {
    expect(problems(`${base}platform: {gcp: {}}\n`)).toEqual(['platform', 'platform.gcp']);
    expect(problems(`${base}platform: {sim: {}, cloud: {}}\n`)).toEqual(['platform']);
    expect(problems(base.replace('roles: [worker]', 'roles: [worker]\n    platform: {cloud: {size: x}}'))).toEqual(['machinePools[1].platform.cloud']);
  });

  it('reserves every platform\'s provider namespaces', () => {
    expect(problems(base.replace('  name: demo\n', '  name: demo\n  namespace: cloud-system\n'))).toEqual(['metadata.namespace']);
  });
});
