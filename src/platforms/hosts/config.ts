/**
 * The hosts platform's part of the install config: `platform.hosts` (the control-plane
 * endpoint, optional) and each pool's `platform.hosts` (which registered hosts it may
 * take, by their labels), and the rule that the local control plane must listen where
 * the hosts reach it (`bootstrap.listenAddress`).
 */
import type { Infer, PlatformConfigSection, Rule } from '../../config/index.js';
import { checkQualifiedName, defaulted, labelValuePattern, optional, parseCidr, platformSection, required, s } from '../../config/index.js';

export const hostsName = 'hosts';

/** The port kube-apiserver listens on on a control-plane host (kubeadm's default). */
const hostsApiServerPort = 6443;

/** The longest pod block prefix the bundled pod network takes: two /24 node subnets. */
const maxPodBlockPrefix = 23;

const hostPattern = /^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])\.)*([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])$/;

const matchLabels = s.map(
  s.string({ doc: 'Label value the host must carry.', maxLength: 63, pattern: labelValuePattern, patternHint: 'up to 63 alphanumerics, -, _ or ., starting and ending alphanumeric' }),
  { doc: 'Labels a host must carry (all of them) to be taken for this pool.', keyCheck: checkQualifiedName, keyHint: 'a label key such as example.com/rack', examples: [{ 'example.com/rack': 'r1' }] },
);

const hostsMachineSchema = s.object(
  {
    hostSelector: defaulted(
      s.object(
        { matchLabels: defaulted(matchLabels, {}) },
        {
          doc:
            'Which registered hosts (`provisioner hosts list`) the pool\'s machines may take. Besides these labels, a host must offer the pool\'s role ' +
            '(its registered roles include control-plane, or worker, or are empty) and be claimed by no other machine. ' +
            'Default: no labels, so any such host.',
        },
      ),
      {},
    ),
  },
  { doc: 'Machine settings of the hosts platform: which hosts the pool\'s machines are built on.' },
);

export const hostsPlatformSchema = s.object(
  {
    controlPlaneEndpoint: optional(
      s.object(
        {
          host: required(s.string({ doc: 'Address (host name or IPv4) clients reach the API servers at, e.g. a load balancer or virtual IP you provide in front of the control-plane hosts.', pattern: hostPattern, patternHint: 'a host name or IPv4 address', examples: ['198.18.0.100'] })),
          port: defaulted(s.integer({ doc: 'Port of the endpoint.', minimum: 1, maximum: 65535 }), hostsApiServerPort),
        },
        { doc: `The control plane's endpoint. Default: the address of the first control-plane host (as registered), port ${hostsApiServerPort}; with more than one control-plane host that address is a single point of failure.` },
      ),
    ),
  },
  {
    doc:
      'The hosts platform: real kubeadm clusters on machines that already exist and run the node agent (`provisioner hosts registration-command`). ' +
      'Needs bootstrap.listenAddress, an address of this machine the hosts reach.',
  },
);

export type HostsMachine = Infer<typeof hostsMachineSchema>;

const hostsSectionRef = { name: hostsName, schema: hostsPlatformSchema, machineSchema: hostsMachineSchema };

const rules: Rule[] = [
  {
    name: 'hosts-listen-address-required',
    reads: ['platform', 'bootstrap'],
    check(config, report) {
      if (!platformSection(config, hostsSectionRef)) return;
      if (config.bootstrap?.listenAddress) return;
      report.error(
        ['bootstrap', 'listenAddress'],
        'is required on the hosts platform: the hosts\' agents and kubelets reach the local control plane there (loopback is this machine only)',
        'set bootstrap.listenAddress to an address of this machine the hosts can reach (`ip -br addr` lists them), e.g. bootstrap: {listenAddress: 198.18.0.1}',
      );
    },
  },
  {
    // The bundled pod network gives each node a /24 of the pod block (kube-controller-manager's node CIDR size), so the block must hold two at least.
    name: 'hosts-pod-network',
    reads: ['platform', 'networking'],
    check(config, report) {
      if (!platformSection(config, hostsSectionRef) || config.networking.cni === 'none') return;
      const first = config.networking.podCIDRs[0];
      const parsed = first === undefined ? undefined : parseCidr(first);
      if (parsed?.ok && (parsed.cidr.family !== 4 || parsed.cidr.prefix > maxPodBlockPrefix || config.networking.podCIDRs.length > 1)) {
        report.error(
          ['networking', 'podCIDRs'],
          `the bundled pod network needs one IPv4 pod block of prefix /${maxPodBlockPrefix} or shorter (each node takes a /24 of it); got ${config.networking.podCIDRs.join(', ')}`,
          'use one block such as 192.168.0.0/16 (the default), or set networking.cni to none and bring a CNI that supports it',
        );
      }
    },
  },
  {
    name: 'hosts-endpoint-single-host',
    reads: ['platform', 'machinePools'],
    check(config, report) {
      const hosts = platformSection(config, hostsSectionRef);
      if (!hosts || hosts.controlPlaneEndpoint) return;
      const controlPlane = config.machinePools.find((p) => p.roles.includes('controlPlane'));
      if (controlPlane && controlPlane.quantity > 1) {
        report.warn(['platform', 'hosts', 'controlPlaneEndpoint'], `not set: the ${controlPlane.quantity} control-plane hosts are reached through the first one's address, which must stay up`, 'set controlPlaneEndpoint.host to a load balancer or virtual IP in front of the control-plane hosts');
      }
    },
  },
];

export const hostsConfig = {
  name: hostsName,
  schema: hostsPlatformSchema,
  machineSchema: hostsMachineSchema,
  rules,
  providerNamespaces: ['provisioner-agent-system'],
} satisfies PlatformConfigSection;

export { hostsSectionRef };
