/**
 * The container images a node on a machine we did not create runs, built from our own bundled binaries
 * (no registry, no Docker) as OCI archives for `ctr -n k8s.io images import`, and the
 * directory of node artifacts such machines download (served read-only by provisioner-forwarder).
 *
 * Refs are `provisioner.local/<name>:<tag>` (kubeadm's imageRepository `provisioner.local`):
 *  - kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy: the binary's
 *    version, e.g. `v1.36.3`, the tag kubeadm derives from kubernetesVersion;
 *  - etcd: `<version without v>-0`, e.g. `3.6.8-0`, the form of kubeadm's etcd tags
 *    (registry.k8s.io/etcd:3.6.8-0). kubeadm v1.36 defaults to exactly that for our etcd
 *    3.6.8; with another etcd, ClusterConfiguration etcd.local.imageTag names this tag;
 *  - pause: our own binary's version (package.json's, e.g. `v0.1.0`), and the same image
 *    also as `kubeadmPauseTag`, the pause tag kubeadm's image preflight and config name,
 *    so containerd's sandbox_image can use either and kubeadm finds what it lists.
 *
 * Archives are cached under `<cache>/images/<key>/` where the key is a hash of the
 * binary's sha256, the refs, the platform and this writer's revision: a second cluster
 * with the same binaries rebuilds nothing.
 */
import { createHash } from 'node:crypto';
import { copyFile, link, mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../files.js';
import { sha256OfFile, writeImageArchive, type ImageSpec, type WrittenImage } from './oci-image.js';

/** kubeadm's imageRepository for every node image. */
export const imageRepository = 'provisioner.local';

/** The images a node needs, by the bundled binary each is built from. */
export const nodeImageNames = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'etcd', 'pause'] as const;
export type NodeImageName = (typeof nodeImageNames)[number];

/** The binaries a host downloads and runs outside containers. */
export const nodeBinaryNames = ['kubelet', 'kubeadm'] as const;

/**
 * The pause tag the bundled kubeadm expects (k8s.io/kubernetes cmd/kubeadm/app/constants
 * PauseVersion, v1.36.3); the integration test compares it with `kubeadm config images list`.
 */
export const kubeadmPauseTag = '3.10.2';

/** The CoreDNS tag kubeadm v1.36.3 names (cmd/kubeadm/app/constants CoreDNSVersion). */
export const kubeadmCorednsTag = 'v1.14.2';
/** The tag of the CoreDNS image built from the bundle. */
export const corednsImageTag = 'v1.14.2';
/** The bundled pod network's image (flanneld, the flannel CNI plugin, cp). */
export const flannelImageRef = `${imageRepository}/flannel:v0.28.10`;

/** Bumped when the archive layout changes, so cached archives are rebuilt. */
const writerRevision = '1';

/** The tag of a node image for the binary's version (see the module comment). */
export function nodeImageTag(name: NodeImageName, version: string): string {
  if (name === 'etcd') return `${version.replace(/^v/, '')}-0`;
  return version;
}

/** `provisioner.local/<name>:<tag>`. */
export function nodeImageRef(name: NodeImageName, version: string): string {
  return `${imageRepository}/${name}:${nodeImageTag(name, version)}`;
}

/** Every ref an image is imported as: `nodeImageRef`, and for pause also kubeadm's tag. */
export function nodeImageRefs(name: NodeImageName, version: string): string[] {
  const refs = [nodeImageRef(name, version)];
  if (name === 'pause') refs.push(`${imageRepository}/pause:${kubeadmPauseTag}`);
  return [...new Set(refs)];
}

/** A binary to build an image from or to serve. */
export interface NodeBinary {
  /** Executable file. */
  path: string;
  /** Version the binary reports (the bundle's record of it), e.g. `v1.36.3`. */
  version: string;
  /** sha256 (hex) of the file when known (the bundle's); computed otherwise. */
  sha256?: string;
}

/** A built (or cached) image archive. */
export interface NodeImageArchive extends WrittenImage {
  name: NodeImageName;
  /** The main ref (`nodeImageRef`); `refs` has every ref the archive imports as. */
  ref: string;
  cached: boolean;
}

export interface NodeImagesOptions {
  /** Cache directory (the binary cache's root); archives go to `<cacheDir>/images/`. */
  cacheDir: string;
  /** Go's name of the binaries' CPU; they must be Linux binaries. */
  architecture: ImageSpec['architecture'];
}

/** Builds (or takes from the cache) the archive of every image in `binaries`. */
export async function ensureNodeImages(binaries: Partial<Record<NodeImageName, NodeBinary>>, options: NodeImagesOptions): Promise<NodeImageArchive[]> {
  const result: NodeImageArchive[] = [];
  for (const name of nodeImageNames) {
    const binary = binaries[name];
    if (binary) result.push(await ensureNodeImage(name, binary, options));
  }
  return result;
}

interface CacheRecord extends Omit<WrittenImage, 'file'> {
  file: string;
}

/** One image archive, from the cache when its record and file agree, else written now. */
export async function ensureNodeImage(name: NodeImageName, binary: NodeBinary, options: NodeImagesOptions): Promise<NodeImageArchive> {
  const ref = nodeImageRef(name, binary.version);
  const refs = nodeImageRefs(name, binary.version);
  const binarySha256 = binary.sha256 ?? (await sha256OfFile(binary.path));
  const key = createHash('sha256').update(JSON.stringify({ writerRevision, binarySha256, name, refs, os: 'linux', architecture: options.architecture })).digest('hex');
  const dir = path.join(options.cacheDir, 'images', key);
  const recordFile = path.join(dir, 'record.json');
  const file = path.join(dir, `${name}.tar`);
  const record = await readRecord(recordFile);
  if (record && (await stat(file).then((s) => s.size === record.size, () => false))) {
    return { ...record, file, name, ref, cached: true };
  }
  await mkdir(dir, { recursive: true });
  const written = await writeImageArchive({ binaryPath: binary.path, name, refs, os: 'linux', architecture: options.architecture }, file);
  await writeFileAtomic(recordFile, JSON.stringify({ ...written, file: path.basename(file) } satisfies CacheRecord, null, 2));
  return { ...written, name, ref, cached: false };
}

async function readRecord(file: string): Promise<CacheRecord | undefined> {
  try {
    const record = JSON.parse(await readFile(file, 'utf8')) as Partial<CacheRecord>;
    if (typeof record.sha256 !== 'string' || typeof record.size !== 'number' || typeof record.manifestDigest !== 'string' || !Array.isArray(record.refs)) return undefined;
    return record as CacheRecord;
  } catch {
    return undefined; // absent or cut short: rebuild
  }
}

/** One file of the node artifacts directory, as a NodePlan file's contentRef names it. */
export interface NodeArtifact {
  /** Path below the artifacts directory, `/`-separated: the URL path. */
  path: string;
  sha256: string;
  size: number;
  /** For images: the main ref the archive imports as. */
  ref?: string;
  /** For images: every ref the archive imports as. */
  refs?: readonly string[];
}

/**
 * Fills `<artifactsDir>/node/bin/<binary>` and `<artifactsDir>/node/images/<name>.tar`
 * (hard links to the cache where the file system allows, copies otherwise; mode 0644:
 * served, not run here) and returns what is there with digests, for plan contentRefs.
 * Files of a previous preparation are replaced.
 */
export async function prepareNodeArtifacts(
  artifactsDir: string,
  binaries: Partial<Record<(typeof nodeBinaryNames)[number], NodeBinary>>,
  images: readonly NodeImageArchive[],
): Promise<NodeArtifact[]> {
  const artifacts: NodeArtifact[] = [];
  await mkdir(path.join(artifactsDir, 'node', 'bin'), { recursive: true });
  await mkdir(path.join(artifactsDir, 'node', 'images'), { recursive: true });
  for (const name of nodeBinaryNames) {
    const binary = binaries[name];
    if (!binary) continue;
    const rel = `node/bin/${name}`;
    await placeArtifact(binary.path, path.join(artifactsDir, rel));
    const size = (await stat(binary.path)).size;
    artifacts.push({ path: rel, sha256: binary.sha256 ?? (await sha256OfFile(binary.path)), size });
  }
  for (const image of images) {
    const rel = `node/images/${image.name}.tar`;
    await placeArtifact(image.file, path.join(artifactsDir, rel));
    artifacts.push({ path: rel, sha256: image.sha256, size: image.size, ref: image.ref, refs: image.refs });
  }
  return artifacts;
}

/** `target` becomes `source`'s content: a hard link, or a copy across file systems. */
async function placeArtifact(source: string, target: string): Promise<void> {
  await rm(target, { force: true });
  try {
    await link(source, target);
  } catch {
    await copyFile(source, target);
  }
}
