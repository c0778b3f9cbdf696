import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EnvironmentError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { ensureBinaries } from '../embedded/cache.js';
import type { BundleManifest } from '../embedded/manifest.js';
import { cliVersion } from '../version.js';
import { showVersion, type VersionReport } from './version.js';

async function writeBundle(dir: string): Promise<BundleManifest> {
  await mkdir(path.join(dir, 'bin'), { recursive: true });
  await mkdir(path.join(dir, 'components'), { recursive: true });
  const binaries = [];
  for (const [name, shipped] of [['etcd', true], ['kubectl', false]] as const) {
    const content = randomBytes(4096);
    const gz = gzipSync(content);
    await writeFile(path.join(dir, 'bin', `${name}.gz`), gz);
    binaries.push({
      name,
      version: name === 'etcd' ? 'v3.6.8' : 'v1.36.3',
      module: name === 'etcd' ? 'go.etcd.io/etcd/server/v3' : 'k8s.io/kubernetes',
      moduleVersion: name === 'etcd' ? 'v3.6.8' : 'v1.36.3',
      package: '.',
      archive: `bin/${name}.gz`,
      sha256: createHash('sha256').update(content).digest('hex'),
      archiveSha256: createHash('sha256').update(gz).digest('hex'),
      size: content.length,
      compressedSize: gz.length,
      shipped,
    });
  }
  const manifest: BundleManifest = {
    schemaVersion: 1,
    recipeHash: 'r'.repeat(64),
    goVersion: 'go version go1.26.8 linux/amd64',
    createdAt: '2026-01-01T00:00:00.000Z',
    binaries,
    components: [
      { provider: 'cluster-api', type: 'CoreProvider', namespace: 'capi-system', version: 'v1.14.2', file: 'components/cluster-api.yaml', sha256: 'c'.repeat(64) },
    ],
  };
  await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
  return manifest;
}

describe('showVersion', () => {
  let root: string;
  let bundleDir: string;
  let cacheDir: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'provisioner-version-'));
    bundleDir = path.join(root, 'bundle');
    cacheDir = path.join(root, 'cache');
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('reports the CLI, every binary with its source, digest, size, shipped flag and cache state, and the providers', async () => {
    const manifest = await writeBundle(bundleDir);
    await ensureBinaries(['etcd'], { bundleDir, cacheDir });
    const sink = new RecordingSink();
    const report = await showVersion({ bundleDir, cacheDir, env: {} }, sink);

    expect(report.cli).toBe(cliVersion);
    expect(report.bundle).toMatchObject({ state: 'present', dir: bundleDir, goVersion: manifest.goVersion });
    expect(report.binaries.map((b) => [b.name, b.source, b.shipped, b.cache.state])).toEqual([
      ['etcd', 'go.etcd.io/etcd/server/v3@v3.6.8', true, 'ready'],
      ['kubectl', 'k8s.io/kubernetes@v1.36.3', false, 'absent'],
    ]);
    expect(report.binaries[0]?.sha256).toBe(manifest.binaries[0]?.sha256);
    expect(report.components).toEqual([expect.objectContaining({ provider: 'cluster-api', version: 'v1.14.2', file: path.join(bundleDir, 'components/cluster-api.yaml') })]);

    const [result] = sink.ofType('result');
    expect(result?.kind).toBe('version');
    expect(result?.data).toEqual(report);
    const text = result?.text ?? '';
    expect(text).toContain(`provisioner ${cliVersion}`);
    // Short digests in text, full ones only in data.
    expect(text).toContain(manifest.binaries[0]!.sha256.slice(0, 12));
    expect(text).not.toContain(manifest.binaries[0]!.sha256);
    // Aligned: the VERSION column starts at the same offset on the header and every row.
    const rows = text.split('\n').filter((l) => /^(BINARY|etcd|kubectl) /.test(l));
    expect(rows).toHaveLength(3);
    const offsets = rows.map((l, i) => l.indexOf(i === 0 ? 'VERSION' : 'v'));
    expect(new Set(offsets).size).toBe(1);
    expect(text).toMatch(/kubectl .*no \(dev\)\s+not extracted/);
  });

  it('re-hashes cached binaries with verify and warns about a corrupt one', async () => {
    await writeBundle(bundleDir);
    const paths = await ensureBinaries(['etcd', 'kubectl'], { bundleDir, cacheDir });
    const plain = await showVersion({ bundleDir, cacheDir, env: {} }, new RecordingSink());
    expect(plain.binaries.map((b) => b.cache.verified)).toEqual([false, false]);

    await truncate(paths.kubectl!, 10);
    const sink = new RecordingSink();
    const verified = await showVersion({ bundleDir, cacheDir, env: {}, verify: true }, sink);
    expect(verified.binaries.map((b) => [b.cache.state, b.cache.verified])).toEqual([['ready', true], ['stale', false]]);
    expect(sink.ofType('result')[0]?.text).toMatch(/etcd .*extracted, verified/);
  });

  it('names a binary the user provides in PROVISIONER_BINARIES_DIR', async () => {
    await writeBundle(bundleDir);
    const own = path.join(root, 'own');
    await mkdir(own);
    await writeFile(path.join(own, 'kubectl'), '#!/bin/sh\n', { mode: 0o755 });
    const report: VersionReport = await showVersion({ bundleDir, cacheDir, env: { PROVISIONER_BINARIES_DIR: own } }, new RecordingSink());
    expect(report.binaries.find((b) => b.name === 'kubectl')?.userBinary).toBe(path.join(own, 'kubectl'));
    expect(report.binaries.find((b) => b.name === 'etcd')?.userBinary).toBeUndefined();
  });

  it('prints the CLI version and the missing bundle, then fails with the build hint', async () => {
    const sink = new RecordingSink();
    const missing = path.join(root, 'no-bundle');
    const error = await showVersion({ bundleDir: missing, cacheDir, env: {} }, sink).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).hint).toContain('npm run bundle');
    const [result] = sink.ofType('result');
    expect(result?.text).toContain(`provisioner ${cliVersion}`);
    expect(result?.text).toContain(`bundle  missing: ${missing}`);
    expect(result?.data).toMatchObject({ cli: cliVersion, bundle: { state: 'missing', dir: missing } });
  });
});
