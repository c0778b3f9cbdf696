/**
 * Rancher's API as provisioner uses it: the groups, kinds and labels Rancher and Rancher
 * Turtles define (names from Turtles' `internal/controllers/helpers.go` and
 * `api/rancher/...`, ADR 0008), and how to tell from an object whether Rancher is done.
 * The CRDs we wrote for these kinds are in manifests/crds/rancher.yaml.
 */
import type { KubeObject } from '../../kube/client.js';

const provisioningApiVersion = 'provisioning.cattle.io/v1';
export const managementApiVersion = 'management.cattle.io/v3';
/** Rancher's cluster-scoped Setting holding the PEM of the CA behind its serving certificate (empty for a public CA). */
export const caSettingName = 'cacerts';
/** Namespace of Rancher's default Fleet workspace, where provisioning (v1) clusters of imported clusters live. */
export const defaultV1Namespace = 'fleet-default';
/** Name Rancher gives a cluster's first registration token; ours when we create it. */
export const defaultTokenName = 'default-token';

/** ADR 0008: the CAPI cluster's name and namespace on Rancher's cluster, the one way to find it again. */
export const capiOwnerLabel = 'cluster-api.cattle.io/capi-cluster-owner';
export const capiOwnerNamespaceLabel = 'cluster-api.cattle.io/capi-cluster-owner-ns';
/** On a CAPI Cluster (or its namespace): Turtles imports it into Rancher. */
export const autoImportLabel = 'cluster-api.cattle.io/rancher-auto-import';
/** Turtles' API group: its CRDs on Rancher's cluster mean Turtles runs there. */
export const turtlesApiGroup = 'turtles-capi.cattle.io';
/** Ours, for `provisioner import`: the downstream cluster's kube-system namespace UID (a cluster's stable identity), since it has no CAPI cluster. */
export const importedClusterLabel = 'import.provisioner.dev/cluster-id';

/**
 * Which Rancher object stands for the cluster: `v1`, a namespaced provisioning.cattle.io/v1
 * Cluster (Turtles' original import; Rancher makes a management cluster behind it), or
 * `v3`, a cluster-scoped management.cattle.io/v3 Cluster named `c-` plus five random
 * characters (ADR 0008).
 */
export type RancherStrategy = 'v1' | 'v3';
export const rancherStrategies: readonly RancherStrategy[] = ['v1', 'v3'];

/** The kind that stands for the cluster under `strategy`. */
export function rancherClusterKind(strategy: RancherStrategy): { apiVersion: string; kind: 'Cluster' } {
  return { apiVersion: strategy === 'v1' ? provisioningApiVersion : managementApiVersion, kind: 'Cluster' };
}

/** A label selector (`k=v,k2=v2`) for `labels`. */
export function selectorOf(labels: Readonly<Record<string, string>>): string {
  return Object.entries(labels)
    .map(([key, value]) => `${key}=${value}`)
    .join(',');
}

export interface RancherCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

interface RancherClusterStatus {
  clusterName?: string;
  ready?: boolean;
  agentDeployed?: boolean;
  conditions?: RancherCondition[];
}

function statusOf(cluster: KubeObject): RancherClusterStatus {
  return (cluster['status'] as RancherClusterStatus | undefined) ?? {};
}

function rancherCondition(cluster: KubeObject, type: string): RancherCondition | undefined {
  return statusOf(cluster).conditions?.find((c) => c.type === type);
}

/**
 * Whether Rancher reports the cluster Ready: condition Ready=True on a management (v3)
 * cluster; `status.ready` (or condition Ready=True) on a provisioning (v1) cluster.
 */
export function isRancherClusterReady(cluster: KubeObject): boolean {
  if (rancherCondition(cluster, 'Ready')?.status === 'True') return true;
  return cluster.apiVersion === provisioningApiVersion && statusOf(cluster).ready === true;
}

/** The name of the management (v3) cluster behind `cluster`, whose namespace holds its registration tokens; undefined until Rancher has made it (v1). */
export function managementClusterName(cluster: KubeObject): string | undefined {
  if (cluster.apiVersion === managementApiVersion) return cluster.metadata.name;
  return statusOf(cluster).clusterName || undefined;
}

/** The first condition that is not True, as the user should see it. */
export function blockingCondition(cluster: KubeObject): RancherCondition | undefined {
  const conditions = statusOf(cluster).conditions ?? [];
  return conditions.find((c) => c.type === 'Ready' && c.status !== 'True') ?? conditions.find((c) => c.status === 'False');
}

/** How a Rancher cluster is named in messages: `management.cattle.io/v3 Cluster c-abcde ("demo")`. */
export function describeRancherCluster(cluster: KubeObject): string {
  const display = (cluster['spec'] as { displayName?: string } | undefined)?.displayName;
  const where = cluster.metadata.namespace ? `${cluster.metadata.namespace}/` : '';
  return `${cluster.apiVersion} Cluster ${where}${cluster.metadata.name}${display ? ` ("${display}")` : ''}`;
}
