/**
 * The providers' images: one OCI archive per bundled manager binary, built from the same
 * binary the local control plane runs (static Go binaries, CGO off: scripts/bundle/build.ts),
 * as a single layer holding `/usr/local/bin/<binary>` and nothing else (nodeartifacts/oci-image.ts).
 * Refs are `provisioner.local/<binary>:<version>`, like the node images. Archives are cached
 * under `<cache>/images/<key>/` by the binary's digest: a second install builds nothing.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../files.js';
import { imageRepository } from '../nodeartifacts/node-images.js';
import { sha256OfFile } from '../files.js';
import { writeImageArchive, type ImageSpec, type WrittenImage } from '../nodeartifacts/oci-image.js';

/** Bumped when the archive's recipe changes, so cached archives are rebuilt. */
const writerRevision = '1';

export interface ProviderImage extends WrittenImage {
  binary: string;
  ref: string;
  cached: boolean;
}

export function providerImageRef(binary: string, version: string): string {
  return `${imageRepository}/${binary}:${version}`;
}

/** The archive of `binary` (from the cache when its record and file agree, else written now). */
export async function ensureProviderImage(
  binary: { name: string; path: string; version: string; sha256?: string },
  options: { cacheDir: string; architecture: ImageSpec['architecture'] },
): Promise<ProviderImage> {
  const ref = providerImageRef(binary.name, binary.version);
  const sha256 = binary.sha256 ?? (await sha256OfFile(binary.path));
  const key = createHash('sha256').update(JSON.stringify({ kind: 'provider', writerRevision, sha256, ref, architecture: options.architecture })).digest('hex');
  const dir = path.join(options.cacheDir, 'images', key);
  const file = path.join(dir, `${binary.name}.tar`);
  const recordFile = path.join(dir, 'record.json');
  try {
    const record = JSON.parse(await readFile(recordFile, 'utf8')) as WrittenImage;
    if ((await stat(file)).size === record.size) return { ...record, file, binary: binary.name, ref, cached: true };
  } catch {
    // absent or cut short: write it
  }
  await mkdir(dir, { recursive: true });
  const written = await writeImageArchive({ name: binary.name, binaryPath: binary.path, refs: [ref], os: 'linux', architecture: options.architecture }, file);
  await writeFileAtomic(recordFile, JSON.stringify({ ...written, file: path.basename(file) }, null, 2));
  return { ...written, binary: binary.name, ref, cached: false };
}
