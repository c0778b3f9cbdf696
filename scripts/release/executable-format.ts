/**
 * Reads the header of an executable and says which OS and CPU it runs on, so
 * `release:pack` can check every cross-built binary without running it (and without
 * `file`, which a build machine may lack). Only what Go writes for our targets is
 * recognised: 64-bit little-endian ELF (linux) and 64-bit Mach-O (darwin) executables.
 */

export interface ExecutableFormat {
  container: 'ELF' | 'Mach-O';
  goos: 'linux' | 'darwin';
  goarch: 'amd64' | 'arm64';
  /** ELF: no program interpreter (a static binary). Mach-O: always false (Go links libSystem on darwin). */
  static: boolean;
  /** Mach-O: carries a code signature (arm64 macOS refuses to run an unsigned binary). ELF: false. */
  signed: boolean;
}

/** How many leading bytes `readExecutableFormat` needs: the header and the load commands or program headers. */
export const headerBytes = 64 << 10;

const elfMachines: Record<number, ExecutableFormat['goarch']> = { 0x3e: 'amd64', 0xb7: 'arm64' };
const machoCpus: Record<number, ExecutableFormat['goarch']> = { 0x01000007: 'amd64', 0x0100000c: 'arm64' };

/** Parses the first bytes of a file (at least the headers; `headerBytes` is enough for Go's); throws saying what is wrong. */
export function readExecutableFormat(head: Buffer): ExecutableFormat {
  if (head.length >= 4 && head.readUInt32BE(0) === 0x7f454c46) return readElf(head);
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfeedfacf) return readMachO(head);
  throw new Error(`not an ELF or 64-bit Mach-O executable (starts with ${head.subarray(0, 4).toString('hex') || 'nothing'})`);
}

function need(head: Buffer, end: number, what: string): void {
  if (head.length < end) throw new Error(`truncated ${what}: need ${end} bytes, have ${head.length}`);
}

function readElf(head: Buffer): ExecutableFormat {
  need(head, 64, 'ELF header');
  if (head[4] !== 2) throw new Error(`ELF class ${head[4]}, expected 2 (64-bit)`);
  if (head[5] !== 1) throw new Error(`ELF data encoding ${head[5]}, expected 1 (little-endian)`);
  const type = head.readUInt16LE(16);
  if (type !== 2 && type !== 3) throw new Error(`ELF type ${type}, expected an executable (2) or position-independent executable (3)`);
  const machine = head.readUInt16LE(18);
  const goarch = elfMachines[machine];
  if (!goarch) throw new Error(`ELF machine 0x${machine.toString(16)} is neither x86-64 nor AArch64`);
  if (head.readBigUInt64LE(24) === 0n) throw new Error('ELF entry point is 0');
  const phoff = Number(head.readBigUInt64LE(32));
  const phentsize = head.readUInt16LE(54);
  const phnum = head.readUInt16LE(56);
  if (phnum === 0) throw new Error('ELF has no program headers');
  need(head, phoff + phentsize * phnum, 'ELF program headers');
  let interpreter = false;
  for (let i = 0; i < phnum; i++) if (head.readUInt32LE(phoff + i * phentsize) === 3 /* PT_INTERP */) interpreter = true;
  return { container: 'ELF', goos: 'linux', goarch, static: !interpreter, signed: false };
}

function readMachO(head: Buffer): ExecutableFormat {
  need(head, 32, 'Mach-O header');
  const cpu = head.readUInt32LE(4);
  const goarch = machoCpus[cpu];
  if (!goarch) throw new Error(`Mach-O CPU type 0x${cpu.toString(16)} is neither x86_64 nor arm64`);
  const fileType = head.readUInt32LE(12);
  if (fileType !== 2) throw new Error(`Mach-O file type ${fileType}, expected 2 (an executable)`);
  const ncmds = head.readUInt32LE(16);
  const sizeofcmds = head.readUInt32LE(20);
  need(head, 32 + sizeofcmds, 'Mach-O load commands');
  let offset = 32;
  let signed = false;
  for (let i = 0; i < ncmds; i++) {
    need(head, offset + 8, 'Mach-O load command');
    const cmd = head.readUInt32LE(offset);
    const size = head.readUInt32LE(offset + 4);
    if (size < 8) throw new Error(`Mach-O load command ${i} has size ${size}`);
    if (cmd === 0x1d /* LC_CODE_SIGNATURE */) signed = true;
    offset += size;
  }
  return { container: 'Mach-O', goos: 'darwin', goarch, static: false, signed };
}
