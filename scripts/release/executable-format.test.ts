import { open } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { headerBytes, readExecutableFormat } from './executable-format.js';

/** A 64-bit little-endian ELF header with `phdrs` program header types right after it. */
function elf(machine: number, phdrs: number[], type = 2): Buffer {
  const phentsize = 56;
  const head = Buffer.alloc(64 + phentsize * phdrs.length);
  head.writeUInt32BE(0x7f454c46, 0);
  head[4] = 2;
  head[5] = 1;
  head[6] = 1;
  head.writeUInt16LE(type, 16);
  head.writeUInt16LE(machine, 18);
  head.writeBigUInt64LE(0x401000n, 24);
  head.writeBigUInt64LE(64n, 32);
  head.writeUInt16LE(phentsize, 54);
  head.writeUInt16LE(phdrs.length, 56);
  phdrs.forEach((p, i) => head.writeUInt32LE(p, 64 + i * phentsize));
  return head;
}

/** A 64-bit Mach-O executable header with load commands of the given types (16 bytes each). */
function macho(cpu: number, commands: number[], fileType = 2): Buffer {
  const head = Buffer.alloc(32 + 16 * commands.length);
  head.writeUInt32LE(0xfeedfacf, 0);
  head.writeUInt32LE(cpu, 4);
  head.writeUInt32LE(fileType, 12);
  head.writeUInt32LE(commands.length, 16);
  head.writeUInt32LE(16 * commands.length, 20);
  commands.forEach((c, i) => {
    head.writeUInt32LE(c, 32 + 16 * i);
    head.writeUInt32LE(16, 36 + 16 * i);
  });
  return head;
}

describe('readExecutableFormat', () => {
  it('reads static linux executables for both CPUs', () => {
    expect(readExecutableFormat(elf(0x3e, [6, 1, 1]))).toEqual({ container: 'ELF', goos: 'linux', goarch: 'amd64', static: true, signed: false });
    expect(readExecutableFormat(elf(0xb7, [1]))).toMatchObject({ goos: 'linux', goarch: 'arm64', static: true });
  });

  it('sees a program interpreter as dynamic linking', () => {
    expect(readExecutableFormat(elf(0x3e, [6, 3, 1])).static).toBe(false);
  });

  it('reads darwin executables and whether they are signed', () => {
    expect(readExecutableFormat(macho(0x0100000c, [0x19, 0x1d]))).toEqual({ container: 'Mach-O', goos: 'darwin', goarch: 'arm64', static: false, signed: true });
    expect(readExecutableFormat(macho(0x01000007, [0x19]))).toMatchObject({ goarch: 'amd64', signed: false });
  });

  it('refuses what is not an executable of ours, saying why', () => {
    expect(() => readExecutableFormat(Buffer.from('#!/bin/sh\n'))).toThrow(/not an ELF or 64-bit Mach-O/);
    expect(() => readExecutableFormat(elf(0x28, [1]))).toThrow(/machine 0x28/);
    expect(() => readExecutableFormat(elf(0x3e, [1], 1))).toThrow(/ELF type 1/);
    expect(() => readExecutableFormat(macho(0x0100000c, [0x19], 6))).toThrow(/file type 6/);
    expect(() => readExecutableFormat(elf(0x3e, [1]).subarray(0, 40))).toThrow(/truncated ELF header/);
    const badClass = elf(0x3e, [1]);
    badClass[4] = 1;
    expect(() => readExecutableFormat(badClass)).toThrow(/class 1/);
  });

  it('reads the node binary running this test as what this machine is', async () => {
    const handle = await open(process.execPath, 'r');
    const head = Buffer.alloc(headerBytes);
    const { bytesRead } = await handle.read(head, 0, headerBytes, 0);
    await handle.close();
    const format = readExecutableFormat(head.subarray(0, bytesRead));
    expect(format.goos).toBe(process.platform);
    expect(format.goarch).toBe(process.arch === 'x64' ? 'amd64' : process.arch);
  });
});
