/**
 * Random valid install-config documents for property tests, from a seeded generator so
 * every failure is reproducible (the seed is in the test name).
 */

/** mulberry32: a small, fast, seedable PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Random {
  constructor(private readonly next: () => number) {}
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  pick<T>(items: readonly T[]): T {
    const item = items[this.int(0, items.length - 1)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  name(min: number, max: number): string {
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const body = 'abcdefghijklmnopqrstuvwxyz0123456789-';
    const length = this.int(min, max);
    let out = this.pick([...letters]);
    for (let i = 1; i < length - 1; i++) out += this.pick([...body]);
    if (length > 1) out += this.pick([...letters, ...'0123456789']);
    return out;
  }
  hex(length: number): string {
    let out = '';
    for (let i = 0; i < length; i++) out += this.pick([...'0123456789abcdef']);
    return out;
  }
}

/**
 * Pod/service CIDR pairs that overlap neither each other nor the aws platform's default VPC
 * block, carved from 198.19.0.0/16 like every test cluster's (test/support/netns.ts).
 */
const networkPairs: [string[], string[]][] = [
  [['198.19.0.0/17'], ['198.19.128.0/20']],
  [['198.19.0.0/18'], ['198.19.192.0/20']],
  [['198.19.64.0/18'], ['198.19.160.0/19']],
  [['198.19.0.0/17', 'fd00:10:244::/56'], ['198.19.128.0/20', 'fd00:10:96::/112']],
];

const labelKeys = ['example.com/team', 'node-role.kubernetes.io/worker', 'node-role.kubernetes.io/storage', 'node.cluster.x-k8s.io/zone', 'tier', 'app.example.org/role'];
const taintEffects = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'];

export interface RandomConfigOptions {
  /** Force a platform. Default: random. */
  platform?: 'inmemory' | 'aws';
}

/** A random install-config document that validation must accept. */
export function randomInstallConfig(random: Random, options: RandomConfigOptions = {}): Record<string, unknown> {
  const clusterName = random.name(1, 20);
  const platform = options.platform ?? random.pick(['inmemory', 'aws'] as const);
  const [pods, services] = random.pick(networkPairs);
  const pools: Record<string, unknown>[] = [];
  const cpWorker = random.chance(0.2);
  const cpRoles = cpWorker ? ['etcd', 'controlPlane', 'worker'] : ['controlPlane', 'etcd'];
  pools.push(randomPool(random, random.pick(['control-plane', 'cp', 'masters']), random.pick([1, 3, 5, 7]), cpRoles, platform));
  const workerCount = random.int(cpWorker ? 0 : 1, 5);
  const used = new Set(pools.map((p) => p.name));
  for (let i = 0; i < workerCount; i++) {
    let name = random.name(1, 12);
    while (used.has(name)) name = random.name(1, 12);
    used.add(name);
    pools.push(randomPool(random, name, random.int(i === 0 && !cpWorker ? 1 : 0, 1000), ['worker'], platform));
  }
  const document: Record<string, unknown> = {
    apiVersion: 'provisioner.dev/v1alpha1',
    kind: 'InstallConfig',
    metadata: random.chance(0.3) ? { name: clusterName, namespace: `ns-${random.name(1, 10)}` } : { name: clusterName },
    kubernetesVersion: `v1.${random.int(31, 37)}.${random.int(0, 12)}`,
    networking: { podCIDRs: pods, serviceCIDRs: services, ...(random.chance(0.3) ? { serviceDomain: 'example.internal' } : {}) },
    machinePools: pools,
  };
  if (platform === 'inmemory') {
    if (random.chance(0.5)) document.platform = { inmemory: {} };
  } else {
    const aws: Record<string, unknown> = { region: random.pick(['us-east-1', 'eu-west-3', 'ap-southeast-2', 'us-gov-west-1']) };
    if (random.chance(0.5)) aws.sshKeyName = `key ${random.name(1, 8)}`;
    if (random.chance(0.4)) aws.ami = `ami-${random.hex(17)}`;
    if (random.chance(0.3)) aws.defaultInstanceType = random.pick(['m6i.xlarge', 'c5.2xlarge', 't3.medium']);
    const network = random.pick(['existing', 'cidr', 'default'] as const);
    if (network === 'existing') {
      aws.vpcID = `vpc-${random.hex(17)}`;
      aws.subnets = [`subnet-${random.hex(17)}`, `subnet-${random.hex(8)}`];
    } else if (network === 'cidr') aws.vpcCIDR = '10.10.0.0/16';
    if (random.chance(0.3)) aws.additionalTags = { owner: random.name(1, 10) };
    document.platform = { aws };
    if (aws.subnets && random.chance(0.5)) {
      const pool = pools[0] as Record<string, unknown>;
      pool.platform = { aws: { subnet: (aws.subnets as string[])[0] } };
    }
  }
  return document;
}

function randomPool(random: Random, name: string, quantity: number, roles: string[], platform: 'inmemory' | 'aws'): Record<string, unknown> {
  const pool: Record<string, unknown> = { name, quantity, roles };
  if (random.chance(0.5)) {
    const labels: Record<string, string> = {};
    for (let i = random.int(1, 3); i > 0; i--) labels[random.pick(labelKeys)] = random.chance(0.3) ? '' : random.name(1, 10);
    pool.labels = labels;
  }
  if (random.chance(0.4)) {
    const taints: Record<string, unknown>[] = [];
    const seen = new Set<string>();
    for (let i = random.int(1, 3); i > 0; i--) {
      const key = random.pick(['example.com/dedicated', 'example.com/gpu', 'special']);
      const effect = random.pick(taintEffects);
      if (seen.has(`${key}:${effect}`)) continue;
      seen.add(`${key}:${effect}`);
      taints.push(random.chance(0.5) ? { key, value: random.name(1, 8), effect } : { key, effect });
    }
    pool.taints = taints;
  }
  if (platform === 'inmemory' && random.chance(0.3)) {
    pool.platform = { inmemory: { startup: { vm: `${random.int(1, 30)}s` }, startupJitter: random.pick([0, 0.1, 0.5]) } };
  }
  if (platform === 'aws' && random.chance(0.4)) {
    pool.platform = { aws: { instanceType: random.pick(['m6i.large', 'r5.xlarge']), rootVolumeSize: random.int(8, 500) } };
  }
  return pool;
}
