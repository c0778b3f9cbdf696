import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../errors.js';
import { checkCredentialsFile } from './credentials.js';

const field = 'platform.aws.credentials.file';
const secret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
let dir = '';

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'aws-credentials-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function check(text: string | undefined, profile = 'default'): Promise<ConfigError | undefined> {
  const file = path.join(dir, `c-${Math.random().toString(36).slice(2)}`);
  if (text !== undefined) await writeFile(file, text);
  return checkCredentialsFile(file, profile, field).then(
    () => undefined,
    (error: unknown) => error as ConfigError,
  );
}

describe('checkCredentialsFile', () => {
  it('accepts a profile with both keys (comments and other profiles around it)', async () => {
    expect(await check(`# mine\n[other]\naws_access_key_id = A\n\n[ops]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = ${secret}\naws_session_token = t\n`, 'ops')).toBeUndefined();
  });

  it.each([
    ['a missing file', undefined, 'default', /cannot be read/],
    ['a file that is not INI', 'this is not ini\n', 'default', /not an INI file: line 1/],
    ['another profile only', '[ops]\naws_access_key_id = A\naws_secret_access_key = B\n', 'default', /no profile \[default\] \(it has: ops\)/],
    ['a missing secret key', '[default]\naws_access_key_id = AKIAEXAMPLE\n', 'default', /has no aws_secret_access_key/],
    ['an empty key', `[default]\naws_access_key_id =\naws_secret_access_key = ${secret}\n`, 'default', /has no aws_access_key_id/],
  ])('refuses %s with a ConfigError on the field, never quoting a value', async (_name, text, profile, message) => {
    const error = await check(text, profile);
    expect(error).toBeInstanceOf(ConfigError);
    expect(error?.problems[0]?.path).toBe(field);
    expect(error?.message).toMatch(message);
    expect(JSON.stringify({ message: error?.message, details: error?.details })).not.toContain(secret);
  });
});
