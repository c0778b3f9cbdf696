import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readElfLinking, writeUserlandTar, type ElfLinking } from './userland.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'userland-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const triplet = 'x86_64-linux-gnu';

/** A tree shaped like the unpacked packages; the fake "ELF" files say what they link in `linking`. */
async function stagePackages(staging: string): Promise<Map<string, ElfLinking>> {
  const file = async (relative: string, content: string, mode = 0o644) => {
    await mkdir(path.dirname(path.join(staging, relative)), { recursive: true });
    await writeFile(path.join(staging, relative), content);
    await chmod(path.join(staging, relative), mode);
  };
  const link = async (relative: string, target: string) => {
    await mkdir(path.dirname(path.join(staging, relative)), { recursive: true });
    await symlink(target, path.join(staging, relative));
  };
  await file('usr/sbin/xtables-nft-multi', 'nft', 0o755);
  await file('usr/sbin/xtables-legacy-multi', 'legacy', 0o755); // not wanted: the layer is nft only
  await file(`usr/lib/${triplet}/xtables/libxt_conntrack.so`, 'ext-conntrack');
  await file(`usr/lib/${triplet}/xtables/libxt_tcp.so`, 'ext-tcp');
  await file(`usr/lib/${triplet}/libxtables.so.12.7.0`, 'libxtables');
  await link(`usr/lib/${triplet}/libxtables.so.12`, 'libxtables.so.12.7.0');
  await file(`usr/lib/${triplet}/libnetfilter_conntrack.so.3.8.0`, 'libnfct');
  await link(`usr/lib/${triplet}/libnetfilter_conntrack.so.3`, 'libnetfilter_conntrack.so.3.8.0');
  await file(`usr/lib/${triplet}/libip4tc.so.2.0.0`, 'ip4tc'); // legacy's: nothing here needs it
  await file(`lib/${triplet}/libc.so.6`, 'libc', 0o755);
  await file(`lib/${triplet}/ld-linux-x86-64.so.2`, 'ld', 0o755);
  await link('lib64/ld-linux-x86-64.so.2', `/lib/${triplet}/ld-linux-x86-64.so.2`);
  await file('bin/busybox', 'busybox', 0o755);
  await file('etc/protocols', 'tcp 6 TCP');
  await file('etc/services', 'http 80/tcp');
  await file('usr/share/doc/iptables/copyright', 'docs'); // not wanted
  const loader = { interpreter: '/lib64/ld-linux-x86-64.so.2' };
  return new Map<string, ElfLinking>([
    ['usr/sbin/xtables-nft-multi', { ...loader, needed: ['libxtables.so.12', 'libc.so.6'] }],
    [`usr/lib/${triplet}/xtables/libxt_conntrack.so`, { needed: ['libnetfilter_conntrack.so.3', 'libxtables.so.12', 'libc.so.6'] }],
    [`usr/lib/${triplet}/xtables/libxt_tcp.so`, { needed: ['libxtables.so.12', 'libc.so.6'] }],
    [`usr/lib/${triplet}/libxtables.so.12.7.0`, { needed: ['libc.so.6'] }],
    [`usr/lib/${triplet}/libnetfilter_conntrack.so.3.8.0`, { needed: ['libc.so.6'] }],
    [`lib/${triplet}/libc.so.6`, { ...loader, needed: ['ld-linux-x86-64.so.2'] }],
    [`lib/${triplet}/ld-linux-x86-64.so.2`, { needed: [] }],
    ['bin/busybox', { needed: [] }], // static
  ]);
}

describe('writeUserlandTar', () => {
  it('holds nft iptables under its six names, every extension, the libraries they need and busybox with its applets, owned by root at mtime 0', async () => {
    const staging = path.join(dir, 'staging');
    const linking = await stagePackages(staging);
    const readLinking = (file: string) => Promise.resolve(linking.get(path.relative(staging, file)));
    const written = await writeUserlandTar(staging, triplet, path.join(dir, 'one.tar'), readLinking);

    const members: { path: string; type: string; mode: number; uid: number; gid: number; mtime: number; linkpath: string }[] = [];
    await tar.t({
      file: path.join(dir, 'one.tar'),
      onReadEntry: (e) => members.push({ path: e.path, type: e.type, mode: e.mode ?? -1, uid: e.uid ?? -1, gid: e.gid ?? -1, mtime: e.mtime?.getTime() ?? -1, linkpath: e.linkpath ?? '' }),
    });
    expect(members.map((m) => m.path)).toEqual(written.entries);
    expect([...written.entries].sort()).toEqual(written.entries); // sorted
    const byPath = new Map(members.map((m) => [m.path, m]));
    for (const name of ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore']) {
      expect(byPath.get(`usr/sbin/${name}`)).toMatchObject({ type: 'SymbolicLink', linkpath: 'xtables-nft-multi' });
    }
    expect(byPath.get('usr/sbin/xtables-nft-multi')).toMatchObject({ type: 'File', mode: 0o755 });
    expect(byPath.get(`usr/lib/${triplet}/xtables/libxt_conntrack.so`)).toMatchObject({ type: 'File', mode: 0o644 });
    expect(byPath.get(`usr/lib/${triplet}/xtables/libxt_tcp.so`)?.type).toBe('File');
    // Libraries through their soname links, libc and the loader at the path PT_INTERP names.
    expect(byPath.get(`usr/lib/${triplet}/libxtables.so.12`)).toMatchObject({ type: 'SymbolicLink', linkpath: 'libxtables.so.12.7.0' });
    expect(byPath.get(`usr/lib/${triplet}/libxtables.so.12.7.0`)?.type).toBe('File');
    expect(byPath.get(`usr/lib/${triplet}/libnetfilter_conntrack.so.3.8.0`)?.type).toBe('File');
    expect(byPath.get(`lib/${triplet}/libc.so.6`)?.type).toBe('File');
    expect(byPath.get('lib64/ld-linux-x86-64.so.2')).toMatchObject({ type: 'SymbolicLink', linkpath: `/lib/${triplet}/ld-linux-x86-64.so.2` });
    expect(byPath.get(`lib/${triplet}/ld-linux-x86-64.so.2`)?.type).toBe('File');
    expect(byPath.get('bin/busybox')).toMatchObject({ type: 'File', mode: 0o755 });
    for (const applet of ['sh', 'cp', 'mkdir', 'cat', 'ls']) expect(byPath.get(`bin/${applet}`)).toMatchObject({ type: 'SymbolicLink', linkpath: 'busybox' });
    expect(byPath.get('etc/protocols')?.type).toBe('File');
    expect(byPath.get('usr/sbin/')).toMatchObject({ type: 'Directory', mode: 0o755 });
    // Nothing unneeded: no legacy iptables, no library only it uses, no docs.
    expect(written.entries.filter((p) => /legacy|ip4tc|share\/doc/.test(p))).toEqual([]);
    expect(members.every((m) => m.uid === 0 && m.gid === 0 && m.mtime === 0)).toBe(true);

    // The same tree gives the same bytes.
    const again = await writeUserlandTar(staging, triplet, path.join(dir, 'two.tar'), readLinking);
    expect(again.sha256).toBe(written.sha256);
    expect(createHash('sha256').update(await readFile(path.join(dir, 'two.tar'))).digest('hex')).toBe(written.sha256);
  });

  it('refuses a library that no package holds instead of taking the host one', async () => {
    const staging = path.join(dir, 'staging');
    const linking = await stagePackages(staging);
    linking.set('usr/sbin/xtables-nft-multi', { needed: ['libnftnl.so.11'] });
    const readLinking = (file: string) => Promise.resolve(linking.get(path.relative(staging, file)));
    await expect(writeUserlandTar(staging, triplet, path.join(dir, 'x.tar'), readLinking)).rejects.toThrow(/libnftnl\.so\.11 \(needed by usr\/sbin\/xtables-nft-multi\) is in none of the packages/);
  });
});

describe('readElfLinking', () => {
  // Reads this machine's /bin/sh only to check the parser; the layer never takes host files.
  it.runIf(process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64'))('reads the loader and DT_NEEDED of a dynamic executable', async () => {
    const linking = await readElfLinking(await realShell());
    expect(linking?.interpreter).toMatch(/^\/lib.*\/ld-linux-(x86-64|aarch64)\.so\.[12]$/);
    expect(linking?.needed).toContain('libc.so.6');
  });

  it('answers undefined for a file that is not ELF', async () => {
    await writeFile(path.join(dir, 'script'), '#!/bin/sh\necho hi\n'.padEnd(100, ' '));
    expect(await readElfLinking(path.join(dir, 'script'))).toBeUndefined();
  });
});

async function realShell(): Promise<string> {
  const { realpath } = await import('node:fs/promises');
  return realpath('/bin/sh');
}
