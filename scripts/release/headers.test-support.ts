/** Synthetic executable headers for the release tests: just the fields executable-format.ts reads. */

/** A 64-bit little-endian ELF header with `phdrs` program header types right after it. */
export function elf(machine: number, phdrs: number[], type = 2): Buffer {
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
export function macho(cpu: number, commands: number[], fileType = 2): Buffer {
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
