import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { validateInstallConfigText, type NewInstallConfigAnswers } from '../config/index.js';
import { ConfigError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { installConfigSchema } from '../platforms/index.js';
import { createInstallConfig } from './install-config.js';

const answers: NewInstallConfigAnswers = { name: 'demo', platform: 'inmemory', kubernetesVersion: 'v1.36.3', controlPlaneReplicas: 3, workers: 2, platformAnswers: {} };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-ic-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('createInstallConfig', () => {
  it('writes a valid install config with the schema modeline and the schema copy it names', async () => {
    const sink = new RecordingSink();
    const result = await createInstallConfig({ dir, answers, force: false, sink });
    const text = await readFile(result.path, 'utf8');
    expect(text.split('\n')[0]).toBe('# yaml-language-server: $schema=.provisioner/install-config.schema.json');
    const { config } = validateInstallConfigText(text, { schema: installConfigSchema });
    expect(config.machinePools.map((p) => [p.name, p.quantity, p.roles])).toEqual([
      ['control-plane', 3, ['etcd', 'controlPlane']],
      ['worker', 2, ['worker']],
    ]);
    const schema = JSON.parse(await readFile(path.join(dir, '.provisioner/install-config.schema.json'), 'utf8')) as { title: string };
    expect(schema.title).toBe('provisioner install config');
    expect(sink.ofType('result')[0]).toMatchObject({ kind: 'install-config', text: `Wrote ${result.path}` });
  });

  it('with no workers, lets the control plane run workloads', async () => {
    const result = await createInstallConfig({ dir, answers: { ...answers, workers: 0, controlPlaneReplicas: 1 }, force: false, sink: new RecordingSink() });
    const doc = parse(await readFile(result.path, 'utf8')) as { machinePools: { roles: string[] }[] };
    expect(doc.machinePools).toHaveLength(1);
    expect(doc.machinePools[0]?.roles).toEqual(['etcd', 'controlPlane', 'worker']);
  });

  it('writes the aws section from the answers', async () => {
    const result = await createInstallConfig({ dir, answers: { ...answers, platform: 'aws', platformAnswers: { region: 'eu-west-1', sshKeyName: 'ops', instanceType: 'm6i.large', credentialsFile: '~/creds' } }, force: false, sink: new RecordingSink() });
    const doc = parse(await readFile(result.path, 'utf8')) as { platform: unknown };
    expect(doc.platform).toEqual({ aws: { region: 'eu-west-1', defaultInstanceType: 'm6i.large', sshKeyName: 'ops', credentials: { file: '~/creds' } } });
  });

  it('writes the vsphere section from the answers', async () => {
    const platformAnswers = { server: 'vc.example.com', thumbprint: '', datacenter: 'DC0', datastore: 'LocalDS_0', network: 'VM Network', resourcePool: '/DC0/host/DC0_C0/Resources', folder: '/DC0/vm', template: 'ubuntu', endpointHost: '10.0.0.10', vsphereCredentialsFile: 'vc.yaml' };
    const result = await createInstallConfig({ dir, answers: { ...answers, platform: 'vsphere', platformAnswers }, force: true, sink: new RecordingSink() });
    const doc = parse(await readFile(result.path, 'utf8')) as { platform: unknown };
    expect(doc.platform).toEqual({
      vsphere: { server: 'vc.example.com', datacenter: 'DC0', datastore: 'LocalDS_0', network: { name: 'VM Network' }, resourcePool: '/DC0/host/DC0_C0/Resources', folder: '/DC0/vm', template: 'ubuntu', controlPlaneEndpoint: { host: '10.0.0.10' }, credentials: { file: 'vc.yaml' } },
    });
  });

  it('refuses invalid answers and writes nothing', async () => {
    await expect(createInstallConfig({ dir, answers: { ...answers, controlPlaneReplicas: 2 }, force: false, sink: new RecordingSink() })).rejects.toBeInstanceOf(ConfigError);
    await expect(readFile(path.join(dir, 'install-config.yaml'))).rejects.toThrow();
  });

  it('does not replace an existing install config without --force', async () => {
    await writeFile(path.join(dir, 'install-config.yaml'), 'mine\n');
    const error = await createInstallConfig({ dir, answers, force: false, sink: new RecordingSink() }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).hint).toMatch(/--force/);
    expect(await readFile(path.join(dir, 'install-config.yaml'), 'utf8')).toBe('mine\n');
    await createInstallConfig({ dir, answers, force: true, sink: new RecordingSink() });
    expect(await readFile(path.join(dir, 'install-config.yaml'), 'utf8')).toContain('name: demo');
  });
});
