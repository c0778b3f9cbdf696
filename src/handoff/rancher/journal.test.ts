import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../../errors.js';
import { rancherRecordPath, readRancherRecord, removeRancherRecord, writeRancherRecord, type RancherRegistrationRecord } from './journal.js';

describe('the Rancher registration record', () => {
  let dir = '';
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'rancher-record-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const record: RancherRegistrationRecord = {
    rancherKubeconfig: '/home/me/rancher.kubeconfig',
    server: 'https://127.0.0.1:6443',
    mode: 'import',
    query: { strategy: 'v3', selector: { 'cluster-api.cattle.io/capi-cluster-owner': 'demo', 'cluster-api.cattle.io/capi-cluster-owner-ns': 'demo' } },
    step: 'cluster',
    rancherCluster: 'c-abcde',
  };

  it('round-trips, 0600, and is gone after removal', async () => {
    expect(await readRancherRecord(dir)).toBeUndefined();
    await writeRancherRecord(dir, record);
    expect(await readRancherRecord(dir)).toEqual({ ...record, version: 1 });
    expect((await stat(rancherRecordPath(dir))).mode & 0o777).toBe(0o600);
    await removeRancherRecord(dir);
    expect(await readRancherRecord(dir)).toBeUndefined();
  });

  it('refuses a record without its query or with an unknown step, naming the fields and how to recover', async () => {
    await writeRancherRecord(dir, record);
    await writeFile(rancherRecordPath(dir), JSON.stringify({ ...record, query: { strategy: 'v2' }, step: 'halfway' }));
    const error = await readRancherRecord(dir).then(
      () => undefined,
      (e: unknown) => e as EnvironmentError,
    );
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(error!.details).toEqual(['query: expected {strategy, selector}', 'step: expected one of started, cluster, token, manifest, ready']);
    expect(error!.hint).toMatch(/register rancher/);
  });
});
