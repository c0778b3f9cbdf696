/**
 * The vSphere platform's part of the install config: `platform.vsphere` (vCenter, the
 * inventory to place machines in, the credentials file, the control-plane endpoint) and
 * each pool's `platform.vsphere` (template, size, clone mode), their computed defaults,
 * rules, and the credentials-file checks.
 */
import { stat } from 'node:fs/promises';
import type { Loose, PlatformConfigSection, Rule, SchemaProblem } from '../../config/index.js';
import { computed, defaulted, optional, platformSection, required, resolveConfigPath, s } from '../../config/index.js';

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

export const vspherePlatformSchema = s.object(
  {
    server: required(s.string({ doc: 'vCenter address (host name or IP, optionally with :port).', pattern: /^[A-Za-z0-9.-]+(:\d{1,5})?$/, patternHint: 'a host name or IP address such as vcenter.example.com, without https://', examples: ['vcenter.example.com'] })),
    thumbprint: optional(s.string({ doc: 'SHA-1 or SHA-256 fingerprint of vCenter\'s TLS certificate; the provider then trusts exactly that certificate. Default: the system\'s trusted CAs.', pattern: thumbprintPattern, patternHint: 'colon-separated hex pairs such as 01:23:…:EF (20 or 32 pairs)' })),
    datacenter: required(inventoryPath('Datacenter to create the machines in.', 'DC0')),
    datastore: required(inventoryPath('Datastore of the machines\' disks.', 'LocalDS_0')),
    network: required(inventoryPath('Port group (network) of the machines\' one NIC, which gets its address by DHCP.', 'VM Network')),
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
