/**
 * The install config (`install-config.yaml`): its schema, written once in the schema
 * language of ./schema.ts, and the TypeScript types derived from it. Validation,
 * the JSON Schema in manifests/install-config.schema.json and `provisioner explain`
 * all read this one declaration.
 */
import { parseCidr } from './cidr.js';
import { checkKubernetesVersion, defaultKubernetesVersion, supportedRangeText } from './kubernetes-versions.js';
import { checkQualifiedName, dns1035Label, dns1123Label, dns1123Subdomain, durationPattern, labelValuePattern } from './names.js';
import { computed, defaulted, optional, required, s, type Infer } from './schema.js';

export const installConfigApiVersion = 'provisioner.dev/v1alpha1';
export const installConfigKind = 'InstallConfig';
/** File name of the install config inside the install directory. */
export const installConfigFileName = 'install-config.yaml';

export const platformNames = ['inmemory', 'aws'] as const;
export type PlatformName = (typeof platformNames)[number];

export const machineRoles = ['etcd', 'controlPlane', 'worker'] as const;
export type MachineRole = (typeof machineRoles)[number];

export const hookStages = ['preProvision', 'infraReady', 'bootstrapData', 'postProvision'] as const;
export type HookStage = (typeof hookStages)[number];

/** Label domains whose labels CAPI copies from Machines to Nodes (besides user domains). */
export const nodeSyncedLabelDomains = ['node-role.kubernetes.io', 'node-restriction.kubernetes.io', 'node.cluster.x-k8s.io'] as const;

const credentialsHint = 'credentials are never written into the install config: reference a credentials file with platform.aws.credentials.file';

// ---------- pieces ----------

const cidr = (doc: string) =>
  s.string({
    doc,
    format: 'cidr',
    check: (value) => {
      const parsed = parseCidr(value);
      return parsed.ok ? undefined : parsed.problem + (parsed.hint ? ` (${parsed.hint})` : '');
    },
    checkHint: 'an IPv4 or IPv6 block written as network-address/prefix',
    examples: ['10.128.0.0/12'],
  });

const duration = (doc: string) =>
  s.string({ doc, format: 'duration', pattern: durationPattern, patternHint: 'a duration such as 30s, 5m or 1h30m', examples: ['10s', '5m'] });

function checkLabelKey(key: string): string | undefined {
  const problem = checkQualifiedName(key);
  if (problem) return problem;
  const slash = key.indexOf('/');
  if (slash < 0) return undefined;
  const domain = key.slice(0, slash);
  const reserved = ['kubernetes.io', 'k8s.io', 'cluster.x-k8s.io'].some((d) => domain === d || domain.endsWith(`.${d}`));
  if (reserved && !nodeSyncedLabelDomains.some((d) => domain === d)) {
    return `the ${domain} domain is reserved for Kubernetes and Cluster API`;
  }
  return undefined;
}

const labels = s.map(s.string({ doc: 'Label value: up to 63 alphanumerics, `-`, `_` or `.`.', maxLength: 63, pattern: labelValuePattern, patternHint: 'up to 63 alphanumerics, -, _ or ., starting and ending alphanumeric' }), {
  doc:
    'Labels for the machines of this pool. Cluster API copies labels in the ' +
    `${nodeSyncedLabelDomains.join(', ')} domains from Machines to Nodes; other labels are also passed to the kubelet ` +
    '(`--node-labels`) so that real nodes register with them.',
  keyCheck: checkLabelKey,
  keyHint: `use your own domain (example.com/team) or one of ${nodeSyncedLabelDomains.join(', ')}`,
  examples: [{ 'node-role.kubernetes.io/worker': '', 'example.com/team': 'storage' }],
});

const taint = s.object(
  {
    key: required(s.string({ doc: 'Taint key, a qualified name such as `example.com/dedicated`.', check: checkQualifiedName })),
    value: optional(s.string({ doc: 'Taint value; may be empty.', maxLength: 63, pattern: labelValuePattern, patternHint: 'up to 63 alphanumerics, -, _ or .' })),
    effect: required(s.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'], { doc: 'What happens to pods that do not tolerate the taint.' })),
  },
  { doc: 'A node taint.' },
);

// ---------- per-platform machine settings ----------

const inMemoryStartup = s.object(
  {
    vm: defaulted(duration('Time until the simulated VM is provisioned.'), '10s'),
    node: defaulted(duration('Time until the simulated Node is registered and ready.'), '2s'),
    apiServer: defaulted(duration('Time until the simulated kube-apiserver is up (control-plane machines).'), '2s'),
    etcd: defaulted(duration('Time until the simulated etcd member is up (control-plane machines).'), '2s'),
  },
  { doc: 'How long each simulated component of a machine takes to come up.' },
);

export const inMemoryMachineSchema = s.object(
  {
    startup: defaulted(inMemoryStartup, {}),
    startupJitter: defaulted(s.number({ doc: 'Random extra fraction of each startup duration, from 0 to 1.', minimum: 0, maximum: 1 }), 0.2),
  },
  { doc: 'Machine settings of the in-memory platform: simulated machines that come up after the given delays.' },
);

export const awsMachineSchema = s.object(
  {
    instanceType: computed(
      s.string({ doc: 'EC2 instance type.', pattern: /^[a-z0-9-]+\.[a-z0-9-]+$/, patternHint: 'an EC2 instance type such as t3.large or m6i.xlarge', examples: ['t3.large'] }),
      'platform.aws.defaultInstanceType',
    ),
    rootVolumeSize: defaulted(s.integer({ doc: 'Root volume size in GiB.', minimum: 8, maximum: 16384 }), 80),
    ami: optional(s.string({ doc: 'AMI id of the machine image. Default: platform.aws.ami when set; otherwise the provider looks an image up for the Kubernetes version.', pattern: /^ami-[0-9a-f]{8,17}$/, patternHint: 'an AMI id such as ami-0123456789abcdef0' })),
    subnet: optional(s.string({ doc: 'Subnet to place the machines in; one of platform.aws.subnets.', pattern: /^subnet-[0-9a-f]{8,17}$/, patternHint: 'a subnet id such as subnet-0123456789abcdef0' })),
    iamInstanceProfile: computed(s.string({ doc: 'IAM instance profile of the machines.', minLength: 1 }), 'the profiles clusterawsadm creates: control-plane.cluster-api-provider-aws.sigs.k8s.io for control-plane pools, nodes.cluster-api-provider-aws.sigs.k8s.io otherwise'),
  },
  { doc: 'Machine settings of the AWS platform.' },
);

const poolPlatform = s.object(
  {
    inmemory: optional(inMemoryMachineSchema),
    aws: optional(awsMachineSchema),
  },
  {
    doc: 'Platform machine settings of this pool, under the key of the cluster platform.',
    rules: ['Only the section of the cluster platform (the key set under `platform`) may be present.'],
  },
);

export const machinePoolSchema = s.object(
  {
    name: required(
      s.string({
        doc: 'Pool name, unique in the cluster; generated object names are `<cluster name>-<pool name>`.',
        pattern: dns1123Label,
        patternHint: 'lowercase letters, digits and -, starting and ending with a letter or digit',
        maxLength: 40,
        examples: ['control-plane', 'worker'],
      }),
    ),
    quantity: required(s.integer({ doc: 'Number of machines in the pool.', minimum: 0, maximum: 10000 })),
    roles: required(
      s.array(s.enum(machineRoles, { doc: 'A Kubernetes role.' }), {
        doc:
          'Roles of the machines, as in Rancher machine pools: `etcd`, `controlPlane`, `worker`. ' +
          'A pool with `controlPlane` becomes a KubeadmControlPlane; a pool with only `worker` becomes a MachineDeployment.',
        minItems: 1,
        unique: true,
        rules: [
          'Exactly one pool has the controlPlane role: kubeadm manages one control plane (KubeadmControlPlane) per cluster.',
          'A controlPlane pool also has the etcd role: kubeadm runs etcd stacked on every control-plane machine.',
          'etcd without controlPlane is not supported (kubeadm\'s stacked etcd; no external etcd).',
          'The controlPlane pool has an odd quantity of at least 1 (etcd needs a majority; the KubeadmControlPlane webhook rejects even counts with stacked etcd).',
          'controlPlane with worker makes the control-plane machines schedulable (no control-plane taint).',
        ],
        examples: [['etcd', 'controlPlane'], ['worker']],
      }),
    ),
    labels: defaulted(labels, {}),
    taints: defaulted(
      s.array(taint, {
        doc: 'Taints the machines register with (kubeadm nodeRegistration.taints).',
        rules: ['Each (key, effect) pair appears once.'],
      }),
      [],
    ),
    platform: computed(poolPlatform, 'the defaults of the cluster platform'),
  },
  { doc: 'A pool of machines with the same roles and settings (Rancher-style machine pool).' },
);

// ---------- cluster platform sections ----------

export const inMemoryPlatformSchema = s.object({}, { doc: 'The in-memory platform: simulated machines served by the bundled in-memory provider. Runs anywhere, needs no credentials.' });

export const awsPlatformSchema = s.object(
  {
    region: required(s.string({ doc: 'AWS region.', pattern: /^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+$/, patternHint: 'a region such as us-east-1', examples: ['us-east-1'] })),
    defaultInstanceType: defaulted(s.string({ doc: 'Instance type of pools that do not set one.', pattern: /^[a-z0-9-]+\.[a-z0-9-]+$/, patternHint: 'an EC2 instance type such as t3.large' }), 't3.large'),
    ami: optional(s.string({ doc: 'AMI id for all pools that do not set one. Default: the provider looks an image up for the Kubernetes version.', pattern: /^ami-[0-9a-f]{8,17}$/, patternHint: 'an AMI id such as ami-0123456789abcdef0' })),
    sshKeyName: optional(s.string({ doc: 'Name of an EC2 key pair to install on every machine.', pattern: /^[\x21-\x7e]+([\x20-\x7e]*[\x21-\x7e]+)*$/, patternHint: 'printable ASCII, not starting or ending with a space' })),
    vpcID: optional(s.string({ doc: 'An existing VPC to use. Default: the provider creates a VPC.', pattern: /^vpc-[0-9a-f]{8,17}$/, patternHint: 'a VPC id such as vpc-0123456789abcdef0' })),
    vpcCIDR: optional(cidr('CIDR of the VPC the provider creates (ignored with vpcID). Default: the provider\'s 10.0.0.0/16.')),
    subnets: optional(
      s.array(s.string({ doc: 'A subnet id.', pattern: /^subnet-[0-9a-f]{8,17}$/, patternHint: 'a subnet id such as subnet-0123456789abcdef0' }), {
        doc: 'Existing subnets to use (with vpcID). Default: the provider creates subnets.',
        minItems: 1,
        unique: true,
        rules: ['subnets and vpcID go together: set both or neither.'],
      }),
    ),
    credentials: defaulted(
      s.object(
        {
          file: defaulted(s.string({ doc: 'Path of an AWS shared credentials file; relative paths are relative to the install directory; `~` is your home.', minLength: 1, format: 'path' }), '~/.aws/credentials'),
          profile: defaulted(s.string({ doc: 'Profile in the credentials file.', minLength: 1 }), 'default'),
        },
        { doc: 'Where the AWS credentials are: a file reference, never the keys themselves.', unknownFieldHints: { accessKeyID: credentialsHint, secretAccessKey: credentialsHint, accessKeyId: credentialsHint, sessionToken: credentialsHint } },
      ),
      {},
    ),
    additionalTags: optional(s.map(s.string({ doc: 'Tag value.', maxLength: 256 }), { doc: 'Tags added to every AWS resource the provider creates.' })),
  },
  {
    doc: 'The AWS platform (Cluster API Provider AWS).',
    unknownFieldHints: { accessKeyID: credentialsHint, secretAccessKey: credentialsHint, accessKeyId: credentialsHint },
  },
);

const platformSchema = s.object(
  {
    inmemory: optional(inMemoryPlatformSchema),
    aws: optional(awsPlatformSchema),
  },
  { doc: 'Where the machines run: set exactly one key. `inmemory` runs anywhere (simulated machines).', exactlyOne: true },
);

// ---------- hooks ----------

const hookSchema = s.object(
  {
    path: required(s.string({ doc: 'Executable to run; relative paths are relative to the install directory.', minLength: 1, format: 'path', rules: ['The file exists and is executable.'] })),
    args: defaulted(s.array(s.string({ doc: 'An argument.' }), { doc: 'Arguments passed to the executable.' }), []),
    timeout: defaulted(duration('How long the hook may run before it is stopped and the stage fails.'), '10m'),
  },
  { doc: 'A user hook: an executable run at a stage of `create cluster`; a non-zero exit fails the stage.' },
);

const hookList = (doc: string) => optional(s.array(hookSchema, { doc }));

const hooksSchema = s.object(
  {
    preProvision: hookList('Run before any infrastructure object is applied.'),
    infraReady: hookList('Run when the infrastructure is ready and the control-plane endpoint is known.'),
    bootstrapData: hookList('Run when bootstrap data exists, before machines are created.'),
    postProvision: hookList('Run when the control plane and nodes are ready, before the hand-off.'),
  },
  { doc: 'User hooks by stage of `create cluster`, run in the order listed.' },
);

// ---------- the document ----------

export const installConfigSchema = s.object(
  {
    apiVersion: required(s.literal(installConfigApiVersion, { doc: `Version of this file's format: ${installConfigApiVersion}.` })),
    kind: required(s.literal(installConfigKind, { doc: `Always ${installConfigKind}.` })),
    metadata: required(
      s.object(
        {
          name: required(
            s.string({
              doc: 'Cluster name: the name of the Cluster object and the prefix of every generated object.',
              pattern: dns1035Label,
              patternHint: 'lowercase letters, digits and -, starting with a letter and ending with a letter or digit',
              maxLength: 40,
              examples: ['demo'],
            }),
          ),
          namespace: computed(
            s.string({
              doc: 'Namespace of the generated objects (created by the manifests).',
              pattern: dns1123Label,
              patternHint: 'lowercase letters, digits and -, starting and ending with a letter or digit',
              maxLength: 63,
              rules: ['Not a namespace Kubernetes or Cluster API owns (default, kube-*, capi-*, ...).'],
            }),
            'metadata.name',
          ),
        },
        { doc: 'Identity of the cluster.' },
      ),
    ),
    kubernetesVersion: defaulted(
      s.string({
        doc: `Kubernetes version of the cluster's machines, within the range the bundled Cluster API supports (${supportedRangeText()}).`,
        format: 'version',
        check: checkKubernetesVersion,
        checkHint: `use a version from ${supportedRangeText()}, e.g. ${defaultKubernetesVersion}`,
        examples: [defaultKubernetesVersion],
      }),
      defaultKubernetesVersion,
    ),
    networking: defaulted(
      s.object(
        {
          podCIDRs: defaulted(
            s.array(cidr('A pod network block.'), { doc: 'Pod networks: one block, or one IPv4 and one IPv6 block for dual-stack.', minItems: 1, maxItems: 2, rules: ['Pod and service blocks do not overlap.', 'At most one block per IP family; pods and services use the same families.'] }),
            ['192.168.0.0/16'],
          ),
          serviceCIDRs: defaulted(
            s.array(cidr('A service network block.'), { doc: 'Service networks: one block, or one IPv4 and one IPv6 block for dual-stack.', minItems: 1, maxItems: 2, rules: ['Pod and service blocks do not overlap.'] }),
            ['10.128.0.0/12'],
          ),
          serviceDomain: defaulted(s.string({ doc: 'DNS domain of services.', pattern: dns1123Subdomain, patternHint: 'a DNS domain such as cluster.local', maxLength: 253 }), 'cluster.local'),
        },
        { doc: 'Cluster networking.' },
      ),
      {},
    ),
    machinePools: required(
      s.array(machinePoolSchema, {
        doc: 'Machine pools. One pool has the controlPlane and etcd roles; worker pools become MachineDeployments.',
        minItems: 1,
        unique: 'name',
      }),
    ),
    platform: defaulted(platformSchema, { inmemory: {} }),
    hooks: optional(hooksSchema),
  },
  {
    doc: 'The install config: what cluster `provisioner create manifests` and `create cluster` build.',
    unknownFieldHints: { name: 'the cluster name is metadata.name', pods: 'see networking.podCIDRs', platforms: 'did you mean "platform"?' },
  },
);

/** The install config after validation and defaults: every defaulted and computed field is set. */
export type InstallConfig = Infer<typeof installConfigSchema>;
export type MachinePool = Infer<typeof machinePoolSchema>;
export type Taint = NonNullable<MachinePool['taints']>[number];
export type AwsPlatform = Infer<typeof awsPlatformSchema>;
export type AwsMachine = Infer<typeof awsMachineSchema>;
export type InMemoryMachine = Infer<typeof inMemoryMachineSchema>;
export type Hook = NonNullable<NonNullable<InstallConfig['hooks']>[HookStage]>[number];

/** The platform named by the config's `platform` section. */
export function platformOf(config: InstallConfig): PlatformName {
  return config.platform.aws ? 'aws' : 'inmemory';
}

export function hasRole(pool: MachinePool, role: MachineRole): boolean {
  return pool.roles.includes(role);
}

/** The one pool with the controlPlane role (validation guarantees exactly one). */
export function controlPlanePool(config: InstallConfig): MachinePool {
  const pool = config.machinePools.find((p) => hasRole(p, 'controlPlane'));
  if (!pool) throw new Error('install config has no controlPlane pool; validation should have caught this');
  return pool;
}

/** Pools that become MachineDeployments: those without the controlPlane role. */
export function workerPools(config: InstallConfig): MachinePool[] {
  return config.machinePools.filter((p) => !hasRole(p, 'controlPlane'));
}
