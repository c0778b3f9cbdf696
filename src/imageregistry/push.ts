/**
 * Pushing an image of an OCI archive (an OCI image layout in a tar, as nodeartifacts/oci-image.ts
 * writes them) to a registry: its index entry found by the ref it carries
 * (`io.containerd.image.name`), every blob the registry lacks uploaded (config and layers; an
 * index's manifests first, by digest), then the manifest, or the index, by tag. A second push of
 * the same archive uploads nothing: HEAD finds every blob.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { EnvironmentError } from '../errors.js';
import { archiveMembers, readMemberAt, type ArchiveMember } from '../nodeartifacts/oci-image.js';
import type { RegistryClient } from './client.js';

/** One image to push: the ref it has in the archive, and where it goes. */
export interface ImagePush {
  /** Its ref in the archive, e.g. `provisioner.local/capi-manager:v1.14.2`. */
  sourceRef: string;
  repository: string;
  tag: string;
}

export interface PushedBlob {
  digest: string;
  size: number;
  /** False: the registry had it already (HEAD said so). */
  uploaded: boolean;
}

export interface PushedImage {
  repository: string;
  tag: string;
  /** `sha256:<hex>` of the manifest (or index) pushed by tag. */
  digest: string;
  blobs: PushedBlob[];
}

interface Descriptor {
  mediaType?: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

const indexTypes = new Set(['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json']);

/** Pushes `image` from `archive` through `client`; `onBlob` hears of each blob as it is settled. */
export async function pushArchiveImage(client: RegistryClient, archive: string, image: ImagePush, onBlob?: (blob: PushedBlob) => void): Promise<PushedImage> {
  const members = await archiveMembers(archive);
  const broken = (why: string): EnvironmentError =>
    new EnvironmentError(`The image archive ${archive} cannot be pushed: ${why}`, { hint: 'Remove it (it is a cache entry) and run the command again to write it anew.' });
  const memberOf = (digest: string): ArchiveMember => {
    const found = /^sha256:([0-9a-f]{64})$/.exec(digest) ? members.get(`blobs/sha256/${digest.slice('sha256:'.length)}`) : undefined;
    if (!found) throw broken(`it has no blob ${digest}`);
    return found;
  };
  const read = (member: ArchiveMember): Promise<Buffer> => readMemberAt(archive, member);
  const indexMember = members.get('index.json');
  if (!indexMember) throw broken('it has no index.json (not an OCI image layout)');
  const index = parseJson<{ manifests?: Descriptor[] }>(await read(indexMember), 'index.json', broken);
  const entry = index.manifests?.find((m) => m.annotations?.['io.containerd.image.name'] === image.sourceRef);
  if (!entry) throw broken(`it has no image ${image.sourceRef}`);

  const blobs: PushedBlob[] = [];
  const settled = new Set<string>();
  const ensureBlob = async (descriptor: Descriptor): Promise<void> => {
    if (settled.has(descriptor.digest)) return;
    settled.add(descriptor.digest);
    const member = memberOf(descriptor.digest);
    if (member.size !== descriptor.size) throw broken(`blob ${descriptor.digest} has ${member.size} bytes where its descriptor says ${descriptor.size}`);
    const uploaded = !(await client.hasBlob(image.repository, descriptor.digest));
    if (uploaded) {
      await client.pushBlob(image.repository, descriptor.digest, { stream: () => createReadStream(archive, { start: member.offset, end: member.offset + member.size - 1 }), size: member.size });
    }
    const blob = { digest: descriptor.digest, size: descriptor.size, uploaded };
    blobs.push(blob);
    onBlob?.(blob);
  };
  const pushManifest = async (descriptor: Descriptor, reference: string): Promise<void> => {
    const bytes = await read(memberOf(descriptor.digest));
    if (`sha256:${createHash('sha256').update(bytes).digest('hex')}` !== descriptor.digest) throw broken(`blob ${descriptor.digest} does not have that digest`);
    const manifest = parseJson<{ mediaType?: string; config?: Descriptor; layers?: Descriptor[]; manifests?: Descriptor[] }>(bytes, descriptor.digest, broken);
    const mediaType = descriptor.mediaType ?? manifest.mediaType;
    if (mediaType === undefined) throw broken(`manifest ${descriptor.digest} has no media type`);
    if (indexTypes.has(mediaType)) {
      for (const child of manifest.manifests ?? []) await pushManifest(child, child.digest);
    } else {
      for (const blob of [...(manifest.config ? [manifest.config] : []), ...(manifest.layers ?? [])]) await ensureBlob(blob);
    }
    const reported = await client.putManifest(image.repository, reference, mediaType, bytes);
    if (reported !== undefined && reported !== descriptor.digest) {
      throw new EnvironmentError(`The registry stored manifest ${reference} of ${image.repository} as ${reported}, not as the pushed ${descriptor.digest}`, {
        hint: 'The registry rewrote the manifest; use a registry that stores manifests as pushed (an OCI distribution registry).',
      });
    }
  };
  await pushManifest(entry, image.tag);
  return { repository: image.repository, tag: image.tag, digest: entry.digest, blobs };
}

function parseJson<T>(bytes: Buffer, what: string, broken: (why: string) => Error): T {
  try {
    return JSON.parse(bytes.toString('utf8')) as T;
  } catch {
    throw broken(`${what} is not JSON`);
  }
}
