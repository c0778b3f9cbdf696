import { open } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { headerBytes, readExecutableFormat } from './executable-format.js';
import { elf, macho } from './headers.test-support.js';

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
