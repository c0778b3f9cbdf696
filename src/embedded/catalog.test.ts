import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { BundleCatalog, bundleDirEnv, loadCatalog, MissingLayerError, packageRoot, resolveBundleDir, validateManifest } from './catalog.js';
import type { BundledLayer, BundleManifest, ReleaseManifest } from './manifest.js';
import { ReleaseCatalog } from './release.js';

const sha = (c: string) => c.repeat(64);

function manifest(): BundleManifest {
  return {
    schemaVersion: 1,
    recipeHash: 'abc',
    goVersion: 'go version go1.26.8 linux/amd64',
    createdAt: '2025-01-01T00:00:00Z',
    binaries: [
      {
        name: 'cluster-api-manager',
        version: 'v1.14.2',
        module: 'sigs.k8s.io/cluster-api',
        moduleVersion: 'v1.14.2',
        package: 'sigs.k8s.io/cluster-api/core',
        archive: 'bin/cluster-api-manager.gz',
        sha256: sha('a'),
        archiveSha256: sha('b'),
        size: 100,
        compressedSize: 40,
        shipped: true,
      },
      {
        name: 'kubectl',
        version: 'v1.36.3',
        module: 'k8s.io/kubernetes',
        moduleVersion: 'v1.36.3',
        package: 'k8s.io/kubernetes/cmd/kubectl',
        archive: 'bin/kubectl.gz',
        sha256: sha('c'),
        archiveSha256: sha('d'),
        size: 10,
        compressedSize: 5,
        shipped: false,
      },
    ],
    components: [
      {
        provider: 'cluster-api',
        type: 'CoreProvider',
        namespace: 'capi-system',
        version: 'v1.14.2',
        binary: 'cluster-api-manager',
        file: 'components/cluster-api.yaml',
        sha256: sha('e'),
      },
    ],
  };
}

describe('resolveBundleDir', () => {
  it('prefers the option, then PROVISIONER_BUNDLE_DIR, then <package root>/bundle', () => {
    expect(resolveBundleDir({ bundleDir: '/opt/b', env: { [bundleDirEnv]: '/env/b' } })).toBe('/opt/b');
    expect(resolveBundleDir({ env: { [bundleDirEnv]: '/env/b' } })).toBe('/env/b');
    expect(resolveBundleDir({ env: {} })).toBe(path.join(packageRoot, 'bundle'));
    expect(resolveBundleDir({ env: { [bundleDirEnv]: '' } })).toBe(path.join(packageRoot, 'bundle'));
  });

  it('finds the package root two levels above src/embedded', () => {
    expect(path.join(packageRoot, 'src', 'embedded', 'catalog.ts')).toBe(new URL('./catalog.ts', import.meta.url).pathname);
  });
});

describe('loadCatalog', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-catalog-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads a valid manifest and looks binaries and providers up', async () => {
    await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest()));
    const catalog = await loadCatalog({ bundleDir: dir });
    expect(catalog.dir).toBe(dir);
    expect(catalog.binary('kubectl').version).toBe('v1.36.3');
    expect(catalog.findBinary('nope')).toBeUndefined();
    expect(catalog.shippedNames()).toEqual(['cluster-api-manager']);
    expect(catalog.provider('cluster-api').namespace).toBe('capi-system');
    expect(catalog.providersOf('cluster-api-manager').map((c) => c.provider)).toEqual(['cluster-api']);
    expect(catalog.archivePath(catalog.binary('kubectl'))).toBe(path.join(dir, 'bin', 'kubectl.gz'));
    expect(catalog.componentsPath(catalog.provider('cluster-api'))).toBe(path.join(dir, 'components', 'cluster-api.yaml'));
    expect(() => catalog.binary('etcd')).toThrow(/no binary named "etcd"/);
    expect(() => catalog.provider('infrastructure-aws')).toThrow(EnvironmentError);
  });

  it('reads PROVISIONER_BUNDLE_DIR when no option is given', async () => {
    await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest()));
    const catalog = await loadCatalog({ env: { [bundleDirEnv]: dir } });
    expect(catalog.dir).toBe(dir);
  });

  it('says how to build the bundle when it is missing', async () => {
    const missing = path.join(dir, 'nothing-here');
    const error = await loadCatalog({ bundleDir: missing }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    const env = error as EnvironmentError;
    expect(env.message).toContain(path.join(missing, 'manifest.json'));
    expect(env.hint).toContain('npm run bundle');
    expect(env.hint).toContain(packageRoot);
  });

  it('rejects a manifest that is not JSON', async () => {
    await writeFile(path.join(dir, 'manifest.json'), '{ not json');
    await expect(loadCatalog({ bundleDir: dir })).rejects.toThrow(/not valid JSON/);
  });

  it('rejects another schema version with a rebuild hint', async () => {
    await writeFile(path.join(dir, 'manifest.json'), JSON.stringify({ ...manifest(), schemaVersion: 2 }));
    const error = (await loadCatalog({ bundleDir: dir }).catch((e: unknown) => e)) as EnvironmentError;
    expect(error.message).toMatch(/unsupported schema version/);
    expect(error.details.join('\n')).toMatch(/schemaVersion: is 2, this provisioner reads 1/);
    expect(error.hint).toContain('npm run bundle');
  });
});

describe('validateManifest', () => {
  it('lists every problem by field path', () => {
    const bad = manifest() as unknown as { binaries: Record<string, unknown>[]; components: Record<string, unknown>[]; recipeHash?: string };
    delete bad.recipeHash;
    Object.assign(bad.binaries[0]!, { sha256: 'XYZ', size: -1, shipped: 'yes', archive: '../../etc/passwd' });
    Object.assign(bad.binaries[1]!, { name: 'cluster-api-manager' });
    Object.assign(bad.components[0]!, { type: 'Operator', binary: 'missing-binary' });
    let error: EnvironmentError | undefined;
    try {
      validateManifest(bad, '/b/manifest.json');
    } catch (e) {
      error = e as EnvironmentError;
    }
    expect(error).toBeInstanceOf(EnvironmentError);
    expect(error?.message).toMatch(/malformed/);
    expect(error?.details).toEqual(
      expect.arrayContaining([
        'recipeHash: must be a non-empty string',
        'binaries[0].sha256: must be 64 lower-case hex digits',
        'binaries[0].size: must be a non-negative integer',
        'binaries[0].shipped: must be true or false',
        'binaries[0].archive: "../../etc/passwd" points outside the bundle',
        'binaries[1].name: "cluster-api-manager" appears twice',
        'components[0].type: must be one of CoreProvider, BootstrapProvider, ControlPlaneProvider, InfrastructureProvider',
        'components[0].binary: "missing-binary" is not a binary of this bundle',
      ]),
    );
  });

  it('rejects binary names that are not plain file names', () => {
    const bad = manifest();
    bad.binaries[0]!.name = '../x';
    bad.components = [];
    expect(() => validateManifest(bad, '/b/manifest.json')).toThrow(EnvironmentError);
    bad.binaries[0]!.name = '.hidden';
    expect(() => validateManifest(bad, '/b/manifest.json')).toThrow(EnvironmentError);
  });

  it('finds a multi-call binary by each of its links, and refuses a link that is not a plain name or that clashes', () => {
    const ok = manifest();
    ok.binaries[1]!.links = ['kube-apiserver', 'kubelet'];
    const catalog = new BundleCatalog('/b', validateManifest(ok, '/b/manifest.json'));
    expect(catalog.binary('kubelet').name).toBe('kubectl');
    expect(catalog.findBinary('kube-apiserver')?.name).toBe('kubectl');
    expect(catalog.findBinary('kube-proxy')).toBeUndefined();
    const bad = manifest();
    bad.binaries[1]!.links = ['../kubelet', 'cluster-api-manager'];
    expect(() => validateManifest(bad, '/b/manifest.json')).toThrow(
      expect.objectContaining({
        details: ['binaries[1].links[0]: "../kubelet" is not a plain file name', 'binaries[1].links[1]: "cluster-api-manager" is already a binary or a link'],
      }),
    );
  });

  it('accepts a component without a binary (CRD-only provider)', () => {
    const ok = manifest();
    delete ok.components[0]!.binary;
    expect(validateManifest(ok, '/b/manifest.json').components[0]?.provider).toBe('cluster-api');
  });
});

describe('layers', () => {
  const userland = (): BundledLayer => ({
    name: 'userland',
    archive: 'layers/userland.tar.gz',
    sha256: sha('1'),
    archiveSha256: sha('2'),
    size: 7_702_016,
    compressedSize: 3_086_626,
    architecture: 'amd64',
    packages: [{ name: 'iptables', version: '1.8.9-2' }],
  });

  it('validates a bundle layer and finds it by name', () => {
    const ok = { ...manifest(), layers: [userland()] };
    const catalog = new BundleCatalog('/b', validateManifest(ok, '/b/manifest.json'));
    expect(catalog.layer('userland').sha256).toBe(sha('1'));
    expect(catalog.layerArchivePath(catalog.layer('userland'))).toBe(path.join('/b', 'layers/userland.tar.gz'));
  });

  it('lists a malformed layer’s problems', () => {
    const bad = { ...manifest(), layers: [{ ...userland(), archive: '../x.tar.gz', sha256: 'nope', packages: [{ name: 'iptables' }] }] };
    try {
      validateManifest(bad, '/b/manifest.json');
      expect.unreachable();
    } catch (error) {
      expect((error as EnvironmentError).details).toEqual([
        'layers[0].sha256: must be 64 lower-case hex digits',
        'layers[0].archive: "../x.tar.gz" points outside the bundle',
        'layers[0].packages: must be an array of { name, version }',
      ]);
    }
  });

  it('is a MissingLayerError with the way out for a bundle without it and for an installed release', () => {
    const catalog = new BundleCatalog('/b', manifest());
    expect(() => catalog.layer('userland')).toThrow(MissingLayerError);
    expect(() => catalog.layer('userland')).toThrow(/bundle in \/b has no "userland" layer/);
    // Only the version is read: releases carry no layers.
    const release = new ReleaseCatalog('/r', { version: '0.1.0', binaries: [], components: [] } as unknown as ReleaseManifest, 'linux-x64', '/r');
    expect(() => release.layer('userland')).toThrow(MissingLayerError);
    expect(() => release.layer('userland')).toThrow(/release provisioner 0\.1\.0 has no "userland" layer/);
  });
});
