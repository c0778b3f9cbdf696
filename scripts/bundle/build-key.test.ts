import { cp, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildKey, localReplaces, patchedReplace, readModuleInputs, readWrapperInputs, type BuildKeyParts } from './build-key.js';

const etcdWrapper = fileURLToPath(new URL('../../embedded/modules/etcd', import.meta.url));

async function keyOf(wrapperDir: string, overrides: Partial<BuildKeyParts> = {}): Promise<string> {
  return buildKey({
    builderRevision: '1',
    recipe: { name: 'etcd', wrapper: 'etcd', package: '.' },
    ldflags: '-s -w',
    patched: 'none',
    goVersion: 'go version go1.26.8 linux/amd64',
    env: { GOOS: 'linux', GOARCH: 'amd64', CGO_ENABLED: '0' },
    inputs: await readWrapperInputs(wrapperDir),
    ...overrides,
  });
}

describe('buildKey', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'build-key-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('is the same for two checkouts of the same commit at different paths, with different mtimes', async () => {
    const first = path.join(root, 'checkout-a', 'embedded', 'modules', 'etcd');
    const second = path.join(root, 'elsewhere', 'checkout-b', 'embedded', 'modules', 'etcd');
    await cp(etcdWrapper, first, { recursive: true });
    await cp(etcdWrapper, second, { recursive: true });
    const later = new Date(Date.now() + 3_600_000);
    for (const input of await readWrapperInputs(second)) await utimes(path.join(second, input.name), later, later);
    expect(await keyOf(second)).toBe(await keyOf(first));
  });

  it('changes with a wrapper file, a new Go source, the target and the Go version', async () => {
    const dir = path.join(root, 'etcd');
    await cp(etcdWrapper, dir, { recursive: true });
    const base = await keyOf(dir);
    expect(await keyOf(dir, { env: { GOOS: 'darwin', GOARCH: 'arm64', CGO_ENABLED: '0' } })).not.toBe(base);
    expect(await keyOf(dir, { goVersion: 'go version go1.26.9 linux/amd64' })).not.toBe(base);
    await writeFile(path.join(dir, 'extra.go'), 'package main\n');
    const withSource = await keyOf(dir);
    expect(withSource).not.toBe(base);
    await writeFile(path.join(dir, 'go.sum'), '');
    expect(await keyOf(dir)).not.toBe(withSource);
  });

  it('changes with a Go source in a subdirectory of a wrapper (its own main, as the kubernetes wrapper\'s cmd/kube)', async () => {
    const dir = path.join(root, 'etcd');
    await cp(etcdWrapper, dir, { recursive: true });
    const base = await keyOf(dir);
    await mkdir(path.join(dir, 'cmd', 'x'), { recursive: true });
    await writeFile(path.join(dir, 'cmd', 'x', 'main.go'), 'package main\n');
    expect((await readWrapperInputs(dir)).map((i) => i.name)).toContain('cmd/x/main.go');
    expect(await keyOf(dir)).not.toBe(base);
  });

  it('changes with a Go source of a module of this repository the wrapper replaces to (capi\'s provider/), named by its directory', async () => {
    const dir = path.join(root, 'modules', 'etcd');
    await mkdir(path.dirname(dir), { recursive: true });
    await cp(etcdWrapper, dir, { recursive: true });
    await mkdir(path.join(root, 'own', 'setup'), { recursive: true });
    await writeFile(path.join(root, 'own', 'go.mod'), 'module example.test/own\n');
    await writeFile(path.join(root, 'own', 'setup', 'setup.go'), 'package setup\n');
    await writeFile(path.join(dir, 'go.mod'), `${await readFile(path.join(dir, 'go.mod'), 'utf8')}\nreplace example.test/own => ../../own\n`);
    expect((await readWrapperInputs(dir)).map((i) => i.name)).toEqual(expect.arrayContaining(['go.mod', '../../own/go.mod', '../../own/setup/setup.go']));
    const base = await keyOf(dir);
    await writeFile(path.join(root, 'own', 'setup', 'setup.go'), 'package setup\n\nconst X = 1\n');
    expect(await keyOf(dir)).not.toBe(base);
  });

  it('ignores files that are not part of the build', async () => {
    const dir = path.join(root, 'etcd');
    await cp(etcdWrapper, dir, { recursive: true });
    const base = await keyOf(dir);
    await writeFile(path.join(dir, 'README.md'), 'notes\n');
    expect(await keyOf(dir)).toBe(base);
  });
});

describe('readModuleInputs (our own module)', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'module-inputs-'));
    await mkdir(path.join(root, 'internal', 'agent'), { recursive: true });
    await mkdir(path.join(root, 'bin'), { recursive: true });
    await writeFile(path.join(root, 'go.mod'), 'module example.test/provider\n');
    await writeFile(path.join(root, 'internal', 'agent', 'run.go'), 'package agent\n');
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });
  const keyOfModule = async () => buildKey({
    builderRevision: '1', recipe: { name: 'provisioner-agent', ownModule: 'provider', package: './cmd/agent' }, ldflags: '-s -w', patched: 'none',
    goVersion: 'go version go1.26.8 linux/amd64', env: { GOOS: 'linux', GOARCH: 'amd64', CGO_ENABLED: '0' }, inputs: await readModuleInputs(root),
  });

  it('changes with a source in a subpackage, named by its path', async () => {
    expect((await readModuleInputs(root)).map((i) => i.name)).toEqual(['go.mod', 'internal/agent/run.go']);
    const base = await keyOfModule();
    await writeFile(path.join(root, 'internal', 'agent', 'run.go'), 'package agent\n\nconst changed = 1\n');
    expect(await keyOfModule()).not.toBe(base);
  });

  it('ignores tests and build output', async () => {
    const base = await keyOfModule();
    await writeFile(path.join(root, 'internal', 'agent', 'run_test.go'), 'package agent\n');
    await writeFile(path.join(root, 'bin', 'stray.go'), 'package main\n');
    expect(await keyOfModule()).toBe(base);
  });
});

describe('patchedReplace', () => {
  it('points at the patched copy relative to the wrapper, so no build-cache path lands in the binary', () => {
    const line = patchedReplace('sigs.k8s.io/controller-runtime', 'v0.24.1', 'sigs.k8s.io_controller-runtime@v0.24.1-0c0a7212a80c5098');
    expect(line).toBe('replace sigs.k8s.io/controller-runtime v0.24.1 => ../../patched/sigs.k8s.io_controller-runtime@v0.24.1-0c0a7212a80c5098');
    expect(line).not.toContain(os.homedir());
    // The wrapper copy is <cache>/wrappers/<name>: the relative path lands on <cache>/patched/<copy>.
    const cache = path.join(os.tmpdir(), 'any-cache');
    const target = line.split(' => ')[1]!;
    expect(path.resolve(cache, 'wrappers', 'capi-0123', target)).toBe(path.join(cache, 'patched', 'sigs.k8s.io_controller-runtime@v0.24.1-0c0a7212a80c5098'));
  });
});

describe('localReplaces', () => {
  it('finds the replaces to a relative directory, with or without a version, and no other', () => {
    const goMod = 'module m\n\nreplace a.test/x => ../../../provider\nreplace b.test/y v1.2.3 => ./local/\nreplace c.test/z => c.test/z v1.0.0\n';
    expect(localReplaces(goMod)).toEqual([
      { line: 'replace a.test/x => ../../../provider', module: 'a.test/x', dir: '../../../provider' },
      { line: 'replace b.test/y v1.2.3 => ./local/', module: 'b.test/y', dir: './local' },
    ]);
  });
});
