import type { NetworkInterfaceInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { hostPort, listenAddressProblem } from './listen-address.js';

const iface = (address: string, internal: boolean): NetworkInterfaceInfo =>
  address.includes(':')
    ? { address, internal, family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff::', mac: '00:00:00:00:00:00', cidr: `${address}/64`, scopeid: 0 }
    : { address, internal, family: 'IPv4', netmask: '255.255.0.0', mac: '00:00:00:00:00:00', cidr: `${address}/16` };

const machine = { lo: [iface('127.0.0.1', true), iface('::1', true)], eth0: [iface('198.18.0.1', false), iface('fd00::2', false)] };

describe('listenAddressProblem', () => {
  it('accepts an address of a non-loopback interface, in any IPv6 spelling', () => {
    expect(listenAddressProblem('198.18.0.1', machine)).toBeUndefined();
    expect(listenAddressProblem('fd00:0:0:0:0:0:0:2', machine)).toBeUndefined();
  });

  it('refuses an address no interface has, and lists the ones it could be', () => {
    expect(listenAddressProblem('203.0.113.9', machine)).toBe('203.0.113.9 is not an address of this machine (its addresses: 198.18.0.1, fd00::2)');
    expect(listenAddressProblem('0.0.0.0', machine)).toMatch(/^0\.0\.0\.0 is not an address of this machine/);
  });

  it('refuses loopback, where the API server listens already, and what is no IP address', () => {
    expect(listenAddressProblem('127.0.0.1', machine)).toMatch(/loopback address/);
    expect(listenAddressProblem('host.example', machine)).toBe('"host.example" is not an IP address');
  });
});

describe('hostPort', () => {
  it('brackets IPv6 hosts only', () => {
    expect(hostPort('198.18.0.1', 6443)).toBe('198.18.0.1:6443');
    expect(hostPort('fd00::2', 6443)).toBe('[fd00::2]:6443');
  });
});
