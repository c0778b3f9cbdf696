import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { elf, macho } from './headers.test-support.js';
import { checkExecutable, downloadsByPlatform, formatReport, parseTargets, type PackedPackage } from './pack.js';

describe('checkExecutable', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pack-check-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const file = async (name: string, head: Buffer) => {
    const p = path.join(dir, name);
    await writeFile(p, head);
    return p;
  };

  it('accepts a static ELF for its linux target and a signed Mach-O for darwin/arm64', async () => {
    await expect(checkExecutable(await file('a', elf(0x3e, [1])), { goos: 'linux', goarch: 'amd64' }, 'a')).resolves.toBeUndefined();
    await expect(checkExecutable(await file('b', macho(0x0100000c, [0x19, 0x1d])), { goos: 'darwin', goarch: 'arm64' }, 'b')).resolves.toBeUndefined();
    await expect(checkExecutable(await file('c', macho(0x01000007, [0x19])), { goos: 'darwin', goarch: 'amd64' }, 'c')).resolves.toBeUndefined();
  });

  it('refuses another CPU, a dynamic linux binary and an unsigned darwin/arm64 one, naming the binary', async () => {
    await expect(checkExecutable(await file('d', elf(0xb7, [1])), { goos: 'linux', goarch: 'amd64' }, 'etcd for linux-x64')).rejects.toThrow(
      /etcd for linux-x64 .* is wrong: it is a ELF for linux\/arm64/,
    );
    await expect(checkExecutable(await file('e', elf(0x3e, [3, 1])), { goos: 'linux', goarch: 'amd64' }, 'e')).rejects.toThrow(/program interpreter/);
    await expect(checkExecutable(await file('f', macho(0x0100000c, [0x19])), { goos: 'darwin', goarch: 'arm64' }, 'f')).rejects.toThrow(/no code signature/);
    await expect(checkExecutable(await file('g', Buffer.from('#!/bin/sh\n')), { goos: 'linux', goarch: 'amd64' }, 'g')).rejects.toThrow(/not a well-formed executable/);
  });
});

describe('parseTargets', () => {
  it('takes all, host, or a list in Go names', () => {
    expect(parseTargets('all')).toHaveLength(4);
    expect(parseTargets('host')).toHaveLength(1);
    expect(parseTargets('darwin/arm64,linux/amd64')).toEqual([
      { goos: 'darwin', goarch: 'arm64' },
      { goos: 'linux', goarch: 'amd64' },
    ]);
    expect(() => parseTargets('windows/amd64')).toThrow(/unknown target "windows\/amd64"/);
  });
});

describe('the download per platform', () => {
  const pkg = (name: string, mib: number, platform?: PackedPackage['platform']): PackedPackage => ({
    name,
    version: '0.1.0',
    tarball: `/out/${name}.tgz`,
    packedBytes: mib << 20,
    unpackedBytes: mib << 20,
    files: 2,
    ...(platform ? { platform } : {}),
  });

  it('is the main package plus that platform\'s packages, printed for each platform', () => {
    const packages = [pkg('provisioner', 1), pkg('@provisioner/kube-linux-x64', 40, 'linux-x64'), pkg('@provisioner/etcd-linux-x64', 9, 'linux-x64'), pkg('@provisioner/kube-darwin-arm64', 38, 'darwin-arm64')];
    expect(downloadsByPlatform({ packages })).toEqual([
      { platform: 'linux-x64', packages: 3, packedBytes: 50 << 20 },
      { platform: 'darwin-arm64', packages: 2, packedBytes: 39 << 20 },
    ]);
    const printed = formatReport({ version: '0.1.0', targets: ['linux/amd64', 'darwin/arm64'], seconds: 1, packages });
    expect(printed).toContain('download on linux-x64: 50.0 MiB in 3 packages');
    expect(printed).toContain('download on darwin-arm64: 39.0 MiB in 2 packages');
  });
});
