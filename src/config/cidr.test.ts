import { describe, expect, it } from 'vitest';
import { cidrsOverlap, parseCidr, type Cidr } from './cidr.js';

function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(parsed.problem);
  return parsed.cidr;
}

describe('parseCidr', () => {
  it('parses IPv4 and IPv6 blocks', () => {
    expect(cidr('10.128.0.0/12')).toMatchObject({ family: 4, prefix: 12 });
    expect(cidr('fd00:10:96::/112')).toMatchObject({ family: 6, prefix: 112 });
    expect(cidr('::ffff:10.0.0.0/104')).toMatchObject({ family: 6, prefix: 104 });
  });
  it('rejects host bits, bad prefixes and non-addresses, suggesting the network', () => {
    expect(parseCidr('10.0.0.1/8')).toEqual({ ok: false, problem: '10.0.0.1/8 has host bits set', hint: 'did you mean 10.0.0.0/8?' });
    expect(parseCidr('fd00::1/64')).toMatchObject({ ok: false, hint: 'did you mean fd00::/64?' });
    expect(parseCidr('10.0.0.0/33')).toMatchObject({ ok: false });
    expect(parseCidr('10.0.0.0')).toMatchObject({ ok: false });
    expect(parseCidr('cluster/16')).toMatchObject({ ok: false });
  });
});

describe('cidrsOverlap', () => {
  it('detects containment and disjoint blocks', () => {
    expect(cidrsOverlap(cidr('10.0.0.0/8'), cidr('10.96.0.0/12'))).toBe(true);
    expect(cidrsOverlap(cidr('10.96.0.0/12'), cidr('10.0.0.0/8'))).toBe(true);
    expect(cidrsOverlap(cidr('10.128.0.0/12'), cidr('10.96.0.0/12'))).toBe(false);
    expect(cidrsOverlap(cidr('192.168.0.0/16'), cidr('192.169.0.0/16'))).toBe(false);
    expect(cidrsOverlap(cidr('fd00::/8'), cidr('fd00:10::/32'))).toBe(true);
    expect(cidrsOverlap(cidr('10.0.0.0/8'), cidr('fd00::/8'))).toBe(false);
  });
});
