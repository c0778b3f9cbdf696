import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../errors.js';
import { describePlan, installManagement, nodesLackingImages, type ManagementInstallResult } from './install.js';

describe('describePlan (--dry-run)', () => {
  it('names each Deployment and image, the certificates to issue and every object it would create or apply over', () => {
    const result: ManagementInstallResult = {
      providers: [{ provider: 'cluster-api', namespace: 'capi-system', name: 'capi-controller-manager', version: 'v1.14.2', image: 'provisioner.local/capi-manager:v1.14.2' }],
      created: ['Namespace capi-system', 'Deployment capi-system/capi-controller-manager'],
      changed: [],
      unchanged: ['CustomResourceDefinition clusters.cluster.x-k8s.io'],
      certificatesIssued: ['CA', 'capi-system'],
      images: [{ ref: 'provisioner.local/capi-manager:v1.14.2', file: '', loaded: false }],
      dryRun: true,
      timings: { imagesMs: 0, availableMs: 0, totalMs: 1 },
    };
    expect(describePlan(result).split('\n')).toEqual([
      'provider cluster-api v1.14.2: Deployment capi-system/capi-controller-manager running provisioner.local/capi-manager:v1.14.2',
      'image provisioner.local/capi-manager:v1.14.2',
      'certificates to issue: CA, capi-system',
      'create Namespace capi-system',
      'create Deployment capi-system/capi-controller-manager',
      'apply (exists) CustomResourceDefinition clusters.cluster.x-k8s.io',
    ]);
  });
});

describe('installManagement with registry options', () => {
  const request = { kubeconfig: '/nonexistent/kubeconfig', sink: { emit: () => undefined }, signal: new AbortController().signal };

  it('refuses an auth or CA file without a registry, and a CA file for a plain-HTTP loopback registry, before reading anything', async () => {
    const error = await installManagement({ ...request, imageRegistryAuthFile: '/x/config.json' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toBe('\u2039imageRegistryAuthFile\u203a is for pushing to a registry, and no \u2039imageRegistry\u203a is given');
    await expect(installManagement({ ...request, imageRegistry: '127.0.0.1:5000', imageRegistryCaFile: '/x/ca.pem' })).rejects.toThrow(/is for a registry reached over HTTPS; 127\.0\.0\.1:5000 is a loopback registry reached over plain HTTP/);
    await expect(installManagement({ ...request, imageRegistry: 'registry/x' })).rejects.toThrow(UsageError);
  });

  it('names the auth file and the host when the file has no entry for it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-install-auth-'));
    try {
      const file = path.join(dir, 'config.json');
      await writeFile(file, JSON.stringify({ auths: {} }), { mode: 0o600 });
      await expect(installManagement({ ...request, imageRegistry: 'registry.example.com/p', imageRegistryAuthFile: file })).rejects.toThrow(`${file} has no auths entry for registry.example.com`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('nodesLackingImages', () => {
  const node = (name: string, ...names: string[][]) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name }, status: { images: names.map((n) => ({ names: n })) } });

  it('names every node whose kubelet does not report each image, by any of its names', async () => {
    const nodes = [
      node('cp', ['provisioner.local/capi-manager:v1.14.2', 'sha256:aa'], ['provisioner.local/node-artifacts:v1']),
      node('worker', ['provisioner.local/capi-manager:v1.14.2']),
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'new' } },
    ];
    const client = { list: async () => Promise.resolve(nodes) } as unknown as Parameters<typeof nodesLackingImages>[0];
    expect(await nodesLackingImages(client, ['provisioner.local/capi-manager:v1.14.2'])).toEqual(['new']);
    expect(await nodesLackingImages(client, ['provisioner.local/capi-manager:v1.14.2', 'provisioner.local/node-artifacts:v1'])).toEqual(['worker', 'new']);
    expect(await nodesLackingImages(client, [])).toEqual([]);
  });
});
