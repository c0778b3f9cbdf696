import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, UsageError } from '../errors.js';
import { createCertificateAuthority } from '../pki/certificates.js';
import { caChecksum, readPlanFile } from './hosts.js';

describe('caChecksum', () => {
  it('is the sha256 of the certificate DER, as openssl computes the agent\'s pin', async () => {
    const ca = await createCertificateAuthority({ commonName: 'pin-test' });
    const der = execFileSync('openssl', ['x509', '-outform', 'DER'], { input: ca.certPem });
    const expected = execFileSync('sha256sum', [], { input: der }).toString().split(' ')[0];
    expect(caChecksum(ca.certPem)).toBe(expected);
  });
});

describe('readPlanFile', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'plan-file-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const write = async (text: string) => {
    const file = path.join(dir, 'plan.yaml');
    await writeFile(file, text);
    return file;
  };

  it('reads one NodePlan with its host label', async () => {
    const file = await write('apiVersion: agent.provisioner.dev/v1alpha1\nkind: NodePlan\nmetadata:\n  name: motd\n  labels: { agent.provisioner.dev/host: web-1 }\nspec: {}\n');
    expect((await readPlanFile(file)).metadata.name).toBe('motd');
  });

  it('names the missing host label and a foreign kind', async () => {
    const unlabelled = await write('apiVersion: agent.provisioner.dev/v1alpha1\nkind: NodePlan\nmetadata:\n  name: motd\n');
    await expect(readPlanFile(unlabelled)).rejects.toSatisfy((e: unknown) => e instanceof ConfigError && e.problems[0]!.path === 'metadata.labels["agent.provisioner.dev/host"]');
    const configMap = await write('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n');
    await expect(readPlanFile(configMap)).rejects.toThrow(ConfigError);
    await expect(readPlanFile(path.join(dir, 'absent.yaml'))).rejects.toThrow(UsageError);
  });
});
