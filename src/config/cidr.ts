/** CIDR parsing and overlap checks for IPv4 and IPv6 (as 32- and 128-bit integers). */
import { isIPv4, isIPv6 } from 'node:net';

export interface Cidr {
  family: 4 | 6;
  /** First address of the block. */
  network: bigint;
  prefix: number;
  /** Number of address bits: 32 or 128. */
  bits: number;
  text: string;
}

function ipv4ToBigInt(address: string): bigint {
  return address.split('.').reduce((acc, octet) => (acc << 8n) | BigInt(Number(octet)), 0n);
}

function ipv6ToBigInt(address: string): bigint {
  let text = address;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const n = ipv4ToBigInt(v4[1]);
    text = text.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headParts = head ? head.split(':') : [];
  const tailParts = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const missing = 8 - headParts.length - tailParts.length;
  const parts = [...headParts, ...Array<string>(tail !== undefined ? missing : 0).fill('0'), ...tailParts];
  return parts.reduce((acc, hextet) => (acc << 16n) | BigInt(parseInt(hextet, 16)), 0n);
}

function formatNetwork(family: 4 | 6, network: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((shift) => String((network >> shift) & 0xffn)).join('.');
  const hextets: string[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) hextets.push(((network >> shift) & 0xffffn).toString(16));
  return hextets.join(':').replace(/(^|:)0(:0)+(:|$)/, '::');
}

export type CidrParse = { ok: true; cidr: Cidr } | { ok: false; problem: string; hint?: string };

/** Parses `a.b.c.d/n` or `x:y::/n`; the address must be the block's first address. */
export function parseCidr(text: string): CidrParse {
  const slash = text.indexOf('/');
  if (slash < 0) return { ok: false, problem: `${JSON.stringify(text)} is not a CIDR block`, hint: 'write it as address/prefix, e.g. 10.128.0.0/12' };
  const address = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : undefined;
  if (!family) return { ok: false, problem: `${JSON.stringify(address)} is not an IP address`, hint: 'write it as address/prefix, e.g. 10.128.0.0/12' };
  const bits = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > bits) {
    return { ok: false, problem: `prefix ${JSON.stringify(prefixText)} is not between 0 and ${bits}` };
  }
  const prefix = Number(prefixText);
  const value = family === 4 ? ipv4ToBigInt(address) : ipv6ToBigInt(address);
  const hostBits = BigInt(bits - prefix);
  const network = (value >> hostBits) << hostBits;
  if (network !== value) {
    const fixed = `${formatNetwork(family, network)}/${prefix}`;
    return { ok: false, problem: `${text} has host bits set`, hint: `did you mean ${fixed}?` };
  }
  return { ok: true, cidr: { family, network, prefix, bits, text } };
}

/** True when the two blocks share at least one address. */
export function cidrsOverlap(a: Cidr, b: Cidr): boolean {
  if (a.family !== b.family) return false;
  const shorter = Math.min(a.prefix, b.prefix);
  const shift = BigInt(a.bits - shorter);
  return a.network >> shift === b.network >> shift;
}
