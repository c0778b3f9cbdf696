/**
 * The vSphere platform's part of the install config: `platform.vsphere` (vCenter, the
 * inventory to place machines in, the credentials file, the control-plane endpoint) and
 * each pool's `platform.vsphere` (template, size, clone mode), the machines' network (a
 * port group, with DHCP or an address pool), their computed defaults, rules, and the
 * credentials-file checks.
 */
import { stat } from 'node:fs/promises';
import { isIPv4 } from 'node:net';
import type { Loose, PlatformConfigSection, Rule, SchemaProblem } from '../../config/index.js';
import { computed, defaulted, optional, platformSection, required, resolveConfigPath, s } from '../../config/index.js';
import { checkPoolEntry, entriesOutsideNetwork, maxPoolSize, poolSize } from './address-pool.js';

export const vsphereName = 'vsphere';

/** Where CAPV's manager reads its vCenter user from when the install config names no file. */
export const vsphereDefaultCredentialsFile = 'vsphere-credentials.yaml';

/** A SHA-1 (or SHA-256) certificate fingerprint as vCenter shows it: hex pairs separated by colons. */
const thumbprintPattern = /^([0-9A-Fa-f]{2}:){19}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$/;
/** A host name or an IPv4 address (what CAPV puts in the API server's certificate and kubeconfig). */
const hostPattern = /^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])\.)*([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])$/;
const inventoryPath = (doc: string, example: string) => s.string({ doc, minLength: 1, maxLength: 1024, examples: [example] });

const credentialsHint = 'credentials are never written into the install config: reference a credentials file with platform.vsphere.credentials.file';

const vsphereMachineSchema = s.object(
  {
    template: computed(inventoryPath('VM or template to clone the machines from (a Kubernetes image such as CAPV publishes).', 'ubuntu-2404-kube-v1.36.3'), 'platform.vsphere.template'),
    numCPUs: defaulted(s.integer({ doc: 'Virtual CPUs of each machine.', minimum: 2, maximum: 768 }), 2),
    memoryMiB: defaulted(s.integer({ doc: 'Memory of each machine, in MiB.', minimum: 2048, maximum: 24 * 1024 * 1024 }), 8192),
    diskGiB: defaulted(s.integer({ doc: 'Size of the cloned root disk, in GiB (at least the template\'s).', minimum: 8, maximum: 62 * 1024 }), 25),
    cloneMode: optional(s.enum(['fullClone', 'linkedClone'], { doc: 'How machines are cloned. Default: the provider\'s (a linked clone when the template has a snapshot, a full clone otherwise).' })),
  },
  { doc: 'Machine settings of the vSphere platform.' },
);

const ipv4 = (doc: string, example: string) => s.string({ doc, format: 'ipv4', check: (v) => (isIPv4(v) ? undefined : 'is not an IPv4 address'), examples: [example] });

const addressPoolSchema = s.object(
  {
    addresses: required(s.array(
      s.string({ doc: 'An IPv4 address, an inclusive range first-last, or a CIDR block (its network and broadcast addresses excluded).', minLength: 7, maxLength: 31, check: checkPoolEntry, checkHint: 'write 10.0.0.10, 10.0.0.10-10.0.0.20 or 10.0.0.0/28', examples: ['10.0.0.10-10.0.0.20'] }),
      { doc: 'Addresses the machines get, handed out in this order (the gateway never).', minItems: 1, maxItems: 64, unique: true },
    )),
    prefix: required(s.integer({ doc: 'Length of the network prefix every machine\'s address gets (24 for a /24).', minimum: 1, maximum: 32 })),
    gateway: required(ipv4('Default gateway of the machines; it must lie in the prefix of every address.', '10.0.0.1')),
    nameservers: defaulted(s.array(ipv4('A DNS server.', '10.0.0.2'), { doc: 'DNS servers written into each machine\'s network config. Default: none (the template\'s resolver settings).', maxItems: 3, unique: true }), []),
  },
  {
    doc: 'Static addresses for the machines from a pool provisioner serves in the management cluster (an AddressPool, ipam.provisioner.dev), instead of DHCP: each machine claims one through Cluster API\'s IPAM contract. Default: unset (DHCP).',
    rules: [
      `the pool must hold at least as many addresses as the machine pools' quantities add up to (one more for a rolling update); at most ${maxPoolSize}`,
      'every address lies in the gateway\'s network of the given prefix',
    ],
  },
);

const networkSchema = s.object(
  {
    name: required(inventoryPath('Port group (network) of the machines\' one NIC.', 'VM Network')),
    addressPool: optional(addressPoolSchema),
  },
  {
    doc: 'The machines\' network: their one NIC\'s port group, and where its address comes from (DHCP, or addressPool).',
    typeHint: 'network is a mapping: write network: {name: <port group>}, and addressPool under it for static addresses',
  },
);

export const vspherePlatformSchema = s.object(
  {
    server: required(s.string({ doc: 'vCenter address (host name or IP, optionally with :port).', pattern: /^[A-Za-z0-9.-]+(:\d{1,5})?$/, patternHint: 'a host name or IP address such as vcenter.example.com, without https://', examples: ['vcenter.example.com'] })),
    thumbprint: optional(s.string({ doc: 'SHA-1 or SHA-256 fingerprint of vCenter\'s TLS certificate; the provider then trusts exactly that certificate. Default: the system\'s trusted CAs.', pattern: thumbprintPattern, patternHint: 'colon-separated hex pairs such as 01:23:…:EF (20 or 32 pairs)' })),
    datacenter: required(inventoryPath('Datacenter to create the machines in.', 'DC0')),
    datastore: required(inventoryPath('Datastore of the machines\' disks.', 'LocalDS_0')),
    network: required(networkSchema),
    resourcePool: required(inventoryPath('Resource pool (path) to run the machines in.', '/DC0/host/DC0_C0/Resources')),
    folder: required(inventoryPath('VM folder (path) to put the machines in.', '/DC0/vm')),
    template: required(inventoryPath('VM or template to clone the machines from, for pools that do not set one.', 'ubuntu-2404-kube-v1.36.3')),
    controlPlaneEndpoint: required(s.object(
      {
        host: required(s.string({ doc: 'Address clients reach the API servers at: a load balancer or virtual IP in front of the control-plane machines, which you provide (provisioner deploys none).', pattern: hostPattern, patternHint: 'a host name or IPv4 address', examples: ['10.0.0.10'] })),
        port: defaulted(s.integer({ doc: 'Port of the endpoint.', minimum: 1, maximum: 65535 }), 6443),
      },
      { doc: 'The control plane\'s endpoint. vSphere gives no load balancer: its address must already route to the control-plane machines\' port 6443.' },
    )),
    credentials: defaulted(
      s.object(
        {
          file: defaulted(s.string({ doc: 'Path of a YAML file with `username:` and `password:` of a vCenter user, as CAPV\'s manager reads it; relative paths are relative to the install directory; `~` is your home.', minLength: 1, format: 'path' }), vsphereDefaultCredentialsFile),
        },
        { doc: 'Where the vCenter credentials are: a file reference, never the user and password themselves.', unknownFieldHints: { username: credentialsHint, password: credentialsHint } },
      ),
      {},
    ),
  },
  { doc: 'The vSphere platform (Cluster API Provider vSphere).', unknownFieldHints: { username: credentialsHint, password: credentialsHint } },
);

const vsphereSectionRef = { name: vsphereName, schema: vspherePlatformSchema, machineSchema: vsphereMachineSchema };

const rules: Rule[] = [
  {
    name: 'vsphere-insecure-without-thumbprint',
    reads: ['platform'],
    check(config, report) {
      const vsphere = platformSection(config, vsphereSectionRef);
      if (vsphere && !vsphere.thumbprint) {
        report.warn(['platform', 'vsphere', 'thumbprint'], 'no thumbprint: the provider must trust vCenter\'s certificate through the system CAs', 'set thumbprint to the certificate\'s fingerprint (openssl x509 -fingerprint) for a self-signed vCenter');
      }
    },
  },
  {
    name: 'vsphere-address-pool',
    reads: ['platform', 'machinePools'],
    check(config, report) {
      const pool = platformSection(config, vsphereSectionRef)?.network.addressPool;
      if (!pool) return;
      const at = ['platform', 'vsphere', 'network', 'addressPool'];
      for (const { index, network } of entriesOutsideNetwork(pool)) {
        report.error([...at, 'addresses', index], `${pool.addresses[index]} lies outside ${network}, the gateway's network with prefix ${pool.prefix}`, 'give addresses of the gateway\'s network, or the prefix of the network they share');
      }
      const size = poolSize(pool);
      const machines = config.machinePools.reduce((n, p) => n + p.quantity, 0);
      if (size > maxPoolSize) {
        report.error([...at, 'addresses'], `the pool holds ${size} addresses, more than the ${maxPoolSize} one pool may hold`, 'give a smaller range');
      } else if (size < machines) {
        report.error([...at, 'addresses'], `the pool holds ${size} address${size === 1 ? '' : 'es'} (gateway excluded) for ${machines} machines`, 'add addresses, or lower the machine pools\' quantities');
      } else if (size === machines) {
        report.warn([...at, 'addresses'], `the pool holds exactly ${size} addresses for ${machines} machines: a rolling update, which creates a machine before it deletes one, will wait for a free address`, 'add at least one address');
      }
    },
  },
];

export const vsphereConfig = {
  name: vsphereName,
  schema: vspherePlatformSchema,
  machineSchema: vsphereMachineSchema,
  rules,
  providerNamespaces: ['capv-system'],

  machineDefaults(machine: Loose, { section }: { section: Loose; roles: readonly unknown[] }) {
    machine.template ??= section.template;
  },

  /** The credentials file should exist and be private; warnings only: manifests can be made and reviewed without it. */
  async checkFiles(config, dir) {
    const warnings: SchemaProblem[] = [];
    const credentials = platformSection(config, vsphereSectionRef)?.credentials;
    if (credentials && typeof credentials.file === 'string') {
      const at = ['platform', 'vsphere', 'credentials', 'file'];
      const resolved = resolveConfigPath(dir, credentials.file);
      const info = await stat(resolved).catch(() => undefined);
      if (!info?.isFile()) {
        warnings.push({ path: at, message: `credentials file ${resolved} does not exist; create cluster will need it`, hint: 'write it with two lines, username: <user> and password: <password>, mode 0600' });
      } else if ((info.mode & 0o077) !== 0) {
        warnings.push({ path: at, message: `${resolved} is readable by other users (mode ${(info.mode & 0o777).toString(8)})`, hint: `run chmod 600 ${resolved}` });
      }
    }
    return { errors: [], warnings };
  },
} satisfies PlatformConfigSection;
