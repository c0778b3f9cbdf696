/**
 * Writes a container image as an OCI image layout in a tar archive, the
 * input of `ctr -n k8s.io images import` (containerd 1.6 and later) — no registry, no
 * Docker. The archive holds:
 *
 *   oci-layout                       {"imageLayoutVersion":"1.0.0"}
 *   index.json                       one manifest per ref, annotated with
 *                                    org.opencontainers.image.ref.name (the tag) and
 *                                    io.containerd.image.name (the full ref containerd names the image by)
 *   manifest.json                    the docker-save form of the same image (Config, RepoTags, Layers),
 *                                    for importers that read that instead
 *   blobs/sha256/<digest>            config, manifest and the gzip layers
 *
 * The first (lowest) layer holds the binaries: by default one, `/usr/local/bin/<name>`, else the
 * `files` at their paths, each 0755 under its parent directories (0755), every entry
 * owned by 0:0 with mtime 0. Above it come the `upperLayers`, uncompressed tars given
 * whole (the userland layer), gzipped the same way. The binaries go lowest because
 * containerd unpacks a layer once per chain of layers below it: images over the same
 * binary layer (the four Kubernetes images over the 149 MB `kube`) then share its
 * snapshot, where a small layer under one of them made a host unpack `kube` twice.
 * The config's Entrypoint is the first file's path unless given and Env sets PATH. Nothing depends on the clock, the user, the file system or the machine, so the
 * same binary and spec give the same archive, byte for byte (and the same digests):
 * the gzip header's OS byte is fixed too (zlib writes 3 on Linux and 19 on macOS).
 * Output depends on Node's bundled zlib, so two Node versions may compress differently;
 * the image's identity that containerd checks (diff_id, the uncompressed tar) does not.
 *
 * Everything is streamed: the binary is never held in memory.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

/** A file of an image's binary layer. */
export interface ImageFile {
  /** File to ship, e.g. a cache path of flanneld. */
  sourcePath: string;
  /** Absolute path inside the image, e.g. `/opt/bin/flanneld`; mode 0755. */
  path: string;
}

/** A symbolic link of an image's binary layer. */
export interface ImageSymlink {
  /** Absolute path inside the image, e.g. `/bin/sh`. */
  path: string;
  /** What it points at, e.g. `busybox`. */
  target: string;
}

/** A layer given as an uncompressed tar, put above the binary layer as it is. */
export interface UpperLayer {
  /** The tar file. */
  tarPath: string;
  /** sha256 (hex) the tar must have (its diff_id); checked while it is read. */
  sha256: string;
  /** What the image history says the layer is, e.g. `userland: iptables 1.8.9-2, busybox-static ...`. */
  description: string;
}

/** The image to write. */
export interface ImageSpec {
  /** Name of the image, e.g. `kube-proxy`; with `binaryPath`, the file is /usr/local/bin/<name>. */
  name: string;
  /** The one binary of a single-binary image. Either this or `files`. */
  binaryPath?: string;
  /** The binary layer's files, in the order the history lists them. Default: `binaryPath` at /usr/local/bin/<name>. */
  files?: readonly ImageFile[];
  /** The config's Entrypoint. Default: the first file's path; empty: none (the image runs its `cmd`, or what a pod names). */
  entrypoint?: readonly string[];
  /** The config's Cmd. Default: none. */
  cmd?: readonly string[];
  /** Symbolic links of the binary layer (a multi-call binary's names, e.g. busybox's applets). Default: none. */
  symlinks?: readonly ImageSymlink[];
  /** Layers above the binary layer, lowest first. Default: none. */
  upperLayers?: readonly UpperLayer[];
  /** Full image references, e.g. `provisioner.local/kube-apiserver:v1.36.3`; at least one. */
  refs: readonly string[];
  /** OCI platform of the binary (Go's names). */
  os: 'linux';
  architecture: 'amd64' | 'arm64';
}

/** What was written. */
export interface WrittenImage {
  /** Archive file. */
  file: string;
  /** sha256 (hex) of the archive file. */
  sha256: string;
  size: number;
  /** `sha256:<hex>` of the image manifest: containerd's image digest after import. */
  manifestDigest: string;
  refs: readonly string[];
}

/** The PATH of every image: the binary's directory first. */
const imagePath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const blockSize = 512;
/** The gzip header's OS byte ("unknown"): the same on every machine. */
const gzipOsUnknown = 255;

/**
 * Writes the image archive for `spec` to `file` (atomically: a temp file beside it is
 * renamed at the end). The directory of `file` must exist.
 */
export async function writeImageArchive(spec: ImageSpec, file: string): Promise<WrittenImage> {
  const written = await writeImagesArchive([spec], file);
  return { file, sha256: written.sha256, size: written.size, manifestDigest: written.images[0]!.manifestDigest, refs: spec.refs };
}

/** What `writeImagesArchive` wrote: the archive and each image's manifest digest. */
export interface WrittenArchive {
  file: string;
  /** sha256 (hex) of the archive file. */
  sha256: string;
  size: number;
  /** In the order of the specs. */
  images: readonly { name: string; manifestDigest: string; refs: readonly string[] }[];
}

/**
 * Writes several images into one archive (one OCI layout: an index entry per ref of each,
 * one docker-save entry per image). A blob is stored once however many images name it, and
 * a layer made of the same files, links or base tar is written once: images that share a
 * layer (the Kubernetes images over `kube`) cost its bytes once. One spec gives exactly the
 * bytes `writeImageArchive` writes.
 */
export async function writeImagesArchive(specs: readonly ImageSpec[], file: string): Promise<WrittenArchive> {
  if (specs.length === 0) throw new Error(`image archive ${file}: no image to put in it`);
  const temp = `${file}.${process.pid}.partial`;
  const layerFiles = new Map<string, { file: string; layer: Promise<WrittenLayer> }>();
  /** A layer by what it is made of: written at the first image that names it, shared after. */
  const layerOf = (name: string, key: string, tar: () => AsyncIterable<Buffer>): Promise<WrittenLayer> => {
    let entry = layerFiles.get(key);
    if (!entry) {
      const layerFile = `${file}.${process.pid}.layer${layerFiles.size}.partial`;
      entry = { file: layerFile, layer: writeLayer(name, tar(), layerFile) };
      layerFiles.set(key, entry);
    }
    return entry.layer;
  };
  try {
    const images: { spec: ImageSpec; config: Buffer; configDigest: string; manifest: Buffer; manifestDigest: string; layers: WrittenLayer[] }[] = [];
    for (const spec of specs) {
      if (spec.refs.length === 0) throw new Error(`image ${spec.name}: no reference to name it by`);
      const files = spec.files ?? (spec.binaryPath === undefined ? [] : [{ sourcePath: spec.binaryPath, path: `/usr/local/bin/${spec.name}` }]);
      if (files.length === 0) throw new Error(`image ${spec.name}: no file to put in it`);
      const sized: SizedFile[] = [];
      for (const f of files) {
        if (!f.path.startsWith('/') || f.path.endsWith('/')) throw new Error(`image ${spec.name}: ${f.path} is not an absolute file path`);
        const info = await stat(f.sourcePath);
        if (!info.isFile()) throw new Error(`image ${spec.name}: ${f.sourcePath} is not a regular file`);
        sized.push({ ...f, size: info.size });
      }
      const upperLayers = spec.upperLayers ?? [];
      const symlinks = spec.symlinks ?? [];
      const binaryKey = JSON.stringify(['binary', sized.map((f) => [f.sourcePath, f.path, f.size]), symlinks.map((l) => [l.path, l.target])]);
      const layers: WrittenLayer[] = [await layerOf(spec.name, binaryKey, () => binaryLayerTar(spec.name, sized, symlinks))];
      for (const upper of upperLayers) {
        const layer = await layerOf(spec.name, JSON.stringify(['tar', upper.tarPath, upper.sha256]), () => givenLayerTar(spec.name, upper));
        if (layer.diffId !== upper.sha256) throw new Error(`image ${spec.name}: ${upper.tarPath} has sha256 ${layer.diffId}, expected ${upper.sha256}`);
        layers.push(layer);
      }
      const config = json({
        architecture: spec.architecture,
        os: spec.os,
        config: imageConfig(spec, sized[0]!.path),
        rootfs: { type: 'layers', diff_ids: layers.map((l) => `sha256:${l.diffId}`) },
        // No `created` and no history timestamps: they would make every build differ.
        history: [
          { created_by: `provisioner: ${sized.map((f) => f.path).join(' ')}${symlinks.length ? ` and ${symlinks.length} links to them` : ''}` },
          ...upperLayers.map((u) => ({ created_by: `provisioner: ${u.description}` })),
        ],
      });
      const configDigest = sha256(config);
      const manifest = json({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${configDigest}`, size: config.length },
        layers: layers.map((l) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${l.digest}`, size: l.size })),
      });
      images.push({ spec, config, configDigest, manifest, manifestDigest: sha256(manifest), layers });
    }
    const index = json({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: images.flatMap(({ spec, manifest, manifestDigest }) =>
        spec.refs.map((ref) => ({
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          digest: `sha256:${manifestDigest}`,
          size: manifest.length,
          platform: { architecture: spec.architecture, os: spec.os },
          annotations: { 'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': tagOf(ref) },
        })),
      ),
    });
    const dockerManifest = json(images.map(({ spec, configDigest, layers }) => ({ Config: `blobs/sha256/${configDigest}`, RepoTags: [...spec.refs], Layers: layers.map((l) => `blobs/sha256/${l.digest}`) })));
    const layerFileOf = new Map<string, string>();
    for (const { file: layerFile, layer } of layerFiles.values()) layerFileOf.set((await layer).digest, layerFile);

    const out = createWriteStream(temp, { mode: 0o644 });
    const hash = createHash('sha256');
    let size = 0;
    const entries = async function* (): AsyncGenerator<Buffer> {
      for (const dir of ['blobs/', 'blobs/sha256/']) yield tarHeader(dir, 0, 'directory');
      yield* memberOf('oci-layout', json({ imageLayoutVersion: '1.0.0' }));
      yield* memberOf('index.json', index);
      yield* memberOf('manifest.json', dockerManifest);
      // A blob named by two images (or a layer by two entries) is stored once.
      const stored = new Set<string>();
      for (const image of images) {
        for (const [digest, content] of [[image.configDigest, image.config], [image.manifestDigest, image.manifest]] as const) {
          if (stored.has(digest)) continue;
          stored.add(digest);
          yield* memberOf(`blobs/sha256/${digest}`, content);
        }
      }
      for (const image of images) {
        for (const layer of image.layers) {
          if (stored.has(layer.digest)) continue;
          stored.add(layer.digest);
          yield tarHeader(`blobs/sha256/${layer.digest}`, layer.size, 'file');
          for await (const chunk of createReadStream(layerFileOf.get(layer.digest)!)) yield chunk as Buffer;
          yield padding(layer.size);
        }
      }
      yield tarEndOfArchive();
    };
    await pipeline(Readable.from(entries()), tap(hash, (n) => (size += n)), out);
    await rename(temp, file);
    return { file, sha256: hash.digest('hex'), size, images: images.map((i) => ({ name: i.spec.name, manifestDigest: `sha256:${i.manifestDigest}`, refs: i.spec.refs })) };
  } finally {
    await rm(temp, { force: true });
    for (const { file: layerFile, layer } of layerFiles.values()) {
      await layer.catch(() => undefined);
      await rm(layerFile, { force: true });
    }
  }
}

/** The tag of a reference (`host/name:tag` → `tag`), `latest` when it has none. */
export function tagOf(ref: string): string {
  const lastSlash = ref.lastIndexOf('/');
  const colon = ref.indexOf(':', lastSlash + 1);
  return colon === -1 ? 'latest' : ref.slice(colon + 1);
}

/** The config's `config`: Entrypoint (unless none), Cmd (when given) and PATH, in the key order earlier images were written with. */
function imageConfig(spec: ImageSpec, firstFile: string): { Entrypoint?: string[]; Cmd?: string[]; Env: string[] } {
  const entrypoint = [...(spec.entrypoint ?? [firstFile])];
  return { ...(entrypoint.length > 0 ? { Entrypoint: entrypoint } : {}), ...(spec.cmd ? { Cmd: [...spec.cmd] } : {}), Env: [`PATH=${imagePath}`] };
}

interface SizedFile extends ImageFile {
  size: number;
}

interface WrittenLayer {
  /** sha256 (hex) of the gzip stream. */
  digest: string;
  /** sha256 (hex) of the uncompressed tar. */
  diffId: string;
  size: number;
}

/**
 * The binary layer: every parent directory (0755), file (0755) and symlink (0777), sorted by path. For
 * one file at /usr/local/bin/<name> these are the bytes the single-binary writer always wrote.
 */
async function* binaryLayerTar(image: string, files: readonly SizedFile[], symlinks: readonly ImageSymlink[]): AsyncGenerator<Buffer> {
  const members = new Map<string, SizedFile | ImageSymlink | undefined>();
  for (const f of [...files, ...symlinks]) {
    if (!f.path.startsWith('/') || f.path.endsWith('/')) throw new Error(`image ${image}: ${f.path} is not an absolute file path`);
    const relative = f.path.slice(1);
    for (let dir = path.posix.dirname(relative); dir !== '.'; dir = path.posix.dirname(dir)) members.set(`${dir}/`, undefined);
    if (members.has(relative)) throw new Error(`image ${image}: ${f.path} given twice`);
    members.set(relative, f);
  }
  for (const name of [...members.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const f = members.get(name);
    if (!f) {
      yield tarEntryHeader({ path: name, type: 'directory', mode: 0o755, size: 0 });
      continue;
    }
    if ('target' in f) {
      yield tarEntryHeader({ path: name, type: 'symlink', mode: 0o777, size: 0, linkname: f.target });
      continue;
    }
    yield tarEntryHeader({ path: name, type: 'file', mode: 0o755, size: f.size });
    let read = 0;
    for await (const chunk of createReadStream(f.sourcePath)) {
      read += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
    if (read !== f.size) throw new Error(`image ${image}: ${f.sourcePath} changed while it was read`);
    yield padding(f.size);
  }
  yield tarEndOfArchive();
}

/** A given layer's tar as it is. */
async function* givenLayerTar(image: string, layer: UpperLayer): AsyncGenerator<Buffer> {
  const info = await stat(layer.tarPath).catch(() => undefined);
  if (!info?.isFile()) throw new Error(`image ${image}: layer ${layer.tarPath} is not a regular file`);
  for await (const chunk of createReadStream(layer.tarPath)) yield chunk as Buffer;
}

/** Writes a gzip layer of `tar` to `file`; returns the digests of the compressed (digest) and uncompressed (diffId) tar. */
async function writeLayer(image: string, tar: AsyncIterable<Buffer>, file: string): Promise<WrittenLayer> {
  const diffId = createHash('sha256');
  const digest = createHash('sha256');
  let size = 0;
  let headerFixed = false;
  const fixOsByte = new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      if (!headerFixed && chunk.length > 9) {
        chunk = Buffer.from(chunk);
        chunk[9] = gzipOsUnknown;
        headerFixed = true;
      }
      callback(null, chunk);
    },
  });
  await pipeline(
    Readable.from(tar),
    tap(diffId),
    createGzip({ level: 6 }),
    fixOsByte,
    tap(digest, (n) => (size += n)),
    createWriteStream(file, { mode: 0o644 }),
  );
  if (!headerFixed) throw new Error(`image ${image}: the gzip stream had no header`);
  return { digest: digest.digest('hex'), diffId: diffId.digest('hex'), size };
}

/** A pass-through stream that hashes (and counts) what flows through it. */
function tap(hash: Hash, count?: (bytes: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      hash.update(chunk);
      count?.(chunk.length);
      callback(null, chunk);
    },
  });
}

function* memberOf(name: string, content: Buffer): Generator<Buffer> {
  yield tarHeader(name, content.length, 'file');
  yield content;
  yield padding(content.length);
}

/**
 * A ustar header of the archive's own members: mode 0755 for directories and 0644 for
 * files except executables under bin/ (0755).
 */
function tarHeader(name: string, size: number, type: 'file' | 'directory'): Buffer {
  const mode = type === 'directory' || /(^|\/)bin\/[^/]+$/.test(name) ? 0o755 : 0o644;
  return tarEntryHeader({ path: name, type, mode, size });
}

/** A member of a tar written here. */
export interface TarEntry {
  /** Path without a leading slash; a directory's ends in `/`. */
  path: string;
  type: 'file' | 'directory' | 'symlink';
  /** Permission bits, e.g. 0o755. */
  mode: number;
  /** Content size: 0 for directories and symlinks. */
  size: number;
  /** A symlink's target. */
  linkname?: string;
}

/**
 * A ustar header: owner 0:0 without names, mtime 0. Names and link targets are short
 * (< 100 bytes), so no prefix field or pax records are needed.
 */
export function tarEntryHeader(entry: TarEntry): Buffer {
  const name = entry.path;
  if (Buffer.byteLength(name) >= 100) throw new Error(`tar member name too long: ${name}`);
  if (entry.linkname !== undefined && Buffer.byteLength(entry.linkname) >= 100) throw new Error(`tar link target too long: ${entry.linkname}`);
  const { type, size } = entry;
  const header = Buffer.alloc(blockSize);
  header.write(name, 0, 100, 'utf8');
  writeOctal(header, 100, 8, entry.mode);
  writeOctal(header, 108, 8, 0); // uid
  writeOctal(header, 116, 8, 0); // gid
  writeOctal(header, 124, 12, size);
  writeOctal(header, 136, 12, 0); // mtime
  header.fill(0x20, 148, 156); // checksum is computed with its own field as spaces
  header.write({ file: '0', symlink: '2', directory: '5' }[type], 156, 1, 'ascii');
  if (type === 'symlink') header.write(entry.linkname ?? '', 157, 100, 'utf8');
  header.write('ustar\u000000', 257, 8, 'ascii'); // magic "ustar\0" and version "00"
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\u0000 `, 148, 8, 'ascii');
  return header;
}

function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  const text = value.toString(8).padStart(length - 1, '0');
  if (text.length > length - 1) throw new Error(`tar field overflow: ${value}`);
  header.write(`${text}\u0000`, offset, length, 'ascii');
}

function padding(size: number): Buffer {
  return Buffer.alloc((blockSize - (size % blockSize)) % blockSize);
}

/** The zeros after a member of `size` bytes, up to the next 512-byte block. */
export const tarPadding = padding;

/** Two zero blocks: the end of a tar. */
export function tarEndOfArchive(): Buffer {
  return Buffer.alloc(2 * blockSize);
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Where a member of an archive lies: its content's first byte and its size. */
export interface ArchiveMember {
  offset: number;
  size: number;
}

/** Every member of an (uncompressed, ustar) archive written here, by normalized name, with where its content lies. */
export async function archiveMembers(archive: string): Promise<Map<string, ArchiveMember>> {
  const handle = await open(archive, 'r');
  const members = new Map<string, ArchiveMember>();
  try {
    const header = Buffer.alloc(blockSize);
    let offset = 0;
    for (;;) {
      const { bytesRead } = await handle.read(header, 0, blockSize, offset);
      if (bytesRead < blockSize || header.every((b) => b === 0)) return members;
      const name = header.toString('utf8', 0, 100).replace(/\0.*$/s, '');
      const size = parseInt(header.toString('ascii', 124, 136).replace(/\0.*$/s, '').trim() || '0', 8);
      members.set(path.posix.normalize(name), { offset: offset + blockSize, size });
      offset += blockSize + size + ((blockSize - (size % blockSize)) % blockSize);
    }
  } finally {
    await handle.close();
  }
}

/** Reads one member of an (uncompressed, ustar) archive written here; for tests and checks. */
export async function readArchiveMember(archive: string, member: string): Promise<Buffer | undefined> {
  const found = (await archiveMembers(archive)).get(path.posix.normalize(member));
  return found ? readMemberAt(archive, found) : undefined;
}

/** The content of a member `archiveMembers` found. */
export async function readMemberAt(archive: string, member: ArchiveMember): Promise<Buffer> {
  const handle = await open(archive, 'r');
  try {
    const content = Buffer.alloc(member.size);
    await handle.read(content, 0, member.size, member.offset);
    return content;
  } finally {
    await handle.close();
  }
}
