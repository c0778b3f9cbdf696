/**
 * Image archives a user loads onto the nodes of a cluster without a registry (`provisioner
 * images load`), what `kind load image-archive` is for kind. Each archive is checked to be an
 * image archive (an OCI image layout or a `docker save` tar), then kept in the control plane's
 * artifacts directory as `node/loaded/<sha256>.tar`, beside a record of the image names it
 * holds (`<sha256>.json`): the forwarder serves it to the hosts, which download it by digest,
 * and the directory is the loaded set every later bootstrap plan imports too.
 */
import { copyFile, mkdir, readFile, readdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import { writeFileAtomic } from '../files.js';
import type { NodeArtifact } from './node-images.js';
import { sha256OfFile } from '../files.js';
import { readArchiveMember } from './oci-image.js';

/** Where loaded archives live below the artifacts directory (and so their URL path). */
export const loadedImagesPath = 'node/loaded';

/** The image names an archive holds: an OCI layout's ref annotations, else docker-save's RepoTags; a ConfigError naming the file when it is neither. */
export async function imageNamesOf(file: string): Promise<string[]> {
  const problem = (message: string) =>
    new ConfigError(`${file} is not an image archive`, [{ path: file, message }], {
      hint: 'Pass a tar written by `docker save`, `podman save`, `ctr images export`, `skopeo copy … oci-archive:` or `buildah push … oci-archive:` (uncompressed).',
    });
  let index: Buffer | undefined;
  let manifest: Buffer | undefined;
  try {
    index = await readArchiveMember(file, 'index.json');
    manifest = await readArchiveMember(file, 'manifest.json');
  } catch (error) {
    throw problem(`cannot be read as a tar archive: ${(error as Error).message}`);
  }
  const names = new Set<string>();
  try {
    if (index) {
      const parsed = JSON.parse(index.toString('utf8')) as { manifests?: { annotations?: Record<string, string> }[] };
      for (const entry of parsed.manifests ?? []) {
        const name = entry.annotations?.['io.containerd.image.name'];
        if (name) names.add(name);
      }
    }
    if (manifest) {
      const parsed = JSON.parse(manifest.toString('utf8')) as { RepoTags?: string[] | null }[];
      for (const entry of parsed) for (const tag of entry.RepoTags ?? []) names.add(tag);
    }
  } catch (error) {
    throw problem(`its index.json or manifest.json is not valid JSON: ${(error as Error).message}`);
  }
  if (!index && !manifest) throw problem('it has neither an index.json (OCI image layout) nor a manifest.json (docker save)');
  if (names.size === 0) throw problem('it names no image (no io.containerd.image.name annotation, no RepoTags): the nodes could not refer to it');
  return [...names].sort();
}

interface LoadedRecord {
  refs: string[];
  size: number;
}

/** Checks `file`, keeps it (by digest) in `<artifactsDir>/node/loaded/` with its record, and returns it as a node artifact. */
export async function keepLoadedImage(artifactsDir: string, file: string): Promise<NodeArtifact> {
  const refs = await imageNamesOf(file);
  const sha256 = await sha256OfFile(file);
  const size = (await stat(file)).size;
  const dir = path.join(artifactsDir, loadedImagesPath);
  await mkdir(dir, { recursive: true });
  // A copy, not a link: the user's file may change later, the served one must keep its digest.
  const target = path.join(dir, `${sha256}.tar`);
  await copyFile(file, `${target}.${process.pid}.partial`);
  await rename(`${target}.${process.pid}.partial`, target);
  await writeFileAtomic(path.join(dir, `${sha256}.json`), `${JSON.stringify({ refs, size } satisfies LoadedRecord)}\n`);
  return { path: `${loadedImagesPath}/${sha256}.tar`, sha256, size, refs };
}

/** Every archive loaded so far (those whose record and file agree), by digest. */
export async function loadedImages(artifactsDir: string): Promise<NodeArtifact[]> {
  const dir = path.join(artifactsDir, loadedImagesPath);
  const entries = await readdir(dir).catch(() => [] as string[]);
  const found: NodeArtifact[] = [];
  for (const entry of entries.filter((e) => /^[0-9a-f]{64}\.json$/.test(e)).sort()) {
    const sha256 = entry.slice(0, 64);
    try {
      const record = JSON.parse(await readFile(path.join(dir, entry), 'utf8')) as LoadedRecord;
      const size = (await stat(path.join(dir, `${sha256}.tar`))).size;
      if (size === record.size) found.push({ path: `${loadedImagesPath}/${sha256}.tar`, sha256, size, refs: record.refs });
    } catch {
      // A record without its archive (a load cut short): not part of the set.
    }
  }
  return found;
}
