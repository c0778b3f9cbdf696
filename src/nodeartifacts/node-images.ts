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
 *    so containerd's sandbox_image can use either and kubeadm finds what it lists;
 *  - coredns: CoreDNS's version, e.g. `v1.14.2` (`corednsImageTag`), the form kubeadm
 *    names `<imageRepository>/coredns:<CoreDNSVersion>` in;
 *  - flannel: flanneld's version, e.g. `v0.28.10` (`flannelImageRef`);
 *  - agnhost (tests only, `ensureAgnhostImage`): the Kubernetes version it is built at.
 *
 * kube-proxy and flannel have the `userland` layer (Debian's nft iptables and busybox,
 * scripts/bundle/userland.ts) above their binaries: kube-proxy's iptables mode and flanneld
 * run iptables, and flannel's init container runs `sh` and `cp`. The others are one binary each.
 *
 * The four Kubernetes images are one archive, `kubernetes.tar`: each image's lowest layer is
 * the same one, `kube` at /usr/local/bin/kube with the four component names linked to it
 * (kube runs the component it is called as), so the archive, and a host's download,
 * holds `kube` once. Every other image is an archive of its own, `<name>.tar`.
 *
 * Archives are cached under `<cache>/images/<key>/` where the key is a hash of the
 * binaries' sha256, the layer's, the refs, the platform and the image's writer revision:
 * a second cluster with the same binaries rebuilds nothing.
 */
import { createHash } from 'node:crypto';
import { copyFile, link, mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../files.js';
import { sha256OfFile } from '../files.js';
import { writeImageArchive, writeImagesArchive, type UpperLayer, type ImageFile, type ImageSpec, type ImageSymlink, type WrittenImage } from './oci-image.js';

/** kubeadm's imageRepository for every node image. */
export const imageRepository = 'provisioner.local';

/** The images a node gets (see `nodeImageBinaries` for the bundled binaries each is built from). */
export const nodeImageNames = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy', 'etcd', 'pause', 'coredns', 'flannel'] as const;
/** Images built only for tests, never part of what nodes get by default. */
export const testImageNames = ['agnhost'] as const;
export type NodeImageName = (typeof nodeImageNames)[number] | (typeof testImageNames)[number];

/**
 * The CoreDNS version the bundle builds (embedded/modules/coredns/go.mod; a unit test
 * keeps them equal) and so the coredns image's tag. kubeadm v1.36.3 expects the same
 * (constants.CoreDNSVersion), so ClusterConfiguration `dns.imageTag` is only needed if
 * they ever differ.
 */
export const corednsImageTag = 'v1.14.2';
/** The CoreDNS tag kubeadm v1.36.3 names (cmd/kubeadm/app/constants CoreDNSVersion). */
export const kubeadmCorednsTag = 'v1.14.2';
/** `provisioner.local/coredns:v1.14.2`. */
export const corednsImageRef = `${imageRepository}/coredns:${corednsImageTag}`;
/** The flannel version the bundle builds (embedded/modules/flannel/go.mod) and the flannel image's tag. */
export const flannelImageTag = 'v0.28.10';
/** `provisioner.local/flannel:v0.28.10`: flanneld at /opt/bin/flanneld (Entrypoint), the CNI plugin at /flannel, the userland layer above them. */
export const flannelImageRef = `${imageRepository}/flannel:${flannelImageTag}`;

/** The name of the bundle's layer under kube-proxy and flannel (Debian's nft iptables, busybox). */
export const userlandLayerName = 'userland';

/** How an image is made from bundled binaries. */
interface ImageRecipe {
  /** Bundled binaries by name and where each goes; the first one's version tags the image. */
  files: readonly { binary: string; path: string }[];
  /** Entrypoint. Default: the first file's path. */
  entrypoint?: readonly string[];
  /** With the userland layer above the binaries. Default: false. */
  userland?: boolean;
  /** Symbolic links beside the files (a multi-call binary's names). Default: none. */
  symlinks?: readonly ImageSymlink[];
  /** The archive the image is written into with the others that name it (they share their layers). Default: its own, named as the image. */
  archive?: string;
  /** Bumped when the image's content or layout changes, so cached archives are rebuilt. */
  revision: string;
}

const atUsrLocalBin = (name: string) => ({ files: [{ binary: name, path: `/usr/local/bin/${name}` }], revision: '1' });

/** The archive of the four Kubernetes images (`kubernetes.tar`). */
export const kubernetesArchiveName = 'kubernetes';
const kubeImageNames = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy'] as const;
/**
 * A Kubernetes image: the multi-call `kube` at /usr/local/bin/kube and every component's name
 * linked to it, the same layer in all four; the Entrypoint is the image's own name (kubeadm's
 * static pods and DaemonSet also run it by that name), which kube dispatches on.
 */
const onKube = (name: (typeof kubeImageNames)[number], extra: Pick<ImageRecipe, 'userland'> = {}): ImageRecipe => ({
  files: [{ binary: 'kube', path: '/usr/local/bin/kube' }],
  symlinks: kubeImageNames.map((n) => ({ path: `/usr/local/bin/${n}`, target: 'kube' })),
  entrypoint: [`/usr/local/bin/${name}`],
  archive: kubernetesArchiveName,
  // 4: the userland layer above `kube` (kube-proxy), not below it.
  revision: '4',
  ...extra,
});

const imageRecipes: Record<NodeImageName, ImageRecipe> = {
  'kube-apiserver': onKube('kube-apiserver'),
  'kube-controller-manager': onKube('kube-controller-manager'),
  'kube-scheduler': onKube('kube-scheduler'),
  // kubeadm's DaemonSet runs /usr/local/bin/kube-proxy; iptables mode runs iptables(-save/-restore) from PATH (/usr/sbin).
  'kube-proxy': onKube('kube-proxy', { userland: true }),
  etcd: atUsrLocalBin('etcd'),
  pause: atUsrLocalBin('pause'),
  // kubeadm's Deployment passes only args (-conf /etc/coredns/Corefile): the Entrypoint is the binary, as upstream's image.
  coredns: { files: [{ binary: 'coredns', path: '/coredns' }], revision: '1' },
  // Upstream's layout: flanneld at /opt/bin/flanneld, the CNI plugin at /flannel (its DaemonSet's init container copies it to the host's /opt/cni/bin).
  flannel: { files: [{ binary: 'flanneld', path: '/opt/bin/flanneld' }, { binary: 'flannel', path: '/flannel' }], userland: true, revision: '2' },
  agnhost: { files: [{ binary: 'agnhost', path: '/agnhost' }], revision: '1' },
};

/** The bundled binaries an image is built from, e.g. `flannel` → flanneld and flannel (the CNI plugin). */
export function nodeImageBinaries(name: NodeImageName): string[] {
  return imageRecipes[name].files.map((f) => f.binary);
}

/** The archive an image is in: `kubernetes` for the four Kubernetes images, else the image's own name (`node/images/<archive>.tar`). */
export function nodeImageArchiveName(name: NodeImageName): string {
  return imageRecipes[name].archive ?? name;
}

/** Whether an image has the userland layer (kube-proxy, flannel). */
export function nodeImageNeedsUserland(name: NodeImageName): boolean {
  return imageRecipes[name].userland ?? false;
}

/** The binaries a host downloads and runs outside containers. */
export const nodeBinaryNames = ['kubelet', 'kubeadm'] as const;

/**
 * The pause tag the bundled kubeadm expects (k8s.io/kubernetes cmd/kubeadm/app/constants
 * PauseVersion, v1.36.3); the integration test compares it with `kubeadm config images list`.
 */
export const kubeadmPauseTag = '3.10.2';

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

/** A built (or cached) image and the archive it is in (`file`, `sha256`, `size` are the archive's, shared by the images of one archive). */
export interface NodeImageArchive extends WrittenImage {
  name: NodeImageName;
  /** The archive's name (`nodeImageArchiveName`). */
  archive: string;
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

/** A layer for the images that need one: an uncompressed tar (the bundle's, extracted into the cache; see embedded/cache.ts ensureLayer). */
export interface NodeLayer {
  /** The tar file. */
  path: string;
  /** sha256 (hex) of the tar. */
  sha256: string;
  /** What it holds, for the image history, e.g. `userland: iptables 1.8.9-2, busybox-static 1:1.35.0-4`. */
  description: string;
}

/**
 * Builds (or takes from the cache) the archive of every node image (`nodeImageNames`)
 * whose binaries are all in `binaries` (by binary name) and, for kube-proxy and flannel,
 * when `options.userland` is given; the others are left out.
 */
export async function ensureNodeImages(binaries: Partial<Record<string, NodeBinary>>, options: NodeImagesOptions & { userland?: NodeLayer }): Promise<NodeImageArchive[]> {
  const groups = new Map<string, { name: NodeImageName; binaries: NodeBinary[] }[]>();
  for (const name of nodeImageNames) {
    const files = nodeImageBinaries(name).map((b) => binaries[b]);
    if (files.some((f) => f === undefined) || (nodeImageNeedsUserland(name) && !options.userland)) continue;
    const archive = nodeImageArchiveName(name);
    groups.set(archive, [...(groups.get(archive) ?? []), { name, binaries: files as NodeBinary[] }]);
  }
  const result: NodeImageArchive[] = [];
  for (const [archive, members] of groups) {
    if (members.length === 1 && imageRecipes[members[0]!.name].archive === undefined) result.push(await ensureImage(members[0]!.name, members[0]!.binaries, options.userland, options));
    else result.push(...(await ensureArchive(archive, members, options.userland, options)));
  }
  const order = (i: NodeImageArchive) => nodeImageNames.indexOf(i.name as (typeof nodeImageNames)[number]);
  return result.sort((a, b) => order(a) - order(b));
}

/** The agnhost test image (`provisioner.local/agnhost:<version>`, /agnhost as Entrypoint), for tests of Services and DNS; not a node image. */
export function ensureAgnhostImage(agnhost: NodeBinary, options: NodeImagesOptions): Promise<NodeImageArchive> {
  return ensureImage('agnhost', [agnhost], undefined, options);
}

interface CacheRecord extends Omit<WrittenImage, 'file'> {
  file: string;
}

/**
 * One single-binary image archive (every node image but kube-proxy and flannel, which
 * need the userland layer: `ensureNodeImages`), from the cache or written now.
 */
export function ensureNodeImage(name: NodeImageName, binary: NodeBinary, options: NodeImagesOptions): Promise<NodeImageArchive> {
  if (imageRecipes[name].files.length !== 1 || nodeImageNeedsUserland(name) || imageRecipes[name].archive !== undefined) throw new Error(`image ${name} is not built from one binary alone; use ensureNodeImages`);
  return ensureImage(name, [binary], undefined, options);
}

/**
 * What an image is made of, whether written alone or in an archive of several: its recipe, refs, files (following
 * `binaries`), their sha256s, and the layers above them (the userland layer for the images that have it).
 */
async function imageInputsOf(name: NodeImageName, binaries: readonly NodeBinary[], userland: NodeLayer | undefined) {
  const recipe = imageRecipes[name];
  if (recipe.userland && !userland) throw new Error(`image ${name} needs the ${userlandLayerName} layer`);
  const refs = nodeImageRefs(name, binaries[0]!.version);
  const files: ImageFile[] = recipe.files.map((f, i) => ({ sourcePath: binaries[i]!.path, path: f.path }));
  const sha256s: string[] = [];
  for (const b of binaries) sha256s.push(b.sha256 ?? (await sha256OfFile(b.path)));
  const upperLayers: UpperLayer[] = recipe.userland && userland ? [{ tarPath: userland.path, sha256: userland.sha256, description: userland.description }] : [];
  return { recipe, refs, files, sha256s, upperLayers };
}

/** One image archive, from the cache when its record and file agree, else written now. `binaries` follow the recipe's files. */
async function ensureImage(name: NodeImageName, binaries: readonly NodeBinary[], userland: NodeLayer | undefined, options: NodeImagesOptions): Promise<NodeImageArchive> {
  const { recipe, refs, files, sha256s, upperLayers } = await imageInputsOf(name, binaries, userland);
  const ref = nodeImageRef(name, binaries[0]!.version);
  // A single binary at /usr/local/bin without layers keeps the key it always had, so its cached archives stay valid.
  const plain = recipe.files.length === 1 && recipe.files[0]!.path === `/usr/local/bin/${name}` && upperLayers.length === 0 && recipe.entrypoint === undefined;
  const keyInput = plain
    ? { writerRevision: recipe.revision, binarySha256: sha256s[0], name, refs, os: 'linux', architecture: options.architecture }
    : { writerRevision: recipe.revision, files: files.map((f, i) => ({ path: f.path, sha256: sha256s[i] })), layers: upperLayers.map((l) => [l.sha256, l.description]), entrypoint: recipe.entrypoint, name, refs, os: 'linux', architecture: options.architecture };
  const key = createHash('sha256').update(JSON.stringify(keyInput)).digest('hex');
  const dir = path.join(options.cacheDir, 'images', key);
  const recordFile = path.join(dir, 'record.json');
  const file = path.join(dir, `${name}.tar`);
  const record = await readRecord(recordFile);
  if (record && (await stat(file).then((s) => s.size === record.size, () => false))) {
    return { ...record, file, name, archive: name, ref, cached: true };
  }
  await mkdir(dir, { recursive: true });
  const spec: ImageSpec = { name, files, ...(recipe.entrypoint ? { entrypoint: recipe.entrypoint } : {}), upperLayers, refs, os: 'linux', architecture: options.architecture };
  const written = await writeImageArchive(spec, file);
  await writeFileAtomic(recordFile, JSON.stringify({ ...written, file: path.basename(file) } satisfies CacheRecord, null, 2));
  return { ...written, name, archive: name, ref, cached: false };
}

/** What an image of an archive of several is made of: its spec and its part of the cache key. */
async function imageSpecOf(name: NodeImageName, binaries: readonly NodeBinary[], userland: NodeLayer | undefined, options: NodeImagesOptions): Promise<{ spec: ImageSpec; key: unknown }> {
  const { recipe, refs, files, sha256s, upperLayers } = await imageInputsOf(name, binaries, userland);
  const spec: ImageSpec = { name, files, symlinks: recipe.symlinks ?? [], ...(recipe.entrypoint ? { entrypoint: recipe.entrypoint } : {}), upperLayers, refs, os: 'linux', architecture: options.architecture };
  const key = { writerRevision: recipe.revision, files: files.map((f, i) => ({ path: f.path, sha256: sha256s[i] })), symlinks: spec.symlinks, layers: upperLayers.map((l) => [l.sha256, l.description]), entrypoint: recipe.entrypoint, name, refs, os: 'linux', architecture: options.architecture };
  return { spec, key };
}

interface ArchiveCacheRecord {
  file: string;
  sha256: string;
  size: number;
  images: { name: string; manifestDigest: string; refs: string[] }[];
}

/** An archive of several images (`kubernetes.tar`), from the cache when its record and file agree, else written now. */
async function ensureArchive(archive: string, members: readonly { name: NodeImageName; binaries: readonly NodeBinary[] }[], userland: NodeLayer | undefined, options: NodeImagesOptions): Promise<NodeImageArchive[]> {
  const specs = await Promise.all(members.map((m) => imageSpecOf(m.name, m.binaries, userland, options)));
  const key = createHash('sha256').update(JSON.stringify({ archive, images: specs.map((s) => s.key) })).digest('hex');
  const dir = path.join(options.cacheDir, 'images', key);
  const recordFile = path.join(dir, 'record.json');
  const file = path.join(dir, `${archive}.tar`);
  let record = await readArchiveRecord(recordFile);
  let cached = true;
  if (!record || record.images.length !== members.length || !(await stat(file).then((s) => s.size === record!.size, () => false))) {
    await mkdir(dir, { recursive: true });
    const written = await writeImagesArchive(specs.map((s) => s.spec), file);
    record = { file: path.basename(file), sha256: written.sha256, size: written.size, images: written.images.map((i) => ({ name: i.name, manifestDigest: i.manifestDigest, refs: [...i.refs] })) };
    await writeFileAtomic(recordFile, JSON.stringify(record satisfies ArchiveCacheRecord, null, 2));
    cached = false;
  }
  return members.map((m, i) => {
    const image = record.images[i]!;
    return { file, sha256: record.sha256, size: record.size, manifestDigest: image.manifestDigest, refs: image.refs, name: m.name, archive, ref: image.refs[0]!, cached };
  });
}

async function readArchiveRecord(file: string): Promise<ArchiveCacheRecord | undefined> {
  try {
    const record = JSON.parse(await readFile(file, 'utf8')) as Partial<ArchiveCacheRecord>;
    if (typeof record.sha256 !== 'string' || typeof record.size !== 'number' || !Array.isArray(record.images)) return undefined;
    if (!record.images.every((i) => typeof i.manifestDigest === 'string' && Array.isArray(i.refs) && i.refs.length > 0)) return undefined;
    return record as ArchiveCacheRecord;
  } catch {
    return undefined; // absent or cut short: rebuild
  }
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
  /** For an archive of one image: the main ref it imports as (none for an archive of several). */
  ref?: string;
  /** For images: every ref the archive imports as, of all its images. */
  refs?: readonly string[];
}

/**
 * Fills `<artifactsDir>/node/bin/<binary>` and `<artifactsDir>/node/images/<archive>.tar` (one per archive however many images it holds)
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
  const archives = new Map<string, NodeImageArchive[]>();
  for (const image of images) archives.set(image.archive, [...(archives.get(image.archive) ?? []), image]);
  for (const [archive, inIt] of archives) {
    const rel = `node/images/${archive}.tar`;
    const first = inIt[0]!;
    await placeArtifact(first.file, path.join(artifactsDir, rel));
    artifacts.push({ path: rel, sha256: first.sha256, size: first.size, ...(inIt.length === 1 ? { ref: first.ref } : {}), refs: inIt.flatMap((i) => i.refs) });
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
