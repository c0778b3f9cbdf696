import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { externalManagementFile, recordExternalManagement, recordedExternalManagement } from './management.js';

describe('the recorded management cluster (management.json)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'management-record-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads back what was recorded; none is the local control plane', async () => {
    expect(await recordedExternalManagement(dir)).toBeUndefined();
    await recordExternalManagement(dir, 'mgmt/kubeconfig');
    expect(await recordedExternalManagement(dir)).toBe(path.resolve('mgmt/kubeconfig'));
  });

  it('refuses a corrupt record instead of falling back to the local control plane', async () => {
    const file = externalManagementFile(dir);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, '{"kubeconfig": "/k"');
    const error = await recordedExternalManagement(dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).details).toEqual([`${file}: line 1, column 20: Expected ',' or '}' after property value`]);

    await writeFile(file, '{"kubeconfig": 42}');
    expect(((await recordedExternalManagement(dir).catch((e: unknown) => e)) as EnvironmentError).message).toBe(`${file} is not a valid management cluster record`);
  });
});
