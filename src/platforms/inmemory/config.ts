/**
 * The in-memory platform's part of the install config: `platform.inmemory` (nothing to
 * set) and each pool's `platform.inmemory` (how long the simulated machines take).
 */
import type { PlatformConfigSection, Rule } from '../../config/index.js';
import { defaulted, durationString, s, soundPools } from '../../config/index.js';

export const inMemoryName = 'inmemory';

const inMemoryStartup = s.object(
  {
    vm: defaulted(durationString('Time until the simulated VM is provisioned.'), '10s'),
    node: defaulted(durationString('Time until the simulated Node is registered and ready.'), '2s'),
    apiServer: defaulted(durationString('Time until the simulated kube-apiserver is up (control-plane machines).'), '2s'),
    etcd: defaulted(durationString('Time until the simulated etcd member is up (control-plane machines).'), '2s'),
  },
  { doc: 'How long each simulated component of a machine takes to come up.' },
);

const inMemoryMachineSchema = s.object(
  {
    startup: defaulted(inMemoryStartup, {}),
    startupJitter: defaulted(s.number({ doc: 'Random extra fraction of each startup duration, from 0 to 1.', minimum: 0, maximum: 1 }), 0.2),
  },
  { doc: 'Machine settings of the in-memory platform: simulated machines that come up after the given delays.' },
);

const inMemoryPlatformSchema = s.object({}, { doc: 'The in-memory platform: simulated machines served by the bundled in-memory provider. Runs anywhere, needs no credentials.' });

const rules: Rule[] = [
  {
    name: 'inmemory-taints-are-simulated',
    reads: ['platform'],
    check(config, report) {
      soundPools(config, report).forEach(({ pool, index }) => {
        if (pool.taints.length > 0) {
          report.warn(['machinePools', index, 'taints'], 'in-memory Nodes are simulated: the taints are written to the kubeadm config, but the simulated Nodes do not carry them');
        }
      });
    },
  },
];

export const inMemoryConfig = {
  name: inMemoryName,
  schema: inMemoryPlatformSchema,
  machineSchema: inMemoryMachineSchema,
  rules,
  providerNamespaces: ['capd-system'],
} satisfies PlatformConfigSection;
