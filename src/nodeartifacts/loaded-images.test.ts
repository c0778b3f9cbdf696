import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { imageNamesOf, keepLoadedImage, loadedImages } from './loaded-images.js';
import { sha256OfFile } from '../files.js';
import { writeImageArchive } from './oci-image.js';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-loaded-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function archive(refs: string[]): Promise<string> {
  const binary = path.join(dir, 'app');
  await writeFile(binary, '#!/bin/sh\necho app\n');
  const file = path.join(dir, 'app.tar');
  await writeImageArchive({ binaryPath: binary, name: 'app', refs, os: 'linux', architecture: 'amd64' }, file);
  return file;
}

describe('loaded image archives', () => {
  it('reads the names an OCI archive gives its image, keeps it by digest and lists it as part of the loaded set', async () => {
    const file = await archive(['registry.example.com/app:v1', 'registry.example.com/app:latest']);
    expect(await imageNamesOf(file)).toEqual(['registry.example.com/app:latest', 'registry.example.com/app:v1']);
    const artifacts = path.join(dir, 'artifacts');
    const kept = await keepLoadedImage(artifacts, file);
    const sha256 = await sha256OfFile(file);
    expect(kept).toEqual({ path: `node/loaded/${sha256}.tar`, sha256, size: kept.size, refs: ['registry.example.com/app:latest', 'registry.example.com/app:v1'] });
    expect(await sha256OfFile(path.join(artifacts, kept.path))).toBe(sha256);
    expect(await loadedImages(artifacts)).toEqual([kept]);
    // Loading the same archive again keeps one copy.
    await keepLoadedImage(artifacts, file);
    expect(await loadedImages(artifacts)).toHaveLength(1);
  });

  it('refuses a file that is no image archive, naming it, and keeps nothing', async () => {
    const file = path.join(dir, 'notes.tar');
    await writeFile(file, Buffer.alloc(2048));
    const error = await keepLoadedImage(path.join(dir, 'artifacts'), file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain(file);
    expect(await loadedImages(path.join(dir, 'artifacts'))).toEqual([]);
  });
});
