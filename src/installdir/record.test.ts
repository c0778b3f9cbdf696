import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { recordPath, recordRelativePath, stateDirOf } from './paths.js';
import { InstallRecord } from './record.js';

interface Sample {
  name: string;
}

const sample = new InstallRecord<Sample>({
  record: 'fleet',
  title: 'sample record',
  maxBytes: 1024,
  version: 2,
  recovery: (file) => `move ${file} aside`,
  problems: (value) => (typeof value.name === 'string' ? [] : [{ path: 'name', message: 'expected a string' }]),
});

describe('InstallRecord', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'install-record-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('lives under .provisioner of the install directory, named once in paths.ts', () => {
    expect(sample.path(dir)).toBe(path.join(dir, '.provisioner', 'fleet.json'));
    expect(recordPath(dir, 'fleet')).toBe(sample.path(dir));
    expect(stateDirOf(dir)).toBe(path.join(dir, '.provisioner'));
    expect(recordRelativePath('pivot')).toBe(path.join('.provisioner', 'pivot.json'));
  });

  it('writes the record whole with its schema version, mode 0600, and reads it back; none is undefined', async () => {
    expect(await sample.read(dir)).toBeUndefined();
    await sample.write(dir, { name: 'a' });
    expect(JSON.parse(await readFile(sample.path(dir), 'utf8'))).toEqual({ name: 'a', version: 2 });
    expect((await stat(sample.path(dir))).mode & 0o777).toBe(0o600);
    expect(await sample.read(dir)).toEqual({ name: 'a', version: 2 });
    await sample.remove(dir);
    expect(await sample.read(dir)).toBeUndefined();
  });

  it('reads a file without a version as version 1 (written before records carried one)', async () => {
    await mkdir(stateDirOf(dir), { recursive: true });
    await writeFile(sample.path(dir), '{"name": "old"}');
    expect(await sample.read(dir)).toEqual({ name: 'old', version: 2 });
  });

  it('refuses a record of a newer provisioner, a wrong shape and broken JSON with an EnvironmentError that says how to recover', async () => {
    await mkdir(stateDirOf(dir), { recursive: true });
    const file = sample.path(dir);
    const cases: [string, string][] = [
      ['{"name": "n", "version": 3}', 'version: version 3 was written by a newer provisioner; this one reads version 2 and older'],
      ['{"name": 7}', 'name: expected a string'],
      ['[1]', `${file}: expected a JSON object`],
      ['{"name": "n", "version": "1"}', 'version: expected a positive whole number'],
    ];
    for (const [text, detail] of cases) {
      await writeFile(file, text);
      const error = await sample.read(dir).catch((e: unknown) => e);
      expect(error, text).toBeInstanceOf(EnvironmentError);
      expect((error as EnvironmentError).message).toBe(`${file} is not a valid sample record`);
      expect((error as EnvironmentError).details).toEqual([detail]);
      expect((error as EnvironmentError).hint).toBe(`move ${file} aside`);
    }
    await writeFile(file, '{"name": ');
    const broken = await sample.read(dir).catch((e: unknown) => e);
    expect(broken).toBeInstanceOf(EnvironmentError);
    expect((broken as EnvironmentError).hint).toBe(`move ${file} aside`);
  });
});
