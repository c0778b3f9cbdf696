/**
 * `platform.vsphere.network.addressPool`: the machines' addresses from a pool instead of
 * DHCP. The pool is an AddressPool (ipam.provisioner.dev/v1alpha1, served by the agent
 * manager of provider/, which allocates to Cluster API IPAddressClaims); CAPV claims one
 * address per machine through the device's `addressesFromPools` and writes it, with the
 * prefix, gateway and nameservers, into the machine's cloud-init network config.
 *
 * The entries are read as the manager reads them (provider/api/ipam/v1alpha1/addresses.go):
 * an IPv4 address, an inclusive range `first-last`, or a CIDR block without its network
 * and broadcast addresses; the gateway is never handed out.
 */
import { isIPv4 } from 'node:net';
import { KubeClient, type KubeObject } from '../../kube/client.js';
import { polling, until } from '../../progress/until.js';
import type { PlatformHookContext } from '../platform.js';
import { clusterNameLabel } from '../types.js';

export const addressPoolApiVersion = 'ipam.provisioner.dev/v1alpha1';
export const addressPoolKind = 'AddressPool';
/** The most addresses one pool may hold (the manager's webhook refuses more). */
export const maxPoolSize = 65536;

export interface AddressPoolSettings {
  addresses: string[];
  prefix: number;
  gateway: string;
  nameservers: string[];
}

export interface AddressPoolObject {
  apiVersion: typeof addressPoolApiVersion;
  kind: typeof addressPoolKind;
  metadata: { name: string };
  spec: { addresses: string[]; prefix: number; gateway: string };
}

function toNumber(address: string): number {
  return address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

/** First and last address (as numbers) of one entry, or the problem with it. */
export function parseEntry(entry: string): { first: number; last: number } | { problem: string } {
  if (entry.includes('/')) {
    const [address = '', bitsText = ''] = entry.split('/');
    const bits = Number(bitsText);
    if (!isIPv4(address) || !/^\d{1,2}$/.test(bitsText) || bits > 32) return { problem: `${JSON.stringify(entry)} is not an IPv4 CIDR block such as 10.0.0.0/28` };
    const size = 2 ** (32 - bits);
    const base = toNumber(address);
    if (base % size !== 0) return { problem: `${JSON.stringify(entry)} has host bits set` };
    return bits < 31 ? { first: base + 1, last: base + size - 2 } : { first: base, last: base + size - 1 };
  }
  if (entry.includes('-')) {
    const [a = '', b = ''] = entry.split('-').map((p) => p.trim());
    if (!isIPv4(a) || !isIPv4(b)) return { problem: `${JSON.stringify(entry)} is not an IPv4 range such as 10.0.0.10-10.0.0.20` };
    if (toNumber(b) < toNumber(a)) return { problem: `${JSON.stringify(entry)} ends before it starts` };
    return { first: toNumber(a), last: toNumber(b) };
  }
  if (!isIPv4(entry)) return { problem: `${JSON.stringify(entry)} is not an IPv4 address, range (a-b) or CIDR block` };
  return { first: toNumber(entry), last: toNumber(entry) };
}

/** The schema's check of one entry. */
export function checkPoolEntry(entry: string): string | undefined {
  const parsed = parseEntry(entry);
  return 'problem' in parsed ? parsed.problem : undefined;
}

/** How many addresses the pool hands out (each once, never the gateway); entries that do not parse count nothing. */
export function poolSize(pool: Pick<AddressPoolSettings, 'addresses' | 'gateway'>): number {
  const ranges = pool.addresses.map(parseEntry).flatMap((p) => ('problem' in p ? [] : [p])).sort((x, y) => x.first - y.first);
  let count = 0;
  let covered = -1;
  for (const { first, last } of ranges) {
    const from = Math.max(first, covered + 1);
    if (last >= from) count += last - from + 1;
    covered = Math.max(covered, last);
    if (count > maxPoolSize * 2) break;
  }
  const gateway = isIPv4(pool.gateway) ? toNumber(pool.gateway) : undefined;
  if (gateway !== undefined && ranges.some((r) => r.first <= gateway && gateway <= r.last)) count -= 1;
  return count;
}

/** Entries (by index) that lie outside the gateway's network of the given prefix length. */
export function entriesOutsideNetwork(pool: Pick<AddressPoolSettings, 'addresses' | 'gateway' | 'prefix'>): { index: number; network: string }[] {
  if (!isIPv4(pool.gateway) || !(pool.prefix >= 1 && pool.prefix <= 32)) return [];
  const size = 2 ** (32 - pool.prefix);
  const base = Math.floor(toNumber(pool.gateway) / size) * size;
  const network = `${[24, 16, 8, 0].map((shift) => Math.floor(base / 2 ** shift) % 256).join('.')}/${pool.prefix}`;
  const out: { index: number; network: string }[] = [];
  pool.addresses.forEach((entry, index) => {
    const parsed = parseEntry(entry);
    if (!('problem' in parsed) && (parsed.first < base || parsed.last >= base + size)) out.push({ index, network });
  });
  return out;
}

/** The pool object the manifests carry, named like the cluster (one pool per cluster). */
export function addressPoolObject(name: string, pool: AddressPoolSettings): AddressPoolObject {
  return { apiVersion: addressPoolApiVersion, kind: addressPoolKind, metadata: { name }, spec: { addresses: [...pool.addresses], prefix: pool.prefix, gateway: pool.gateway } };
}

const ipamApiVersion = 'ipam.cluster.x-k8s.io/v1beta2';

/** The stall of the release wait: claims still held when none went for the no-progress timeout. */
class ClaimsHeld extends Error {}

interface ClaimObject extends KubeObject {
  spec?: { clusterName?: string };
  status?: { addressRef?: { name?: string } };
}

/**
 * clusterDeletion, with an address pool: once the cluster's Cluster API objects are gone,
 * waits (up to the no-progress timeout) until none of its IPAddressClaims is left — CAPV
 * deletes them with the VMs and the agent manager releases their addresses — and says
 * which addresses went back to the pool, or which claims are still held.
 */
export async function releaseClusterAddresses(context: PlatformHookContext & { clusterName: string; namespace: string }): Promise<() => Promise<void>> {
  const ofCluster = (claims: ClaimObject[]) => claims.filter((c) => c.spec?.clusterName === context.clusterName || c.metadata.labels?.[clusterNameLabel] === context.clusterName);
  const client = KubeClient.fromFile(context.kubeconfig);
  let before: ClaimObject[];
  let addresses: Map<string, string>;
  try {
    before = ofCluster(await client.list<ClaimObject>(ipamApiVersion, 'IPAddressClaim', { namespace: context.namespace }));
    const bound = await client.list<KubeObject & { spec?: { address?: string } }>(ipamApiVersion, 'IPAddress', { namespace: context.namespace });
    addresses = new Map(bound.map((a) => [a.metadata.name, a.spec?.address ?? '?']));
  } finally {
    client.close();
  }
  return async () => {
    if (before.length === 0) return;
    const timeoutMs = context.noProgressTimeoutMs ?? 60_000;
    const watcher = KubeClient.fromFile(context.kubeconfig);
    let left = before;
    try {
      // Each claim that goes is progress; a stall is no failure of the destroy, only reported.
      await until(
        polling(async () => {
          left = ofCluster(await watcher.list<ClaimObject>(ipamApiVersion, 'IPAddressClaim', { namespace: context.namespace }));
          return { state: left.length === 0 ? 'done' : 'waiting', value: left, progress: left.map((c) => c.metadata.name).join(',') };
        }, 500),
        { what: `the release of the addresses of ${context.namespace}/${context.clusterName}`, noProgressTimeoutMs: timeoutMs, onStall: () => new ClaimsHeld(), signal: context.signal },
      ).catch((error: unknown) => {
        if (!(error instanceof ClaimsHeld)) throw error;
      });
    } finally {
      watcher.close();
    }
    const released = before.filter((c) => !left.some((l) => l.metadata.name === c.metadata.name));
    const describe = (c: ClaimObject) => `${c.metadata.name} (${addresses.get(c.status?.addressRef?.name ?? '') ?? 'no address'})`;
    if (released.length > 0) context.log(`Addresses of ${context.namespace}/${context.clusterName} released to their pool: ${released.map(describe).join(', ')}`);
    if (left.length > 0) context.log(`IPAddressClaims of ${context.namespace}/${context.clusterName} still held, none released for ${Math.round(timeoutMs / 1000)} s: ${left.map(describe).join(', ')} (is capi-manager, which serves the address pools, running? its log says why)`);
  };
}
