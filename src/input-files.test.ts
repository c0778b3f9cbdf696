import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, EnvironmentError, ProvisionerError } from './errors.js';
import { jsonErrorOffset, lineAndColumn, parseJson, parseYamlDocument, parseYamlStream, readInputText, readJsonFile, readYamlFile, type FileKind } from './input-files.js';

const userKind: FileKind = { name: 'test config', maxBytes: 1024, writer: 'user', hint: (file) => `fix ${file}` };
const ownKind: FileKind = { name: 'test journal', maxBytes: 1024, writer: 'provisioner', hint: (file) => `move ${file} aside` };

/** Seven levels of nine aliases each: 9^7 strings once expanded, from 300 bytes. */
const aliasBomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...'bcdefg'.split('').map((name, i) => {
  const previous = 'abcdefg'[i]!;
  return `${name}: &${name} [${Array(9).fill(`*${previous}`).join(',')}]`;
})].join('\n') + '\n';

function thrown(run: () => unknown): ProvisionerError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProvisionerError);
    return error as ProvisionerError;
  }
  throw new Error('expected a failure');
}

async function rejected(run: () => Promise<unknown>): Promise<ProvisionerError> {
  const error = await run().then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ProvisionerError);
  return error as ProvisionerError;
}

describe('YAML input', () => {
  it('refuses an alias bomb as a config error that names the file and the limit', () => {
    const error = thrown(() => parseYamlDocument(aliasBomb, '/d/install-config.yaml', userKind));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toContain('/d/install-config.yaml');
    expect(error.message).toMatch(/more YAML aliases than the test config limit of 100/);
    expect(error.hint).toBe('fix /d/install-config.yaml');
  });

  it('accepts a few aliases, and honours a kind\'s own alias limit', () => {
    const text = 'base: &base {a: 1}\none: *base\ntwo: *base\n';
    expect(parseYamlDocument(text, 'f.yaml', userKind).value).toEqual({ base: { a: 1 }, one: { a: 1 }, two: { a: 1 } });
    expect(thrown(() => parseYamlDocument(text, 'f.yaml', { ...userKind, maxAliasCount: 1 })).message).toMatch(/limit of 1:/);
  });

  it('names the line and column of a syntax error', () => {
    const error = thrown(() => parseYamlDocument('a: 1\nb: [2, 3\nc: 4\n', 'f.yaml', userKind)) as ConfigError;
    expect(error.message).toBe('f.yaml is not valid YAML');
    expect(error.problems[0]).toMatchObject({ path: 'f.yaml' });
    expect(error.problems[0]?.message).toMatch(/^line \d+, column \d+: /);
    expect(error.details[0]).toMatch(/^f\.yaml: line \d+, column \d+: /);
  });

  it('refuses duplicate keys, and checks every document of a stream', () => {
    expect((thrown(() => parseYamlDocument('a: 1\na: 2\n', 'f.yaml', userKind)) as ConfigError).problems[0]?.message).toMatch(/^line 2, column 1: /);
    expect(parseYamlStream('a: 1\n---\nb: 2\n---\n', 'f.yaml', userKind)).toEqual([{ a: 1 }, { b: 2 }, null]);
    const error = thrown(() => parseYamlStream('a: 1\n---\nb: [\n', 'f.yaml', userKind)) as ConfigError;
    expect(error.problems[0]?.message).toMatch(/^line [34], /);
    expect(thrown(() => parseYamlStream(`a: 1\n---\n${aliasBomb}`, 'f.yaml', userKind)).message).toMatch(/aliases/);
  });
});

describe('JSON input', () => {
  it('names the line and column of a syntax error, whatever V8 says', () => {
    const error = thrown(() => parseJson('{\n  "runs": 1,\n  "stages": {,}\n}\n', '/d/journal.json', ownKind));
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(error.message).toBe('/d/journal.json is not valid JSON');
    expect(error.details).toEqual([expect.stringMatching(/^\/d\/journal\.json: line 3, column 14: /)]);
    expect(error.hint).toBe('move /d/journal.json aside');
  });

  it('locates the first offending character', () => {
    const cases: [string, number][] = [
      ['{"a":}', 5],
      ['{"a":1', 6],
      ['{a:1}', 1],
      ['xyz', 0],
      ['{"a":1}}', 7],
      ['{"a": tru}', 6 + 3],
      ['', 0],
      ['[1, 2,]', 6],
      ['{"a": "b\\x"}', 9],
      ['{"a": 01}', 7],
      ['"line\nbreak"', 5],
    ];
    for (const [text, offset] of cases) {
      expect(() => JSON.parse(text)).toThrow();
      expect({ text, offset: jsonErrorOffset(text) }).toEqual({ text, offset });
    }
    expect(lineAndColumn('ab\ncd\nef', 4)).toEqual({ line: 2, column: 2 });
    expect(lineAndColumn('ab', 0)).toEqual({ line: 1, column: 1 });
  });
});

describe('reading files', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'input-files-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('gives undefined for a missing file, the text otherwise', async () => {
    expect(await readInputText(path.join(dir, 'missing'), userKind)).toBeUndefined();
    await writeFile(path.join(dir, 'f.json'), '{"a": [1]}');
    expect(await readJsonFile(path.join(dir, 'f.json'), ownKind)).toEqual({ a: [1] });
    await writeFile(path.join(dir, 'f.yaml'), 'a: [1]\n');
    expect(await readYamlFile(path.join(dir, 'f.yaml'), userKind)).toEqual({ a: [1] });
  });

  it('refuses a file over its kind\'s size cap before parsing it, naming the limit', async () => {
    const file = path.join(dir, 'big.yaml');
    await writeFile(file, `a: "${'x'.repeat(2 * 1024 * 1024)}"\n`);
    const error = await rejected(() => readYamlFile(file, { ...userKind, maxBytes: 1024 * 1024 }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(`${file} is 2 MiB, over the test config size limit of 1 MiB`);
    // Text handed in without a read is held to the same cap.
    expect(thrown(() => parseJson('[' + '1,'.repeat(600) + '1]', 'f.json', ownKind)).message).toBe('f.json is 1.17 KiB, over the test journal size limit of 1 KiB');
  });

  it('holds the cap while reading, for a file larger than its stat said (one that grew, or /proc)', async () => {
    const error = await rejected(() => readInputText('/proc/self/maps', { ...userKind, maxBytes: 16 }));
    expect(error.message).toBe('/proc/self/maps is more than 16 bytes, over the test config size limit of 16 bytes');
  });

  it('reports a file that cannot be read with the kind\'s class', async () => {
    const error = await rejected(() => readInputText(dir, { ...ownKind, maxBytes: 2 ** 20 }));
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(error.message).toMatch(/cannot be read/);
  });
});
