/**
 * The one address besides loopback that a local control plane may listen on, for hosts
 * (machines the product did not create) to reach its API server. kube-apiserver binds a
 * single address, loopback, so this address is served by a forwarder process
 * (provisioner-forwarder) that copies TCP to the loopback API server; the API server's
 * serving certificate names the address. Nothing listens on any other interface.
 */
import { isIP } from 'node:net';
import os from 'node:os';

/**
 * Why `address` cannot be the extra listen address, or undefined when it can: it must be
 * one IP address configured on an interface of this machine (in this network namespace),
 * and not a loopback one (the API server is served there already).
 */
export function listenAddressProblem(address: string, interfaces = os.networkInterfaces()): string | undefined {
  if (isIP(address) === 0) return `${JSON.stringify(address)} is not an IP address`;
  const normalized = normalizeIp(address);
  const local = Object.values(interfaces).flatMap((list) => list ?? []);
  const match = local.find((i) => normalizeIp(i.address) === normalized);
  if (!match) {
    const offered = local.filter((i) => !i.internal).map((i) => i.address);
    return `${address} is not an address of this machine (its addresses: ${offered.length ? offered.join(', ') : 'loopback only'})`;
  }
  if (match.internal) return `${address} is a loopback address, where the API server listens already`;
  return undefined;
}

/** `host:port` with an IPv6 host in brackets, as URLs and Go's net.Listen want it. */
export function hostPort(address: string, port: number): string {
  return isIP(address) === 6 ? `[${address}]:${port}` : `${address}:${port}`;
}

/** An IP address in one spelling, so `::1` and `0:0:0:0:0:0:0:1` compare equal; other text unchanged. */
function normalizeIp(address: string): string {
  if (isIP(address) !== 6) return address;
  try {
    return new URL(`http://[${address}]/`).hostname;
  } catch {
    return address;
  }
}
