import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exists, readIfExists, writeFileAtomic } from './files.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'files-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('writeFileAtomic', () => {
  it('replaces the file and leaves no temporary file behind', async () => {
    await writeFileAtomic(join(dir, 'a.txt'), 'one');
    await writeFileAtomic(join(dir, 'a.txt'), 'two', 0o600);
    expect(await readFile(join(dir, 'a.txt'), 'utf8')).toBe('two');
    expect(await readdir(dir)).toEqual(['a.txt']);
  });

  it('writes the mode given, even over a wider existing mode, and 0644 by default', async () => {
    const secret = join(dir, 'secret');
    await writeFile(secret, 'old', { mode: 0o666 });
    await writeFileAtomic(secret, 'new', 0o600);
    expect((await stat(secret)).mode & 0o777).toBe(0o600);
    await writeFileAtomic(join(dir, 'plain'), 'text');
    expect((await stat(join(dir, 'plain'))).mode & 0o777).toBe(0o644);
  });

  it('fails when the directory is missing, leaving nothing behind', async () => {
    await expect(writeFileAtomic(join(dir, 'missing', 'a.txt'), 'x')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await readdir(dir)).toEqual([]);
  });
});

describe('exists and readIfExists', () => {
  it('tell a missing file from a present one', async () => {
    expect(await exists(join(dir, 'a'))).toBe(false);
    expect(await readIfExists(join(dir, 'a'))).toBeUndefined();
    await writeFile(join(dir, 'a'), 'text');
    expect(await exists(join(dir, 'a'))).toBe(true);
    expect(await exists(dir)).toBe(true);
    expect(await readIfExists(join(dir, 'a'))).toBe('text');
  });
});
