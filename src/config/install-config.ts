/**
 * The install config (`install-config.yaml`): its schema, written once in the schema
 * language of ./schema.ts, and the TypeScript types derived from it. The common part is
 * declared here; each platform declares its `platform.<name>` sections in its own folder
 * (./platform-section.ts), and `composeInstallConfigSchema` puts them in place. Validation,
 * the JSON Schema in manifests/install-config.schema.json and `provisioner explain` all
 * read that one composed declaration.
 */
import { isIP } from 'node:net';
import type { FileKind } from '../input-files.js';
import { parseCidr } from './cidr.js';
import { checkKubernetesVersion, defaultKubernetesVersion, supportedRangeText } from './kubernetes-versions.js';
import { checkQualifiedName, dns1035Label, dns1123Label, dns1123Subdomain, durationPattern, labelValuePattern } from './names.js';
import type { InstallConfigSchema, PlatformConfigSection } from './platform-section.js';
import { computed, defaulted, optional, required, s, type DefaultValue, type Infer, type ObjectNode, type SchemaNode } from './schema.js';

export const installConfigApiVersion = 'provisioner.dev/v1alpha1';
export const installConfigKind = 'InstallConfig';
/** File name of the install config inside the install directory. */
export const installConfigFileName = 'install-config.yaml';

/**
 * The install config as a file the user writes: at most 4 MiB (a large one is a few KiB)
 * and 100 alias resolutions (`defaultMaxAliasCount`), so a nested-alias bomb is refused.
 */
export const installConfigFile: FileKind = {
  name: 'install config',
  maxBytes: 4 * 1024 * 1024,
  writer: 'user',
  hint: (file) => `fix ${file} (the problem is named above), then rerun; \`provisioner explain install-config\` documents every field`,
};

const machineRoles = ['etcd', 'controlPlane', 'worker'] as const;
export type MachineRole = (typeof machineRoles)[number];

export const hookStages = ['preProvision', 'infraReady', 'bootstrapData', 'postProvision'] as const;

/**
 * How `create manifests` lays the cluster out: `classic` writes the control plane and
 * every MachineDeployment as objects of their own; `topology` writes a ClusterClass with
 * its templates and a Cluster whose `spec.topology` names it, and Cluster API's topology
 * controller creates the rest.
 */
const manifestLayouts = ['classic', 'topology'] as const;

/**
 * The pod networks `networking.cni` offers: `flannel`, the bundled flannel (host-gw
 * backend), applied to the workload cluster by a ClusterResourceSet; `none`, nothing (the
 * user applies their own).
 */
export const cniChoices = ['flannel', 'none'] as const;
export type CniChoice = (typeof cniChoices)[number];
export type ManifestLayout = (typeof manifestLayouts)[number];
/** The layout of a config that sets none. */
const defaultManifestLayout: ManifestLayout = 'classic';
export type HookStage = (typeof hookStages)[number];

/** Label domains whose labels CAPI copies from Machines to Nodes (besides user domains). */
export const nodeSyncedLabelDomains = ['node-role.kubernetes.io', 'node-restriction.kubernetes.io', 'node.cluster.x-k8s.io'] as const;

// ---------- pieces ----------

/** A CIDR string field (platforms declare theirs with it too). */
export const cidrString = (doc: string) =>
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

/** A duration string field such as `10s` or `1h30m`. */
export const durationString = (doc: string) =>
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

/** Stand-in for the platform sections in the types: each platform reads its own through `platformSection`/`machineSection`. */
const anyPlatformSections = s.map(s.object({}, { doc: 'A platform section.' }), { doc: 'Platform sections by platform name.' });

/** A pool, with `platform` the node of its machine settings (composed from the platforms). */
function machinePoolNode<P extends SchemaNode>(platform: P) {
  return s.object(
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
      platform: computed(platform, 'the defaults of the cluster platform'),
    },
    { doc: 'A pool of machines with the same roles and settings (Rancher-style machine pool).' },
  );
}

// ---------- hooks ----------

const hookSchema = s.object(
  {
    path: required(s.string({ doc: 'Executable to run; relative paths are relative to the install directory.', minLength: 1, format: 'path', rules: ['The file exists and is executable.'] })),
    args: defaulted(s.array(s.string({ doc: 'An argument.' }), { doc: 'Arguments passed to the executable.' }), []),
    timeout: defaulted(durationString('How long the hook may run before it is stopped and the stage fails.'), '10m'),
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

// ---------- manifests ----------

const manifestsSchema = s.object(
  {
    layout: defaulted(
      s.enum(manifestLayouts, {
        doc:
          'How the generated Cluster API objects are laid out. `classic`: the Cluster, the infrastructure cluster, a KubeadmControlPlane ' +
          'and one MachineDeployment per worker pool, each with its templates. `topology`: a ClusterClass (named like the cluster) with ' +
          'its templates, and a Cluster whose spec.topology names it (version, control-plane replicas, one machineDeployment per worker pool); ' +
          "Cluster API's topology controller creates the infrastructure cluster, the control plane and the MachineDeployments from the class, " +
          'under the same names as the classic layout.',
        rules: [
          'topology needs a platform whose provider has an infrastructure cluster template; a platform without one refuses it.',
          'Chosen when the cluster is created: Cluster API refuses to add or remove spec.topology on an existing Cluster, so a change is refused at preflight.',
        ],
        examples: ['topology'],
      }),
      defaultManifestLayout,
    ),
  },
  { doc: 'How `create manifests` writes the cluster.' },
);

// ---------- the local control plane ----------

/** `bootstrap.listenAddress`'s node (platforms that need it ask for it in `create install-config`). */
export const listenAddressSchema = s.string({
  doc:
    'One address of this machine, besides loopback, where the local control plane\'s API server also listens, so that hosts ' +
    '(`provisioner hosts registration-command`) can reach it; the API server\'s certificate names it. Default: none, loopback only. ' +
    'A forwarder process serves it; nothing listens on any other interface. `create cluster --listen-address` overrides it.',
  format: 'ip',
  check: (value) => (isIP(value) === 0 ? 'is not an IP address' : undefined),
  checkHint: 'one IPv4 or IPv6 address of an interface of this machine, such as 192.0.2.10',
  rules: ['An address of an interface of the machine that runs `create cluster`, not a loopback one (checked when the control plane starts).'],
  examples: ['192.0.2.10'],
});

const bootstrapSchema = s.object(
  {
    listenAddress: optional(listenAddressSchema),
  },
  { doc: 'The local control plane (the temporary, or lasting on the in-memory platform, management cluster `create cluster` boots).' },
);

// ---------- the document ----------

/** The whole document, with `platform` and each pool's `platform` the given nodes (composed from the platforms). */
function installConfigNode<P extends SchemaNode, M extends SchemaNode>(platform: P, poolPlatform: M, defaultPlatform: string) {
  return s.object(
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
              s.array(cidrString('A pod network block.'), { doc: 'Pod networks: one block, or one IPv4 and one IPv6 block for dual-stack.', minItems: 1, maxItems: 2, rules: ['Pod and service blocks do not overlap.', 'At most one block per IP family; pods and services use the same families.'] }),
              ['192.168.0.0/16'],
            ),
            serviceCIDRs: defaulted(
              s.array(cidrString('A service network block.'), { doc: 'Service networks: one block, or one IPv4 and one IPv6 block for dual-stack.', minItems: 1, maxItems: 2, rules: ['Pod and service blocks do not overlap.'] }),
              ['10.128.0.0/12'],
            ),
            serviceDomain: defaulted(s.string({ doc: 'DNS domain of services.', pattern: dns1123Subdomain, patternHint: 'a DNS domain such as cluster.local', maxLength: 253 }), 'cluster.local'),
            cni: optional(
              s.enum(cniChoices, {
                doc:
                  'The pod network. flannel: the bundled flannel (host-gw: a route per node, so the nodes share a link), applied from the management cluster by a ClusterResourceSet, ' +
                  'so nodes that join later and a pivot keep it. none: no pod network; the nodes register but stay NotReady until you apply one ' +
                  '(kubectl --kubeconfig auth/kubeconfig apply -f <your CNI manifest>). ' +
                  'Default: flannel on platforms whose nodes take their images from the bundle (hosts), none elsewhere (bring your own CNI there).',
              }),
            ),
          },
          { doc: 'Cluster networking.' },
        ),
        {},
      ),
      machinePools: required(
        s.array(machinePoolNode(poolPlatform), {
          doc: 'Machine pools. One pool has the controlPlane and etcd roles; worker pools become MachineDeployments.',
          minItems: 1,
          unique: 'name',
        }),
      ),
      // An object's default is a mapping whatever its fields; TypeScript cannot see that through the generic P.
      platform: defaulted(platform, { [defaultPlatform]: {} } as DefaultValue<P>),
      manifests: defaulted(manifestsSchema, {}),
      hooks: optional(hooksSchema),
      bootstrap: optional(bootstrapSchema),
    },
    {
      doc: 'The install config: what cluster `provisioner create manifests` and `create cluster` build.',
      unknownFieldHints: { name: 'the cluster name is metadata.name', pods: 'see networking.podCIDRs', platforms: 'did you mean "platform"?' },
    },
  );
}

/**
 * The install config's schema with these platforms' sections: `platform` sets exactly one
 * of them (default: `defaultPlatform`), and each pool's `platform` may hold the machine
 * settings of the cluster's platform. The platform registry calls this once.
 */
export function composeInstallConfigSchema(platforms: readonly PlatformConfigSection[], defaultPlatform: string): InstallConfigSchema {
  const names = platforms.map((p) => p.name);
  if (!names.includes(defaultPlatform)) throw new Error(`the default platform ${defaultPlatform} is not one of ${names.join(', ')}`);
  const sections = (node: (p: PlatformConfigSection) => ObjectNode) => Object.fromEntries(platforms.map((p) => [p.name, optional(node(p))]));
  const platform = s.object(sections((p) => p.schema), {
    doc: `Where the machines run: set exactly one key, the platform's name (${names.join(', ')}), with its settings.`,
    exactlyOne: true,
  });
  const poolPlatform = s.object(sections((p) => p.machineSchema), {
    doc: 'Platform machine settings of this pool, under the key of the cluster platform.',
    rules: ['Only the section of the cluster platform (the key set under `platform`) may be present.'],
  });
  return { root: installConfigNode(platform, poolPlatform, defaultPlatform), platforms: new Map(platforms.map((p) => [p.name, p])), defaultPlatform };
}

/** The schema that gives the install config its TypeScript type: platform sections are opaque here. */
const typedInstallConfigSchema = installConfigNode(anyPlatformSections, anyPlatformSections, 'any');

/** The cluster name's schema (`metadata.name`), for the prompt's check. */
export const clusterNameSchema = typedInstallConfigSchema.fields.metadata.node.fields.name.node;

/** The install config after validation and defaults: every defaulted and computed field is set. */
export type InstallConfig = Infer<typeof typedInstallConfigSchema>;
export type MachinePool = InstallConfig['machinePools'][number];

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
