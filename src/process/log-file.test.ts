import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readLogTail, RotatingLogFile, rotatedPath } from './log-file.js';

describe('RotatingLogFile', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'proc-log-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('rotates once to .1 before a write would pass the cap', async () => {
    const path = join(dir, 'etcd.log');
    const log = new RotatingLogFile(path, 100);
    log.open();
    for (let i = 0; i < 10; i++) log.write(`line ${i} ${'x'.repeat(20)}\n`); // 28 bytes each
    log.close();
    expect((await stat(path)).size).toBeLessThanOrEqual(100);
    expect((await stat(rotatedPath(path))).size).toBeLessThanOrEqual(100);
    expect(await readFile(path, 'utf8')).toMatch(/^line 9 x+\n$/m);
    // Three rotations happened; .1 holds the generation just before the current one.
    expect(await readFile(rotatedPath(path), 'utf8')).toContain('line 6');
    expect(await readFile(rotatedPath(path), 'utf8')).not.toContain('line 0');
  });

  it('rotates an existing file over the cap when opened, and appends otherwise', async () => {
    const path = join(dir, 'a.log');
    await writeFile(path, 'small\n');
    const first = new RotatingLogFile(path, 100);
    first.open();
    first.write('more\n');
    first.close();
    expect(await readFile(path, 'utf8')).toBe('small\nmore\n');

    await writeFile(path, 'y'.repeat(150));
    const second = new RotatingLogFile(path, 100);
    second.open();
    second.write('fresh\n');
    second.close();
    expect(await readFile(path, 'utf8')).toBe('fresh\n');
    expect((await stat(rotatedPath(path))).size).toBe(150);
  });

  it('reads the last lines, continuing into .1', async () => {
    const path = join(dir, 'b.log');
    await writeFile(rotatedPath(path), 'old 1\nold 2\nold 3\n');
    await writeFile(path, 'new 1\nnew 2\n');
    expect(await readLogTail(path, 3)).toEqual(['old 3', 'new 1', 'new 2']);
    expect(await readLogTail(path, 1)).toEqual(['new 2']);
    expect(await readLogTail(join(dir, 'missing.log'))).toEqual([]);
  });

  it('reads the tail of a large file without its partial first line', async () => {
    const path = join(dir, 'big.log');
    const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i}`);
    await writeFile(path, `${lines.join('\n')}\n`);
    expect(await readLogTail(path, 20)).toEqual(lines.slice(-20));
  });
});

describe('RotatingLogFile with writes larger than the cap', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'proc-log-big-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('splits a big write at line ends so no file passes the cap', async () => {
    const path = join(dir, 'c.log');
    const log = new RotatingLogFile(path, 64);
    log.open();
    log.write('aaaaaaaaaa\n'.repeat(4)); // 44 bytes
    log.write('bbbbbbbbbb\n'.repeat(5)); // 55 bytes: one line fits (55), the other four go to a fresh file
    expect(await readFile(rotatedPath(path), 'utf8')).toBe(`${'aaaaaaaaaa\n'.repeat(4)}bbbbbbbbbb\n`);
    expect(await readFile(path, 'utf8')).toBe('bbbbbbbbbb\n'.repeat(4));
    log.write('x'.repeat(70)); // no line end fits: rotate, then a 70-byte line is split at 64
    log.close();
    expect(await readFile(rotatedPath(path), 'utf8')).toBe('x'.repeat(64));
    expect(await readFile(path, 'utf8')).toBe('x'.repeat(6));
  });
});
