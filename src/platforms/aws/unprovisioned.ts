/**
 * `destroy cluster` on AWS when AWS was never reached. CAPA removes an AWSCluster's
 * finalizer only once AWS confirms that the cluster's resources are gone, so without AWS
 * the deletion waits forever. But CAPA records every resource it creates, as it creates
 * it, in the objects (CAPA v2.13.0, api/v1beta2): the VPC, gateway, subnet and route-table
 * IDs in AWSCluster `spec.network`, the security groups, load balancers and NAT addresses
 * in `status.network`, the bastion in `status.bastion`, the API endpoint in
 * `spec.controlPlaneEndpoint`, and each instance in AWSMachine `spec.instanceID` /
 * `spec.providerID`. When none of those is recorded, and the conditions show that CAPA's
 * calls never got an answer from AWS (a network error, no HTTP status), there is nothing
 * in AWS for CAPA to delete: the objects being deleted may be let go.
 *
 * The limit: it trusts CAPA's record. A resource created by a call whose answer never
 * came back (AWS acted, then the connection dropped) is recorded nowhere and would be
 * left behind; so is anything a user made by hand with the cluster's tags.
 */
import type { PlatformDestroyContext, ProviderObject, ReleasedObject } from '../platform.js';

const clusterNameLabel = 'cluster.x-k8s.io/cluster-name';

/** Words of a failed call that never reached AWS: the SDK's "StatusCode: 0 … request send failed", or the network error under it. */
const unreachable = /StatusCode: 0\b|request send failed|dial tcp|no such host|connection refused|network is unreachable|i\/o timeout|TLS handshake timeout|server misbehaving/i;
/** An answer from AWS: an HTTP status the SDK reports (then AWS was reached, whatever it said). */
const answered = /StatusCode: [1-9]\d\d/;

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

/** Every condition under `status` (CAPA keeps v1beta1-style `conditions` and `v1beta2.conditions`). */
function conditionsOf(object: ProviderObject): Condition[] {
  const found: Condition[] = [];
  const walk = (value: unknown, key: string): void => {
    if (Array.isArray(value)) {
      if (key === 'conditions') for (const c of value) if (c && typeof c === 'object') found.push(c as Condition);
      return;
    }
    if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, k);
  };
  walk(object.status, '');
  return found;
}

const present = (value: unknown): boolean =>
  value !== undefined && value !== null && value !== '' && !(Array.isArray(value) && value.length === 0) && !(typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0);

type Json = Record<string, unknown>;
const at = (value: unknown, ...keys: string[]): unknown => keys.reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Json)[k] : undefined), value);

/** What an AWSCluster records of resources in AWS, one phrase each; empty when nothing. */
function recordedClusterResources(cluster: ProviderObject): string[] {
  const recorded: string[] = [];
  const vpc = at(cluster.spec, 'network', 'vpc');
  if (present(at(vpc, 'id'))) recorded.push(`VPC ${String(at(vpc, 'id'))}`);
  if (present(at(vpc, 'internetGatewayId'))) recorded.push('an internet gateway');
  if (present(at(vpc, 'carrierGatewayId'))) recorded.push('a carrier gateway');
  const subnets = at(cluster.spec, 'network', 'subnets');
  for (const subnet of Array.isArray(subnets) ? subnets : []) {
    const id = at(subnet, 'id');
    if (present(at(subnet, 'resourceID')) || (typeof id === 'string' && id.startsWith('subnet-'))) recorded.push(`subnet ${String(at(subnet, 'resourceID') ?? id)}`);
    if (present(at(subnet, 'routeTableId')) || present(at(subnet, 'natGatewayId'))) recorded.push('a route table or NAT gateway');
  }
  if (present(at(cluster.spec, 'network', 'securityGroupOverrides'))) recorded.push('security groups');
  if (present(at(cluster.spec, 'controlPlaneEndpoint', 'host'))) recorded.push(`the API endpoint ${String(at(cluster.spec, 'controlPlaneEndpoint', 'host'))}`);
  const groups = at(cluster.status, 'network', 'securityGroups');
  if (groups && typeof groups === 'object' && Object.values(groups).some((g) => present(at(g, 'id')))) recorded.push('security groups');
  for (const lb of ['apiServerElb', 'secondaryAPIServerELB']) {
    const balancer = at(cluster.status, 'network', lb);
    if (present(at(balancer, 'arn')) || present(at(balancer, 'dnsName')) || present(at(balancer, 'name'))) recorded.push('a load balancer');
  }
  if (present(at(cluster.status, 'network', 'natGatewaysIPs'))) recorded.push('NAT gateway addresses');
  if (present(at(cluster.status, 'bastion', 'instanceID')) || present(at(cluster.status, 'bastion', 'id'))) recorded.push('a bastion instance');
  return [...new Set(recorded)];
}

/** What an AWSMachine records of an instance; empty when nothing. */
function recordedMachineResources(machine: ProviderObject): string[] {
  const recorded: string[] = [];
  if (present(at(machine.spec, 'instanceID'))) recorded.push(`instance ${String(at(machine.spec, 'instanceID'))}`);
  if (present(at(machine.spec, 'providerID'))) recorded.push(`provider ID ${String(at(machine.spec, 'providerID'))}`);
  if (present(at(machine.status, 'instanceState'))) recorded.push('an instance state');
  if (present(at(machine.status, 'addresses'))) recorded.push('instance addresses');
  return recorded;
}

/** The failing condition that shows AWS was never reached, if the conditions show that and no answer from AWS. */
function unreachableCondition(cluster: ProviderObject): Condition | undefined {
  const failing = conditionsOf(cluster).filter((c) => c.status === 'False' && typeof c.message === 'string');
  if (failing.some((c) => answered.test(c.message!))) return undefined;
  return failing.find((c) => unreachable.test(c.message!));
}

export type UnprovisionedVerdict = { release: true; reason: string } | { release: false; why: string };

/** Whether the cluster's AWS objects may be let go: nothing recorded in AWS, and AWS never reached. */
export function unprovisionedVerdict(cluster: ProviderObject, machines: readonly ProviderObject[]): UnprovisionedVerdict {
  const recorded = recordedClusterResources(cluster);
  if (recorded.length > 0) return { release: false, why: `AWSCluster ${cluster.metadata.name} records ${recorded.join(', ')}` };
  for (const machine of machines) {
    const instance = recordedMachineResources(machine);
    if (instance.length > 0) return { release: false, why: `AWSMachine ${machine.metadata.name} records ${instance.join(', ')}` };
  }
  const condition = unreachableCondition(cluster);
  if (!condition) return { release: false, why: `no condition of AWSCluster ${cluster.metadata.name} shows that AWS was never reached` };
  const message = condition.message!.length > 300 ? `${condition.message!.slice(0, 300)}…` : condition.message!;
  return {
    release: true,
    reason:
      `CAPA recorded no VPC, subnet, security group, load balancer or instance of it in AWS, and its ${condition.type ?? 'failing'} condition shows AWS was never reached ` +
      `(${message}): nothing in AWS to delete`,
  };
}

/**
 * The platform's `releaseUnprovisioned` hook: when the verdict allows it, removes the
 * finalizers of the cluster's AWSMachines and AWSCluster that are being deleted (machines
 * first, as CAPA would). Nothing being deleted, or anything recorded: nothing released.
 */
export async function releaseUnprovisionedAws(context: PlatformDestroyContext, kinds: { apiVersion: string; cluster: string; machine: string }): Promise<ReleasedObject[]> {
  const ofCluster = (o: ProviderObject) => o.metadata.name === context.clusterName || o.metadata.labels?.[clusterNameLabel] === context.clusterName;
  const clusters = (await context.list(kinds.apiVersion, kinds.cluster)).filter(ofCluster);
  const machines = (await context.list(kinds.apiVersion, kinds.machine)).filter((m) => m.metadata.labels?.[clusterNameLabel] === context.clusterName);
  const released: ReleasedObject[] = [];
  for (const cluster of clusters) {
    const verdict = unprovisionedVerdict(cluster, machines);
    if (!verdict.release) {
      context.log(`AWSCluster ${context.namespace}/${cluster.metadata.name} keeps its finalizer: ${verdict.why}, so CAPA must delete what it made in AWS`);
      continue;
    }
    const held = (o: ProviderObject) => Boolean(o.metadata.deletionTimestamp) && (o.metadata.finalizers ?? []).length > 0;
    for (const object of [...machines.filter(held), ...(held(cluster) ? [cluster] : [])]) {
      await context.releaseFinalizers(object);
      released.push({ kind: object.kind, namespace: context.namespace, name: object.metadata.name, reason: verdict.reason });
    }
  }
  return released;
}
