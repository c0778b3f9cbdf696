/**
 * Rules of the install config that span several fields: what kubeadm and Cluster API
 * impose on machine pools, and what networking needs. Each rule names the top-level
 * sections it reads and runs only when those passed the schema, so it can trust types;
 * every rule runs, so one pass reports every problem.
 */
import { cidrsOverlap, parseCidr, type Cidr } from './cidr.js';
import { hasRole, type InstallConfig } from './install-config.js';
import { platformNameOf } from './platform-section.js';
import type { PathSegment } from './schema.js';

export interface RuleProblem {
  path: PathSegment[];
  message: string;
  hint?: string;
}

export interface RuleReport {
  error(path: PathSegment[], message: string, hint?: string): void;
  warn(path: PathSegment[], message: string, hint?: string): void;
  /** True when the schema found a problem at or under `path`: a rule skips what it cannot trust. */
  broken(path: readonly PathSegment[]): boolean;
}

export interface Rule {
  /** Short name, for tests and debugging. */
  name: string;
  /** Top-level fields the rule needs whole; it is skipped when any has a schema problem. Finer rules check `report.broken`. */
  reads: readonly string[];
  check(config: InstallConfig, report: RuleReport): void;
}

/** Longest object name Cluster API accepts where names become label values (MachineDeployment, Cluster). */
const maxLabelValueName = 63;

/** Namespaces that belong to Kubernetes or to the core providers; generated objects never go there (nor into a platform's `providerNamespaces`). */
export const reservedNamespaces = [
  'default',
  'kube-system',
  'kube-public',
  'kube-node-lease',
  'capi-system',
  'capi-kubeadm-bootstrap-system',
  'capi-kubeadm-control-plane-system',
];

/** The pools that passed the schema, with their index: per-pool rules still run when another pool is broken. */
export function soundPools(config: InstallConfig, report: RuleReport): { pool: InstallConfig['machinePools'][number]; index: number }[] {
  if (!Array.isArray(config.machinePools)) return [];
  return config.machinePools.map((pool, index) => ({ pool, index })).filter(({ index }) => !report.broken(['machinePools', index]));
}

/**
 * One value of a field that a platform cannot serve, refused with the field named, why, and what
 * to write instead. The platform registry adds such rules to the sections of the platforms they
 * concern.
 */
function valueRefused(refusal: { name: string; field: readonly [section: 'manifests' | 'networking', key: string]; value: string; message: string; hint: string }): Rule {
  const [section, key] = refusal.field;
  return {
    name: refusal.name,
    reads: [section, 'platform'],
    check(config, report) {
      // Both sections are plain objects once they passed the schema (`reads` guarantees that).
      if ((config[section] as Record<string, unknown>)[key] !== refusal.value) return;
      report.error([section, key], refusal.message, refusal.hint);
    },
  };
}

/** `manifests.layout: topology` on a platform without a ClusterClass layout. */
export function topologyLayoutRefused(platform: string): Rule {
  return valueRefused({
    name: 'topology-layout-refused',
    field: ['manifests', 'layout'],
    value: 'topology',
    message: `the ${platform} platform offers no ClusterClass layout: its provider has no infrastructure cluster template here`,
    hint: 'remove manifests.layout (or set it to classic) to generate the classic objects',
  });
}

/** `networking.cni: flannel` on a platform whose nodes cannot take the bundle's images. */
export function bundledCniRefused(platform: string): Rule {
  return valueRefused({
    name: 'bundled-cni-refused',
    field: ['networking', 'cni'],
    value: 'flannel',
    message: `the bundled flannel runs only where nodes take their images from the bundle; the ${platform} platform's nodes pull theirs from registries`,
    hint: 'set networking.cni to none (or remove it) and apply your CNI to the cluster once it is up',
  });
}

/** The namespace of the generated objects is none of `reserved` (the core ones and every platform's providers'), nor `kube-*`. */
export function namespaceNotReserved(reserved: readonly string[]): Rule {
  return {
    name: 'namespace-not-reserved',
    reads: ['metadata'],
    check(config, report) {
      const ns = config.metadata.namespace;
      if (reserved.includes(ns) || ns.startsWith('kube-')) {
        report.error(['metadata', 'namespace'], `${ns} belongs to Kubernetes or Cluster API; the manifests create and own their namespace`, 'choose a namespace of your own, e.g. the cluster name');
      }
    },
  };
}

/** The rules of the common part of the install config (the namespace rule is added with the platforms' namespaces, see load.ts). */
export const installConfigRules: readonly Rule[] = [
  {
    name: 'one-control-plane-pool',
    reads: ['machinePools'],
    check(config, report) {
      const controlPlane = config.machinePools.map((pool, index) => ({ pool, index })).filter(({ pool }) => hasRole(pool, 'controlPlane'));
      if (controlPlane.length === 0) {
        report.error(['machinePools'], 'no pool has the controlPlane role', 'add a pool with roles [etcd, controlPlane]: kubeadm needs one control plane');
      }
      const first = controlPlane[0];
      for (const extra of controlPlane.slice(1)) {
        report.error(
          ['machinePools', extra.index, 'roles'],
          `only one pool may have the controlPlane role; ${first?.pool.name} (machinePools[${first?.index}]) already has it`,
          'merge the control-plane pools: one KubeadmControlPlane manages all control-plane machines',
        );
      }
    },
  },
  {
    name: 'control-plane-carries-etcd',
    reads: [],
    check(config, report) {
      soundPools(config, report).forEach(({ pool, index }) => {
        const cp = hasRole(pool, 'controlPlane');
        const etcd = hasRole(pool, 'etcd');
        if (cp && !etcd) {
          report.error(['machinePools', index, 'roles'], 'a controlPlane pool must also have the etcd role', 'add etcd: kubeadm runs an etcd member on every control-plane machine (stacked etcd)');
        }
        if (etcd && !cp) {
          report.error(['machinePools', index, 'roles'], 'an etcd pool without the controlPlane role is not supported', 'add controlPlane to this pool or remove etcd: kubeadm stacks etcd on control-plane machines; external etcd is not supported');
        }
      });
    },
  },
  {
    name: 'control-plane-quantity',
    reads: [],
    check(config, report) {
      soundPools(config, report).forEach(({ pool, index }) => {
        if (!hasRole(pool, 'controlPlane')) return;
        const at: PathSegment[] = ['machinePools', index, 'quantity'];
        if (pool.quantity < 1) {
          report.error(at, 'a control plane needs at least one machine', 'use 1 (no high availability), 3 or 5');
        } else if (pool.quantity % 2 === 0) {
          report.error(
            at,
            `${pool.quantity} control-plane machines is an even count: etcd keeps quorum with a majority, so ${pool.quantity} tolerates no more failures than ${pool.quantity - 1}, and the KubeadmControlPlane webhook rejects even counts with stacked etcd`,
            `use ${pool.quantity - 1} or ${pool.quantity + 1}`,
          );
        } else if (pool.quantity === 1) {
          report.warn(at, 'one control-plane machine: the cluster has no high availability', 'use 3 for a control plane that survives the loss of a machine');
        } else if (pool.quantity > 7) {
          report.warn(at, `${pool.quantity} etcd members: every write waits for a majority, so more than 7 slows the cluster down`, 'use 3, 5 or 7');
        }
      });
    },
  },
  {
    name: 'some-pool-runs-workloads',
    reads: ['machinePools'],
    check(config, report) {
      const runsWorkloads = config.machinePools.some((pool) => hasRole(pool, 'worker') && pool.quantity > 0);
      if (!runsWorkloads) {
        report.warn(['machinePools'], 'no machine has the worker role: pods without control-plane tolerations will not schedule', 'add a worker pool, or add the worker role to the control-plane pool');
      }
    },
  },
  {
    name: 'generated-names-fit',
    reads: ['metadata'],
    check(config, report) {
      soundPools(config, report).forEach(({ pool, index }) => {
        const name = `${config.metadata.name}-${pool.name}`;
        if (name.length > maxLabelValueName) {
          report.error(
            ['machinePools', index, 'name'],
            `object name ${name} would be ${name.length} characters; Cluster API allows ${maxLabelValueName} (the name is a label value)`,
            `shorten the pool name to at most ${maxLabelValueName - config.metadata.name.length - 1} characters, or the cluster name`,
          );
        }
      });
    },
  },
  {
    name: 'unique-taints',
    reads: [],
    check(config, report) {
      soundPools(config, report).forEach(({ pool, index }) => {
        const seen = new Map<string, number>();
        pool.taints.forEach((taint, t) => {
          const key = `${taint.key}:${taint.effect}`;
          const first = seen.get(key);
          if (first !== undefined) {
            report.error(['machinePools', index, 'taints', t], `taint ${key} is already taints[${first}]`, 'each (key, effect) pair may appear once');
          } else seen.set(key, t);
        });
      });
    },
  },
  {
    name: 'pool-platform-matches',
    reads: ['platform'],
    check(config, report) {
      const clusterPlatform = platformNameOf(config);
      soundPools(config, report).forEach(({ pool, index }) => {
        for (const name of Object.keys(pool.platform)) {
          if (name !== clusterPlatform && pool.platform[name] !== undefined) {
            report.error(['machinePools', index, 'platform', name], `the cluster platform is ${clusterPlatform}; ${name} machine settings do not apply`, `move the settings under machinePools[${index}].platform.${clusterPlatform}, or remove them`);
          }
        }
      });
    },
  },
  {
    name: 'networks-do-not-overlap',
    reads: ['networking'],
    check(config, report) {
      const parse = (list: string[], field: string) =>
        list.flatMap((text, index) => {
          const parsed = parseCidr(text);
          return parsed.ok ? [{ cidr: parsed.cidr, path: ['networking', field, index] as PathSegment[], label: `networking.${field}[${index}]` }] : [];
        });
      const pods = parse(config.networking.podCIDRs, 'podCIDRs');
      const services = parse(config.networking.serviceCIDRs, 'serviceCIDRs');
      for (const list of [pods, services]) {
        list.forEach((a, i) => {
          for (const b of list.slice(0, i)) {
            if (a.cidr.family === b.cidr.family) report.error(a.path, `a second IPv${a.cidr.family} block; ${b.label} is already IPv${a.cidr.family}`, 'use one IPv4 and/or one IPv6 block (dual-stack)');
          }
        });
      }
      for (const service of services) {
        for (const pod of pods) {
          if (cidrsOverlap(service.cidr, pod.cidr)) {
            report.error(service.path, `${service.cidr.text} overlaps ${pod.label} (${pod.cidr.text})`, 'pod and service networks must be disjoint: pick a service block outside the pod block, e.g. 10.128.0.0/12 with pods in 192.168.0.0/16');
          }
        }
      }
      const families = (list: { cidr: Cidr }[]) => [...new Set(list.map((c) => c.cidr.family))].sort().join(',');
      if (pods.length && services.length && families(pods) !== families(services)) {
        report.error(['networking', 'serviceCIDRs'], `services use IPv${families(services)} but pods use IPv${families(pods)}`, 'give pods and services the same IP families');
      }
    },
  },
];

/** Runs `rules` against a defaulted config; skips rules whose sections have schema problems (`schemaProblemPaths`). */
export function runRules(
  rules: readonly Rule[],
  config: InstallConfig,
  schemaProblemPaths: readonly (readonly PathSegment[])[],
): { errors: RuleProblem[]; warnings: RuleProblem[] } {
  const errors: RuleProblem[] = [];
  const warnings: RuleProblem[] = [];
  const brokenSections = new Set(schemaProblemPaths.map((p) => String(p[0] ?? '(document)')));
  const report: RuleReport = {
    error: (path, message, hint) => errors.push({ path, message, ...(hint ? { hint } : {}) }),
    warn: (path, message, hint) => warnings.push({ path, message, ...(hint ? { hint } : {}) }),
    broken: (prefix) => schemaProblemPaths.some((p) => prefix.every((segment, i) => p[i] === segment)),
  };
  for (const rule of rules) {
    if (rule.reads.some((section) => brokenSections.has(section))) continue;
    rule.check(config, report);
  }
  return { errors, warnings };
}
