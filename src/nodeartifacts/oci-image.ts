/**
 * Writes a single-binary container image as an OCI image layout in a tar archive, the
 * input of `ctr -n k8s.io images import` (containerd 1.6 and later) — no registry, no
 * Docker. The archive holds:
 *
 *   oci-layout                       {"imageLayoutVersion":"1.0.0"}
 *   index.json                       one manifest per ref, annotated with
 *                                    org.opencontainers.image.ref.name (the tag) and
 *                                    io.containerd.image.name (the full ref containerd names the image by)
 *   manifest.json                    the docker-save form of the same image (Config, RepoTags, Layers),
 *                                    for importers that read that instead
 *   blobs/sha256/<digest>            config, manifest and one gzip layer
 *
 * The layer is `/usr/local/bin/<name>` (0755) under its parent directories (0755), every
 * entry owned by 0:0 with mtime 0; the config's Entrypoint is that path and Env sets
 * PATH. Nothing depends on the clock, the user, the file system or the machine, so the
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

/** The image to write. */
export interface ImageSpec {
  /** Binary to ship, e.g. a cache path of kube-apiserver. */
  binaryPath: string;
  /** Name inside the image: the file is /usr/local/bin/<name>. */
  name: string;
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
  if (spec.refs.length === 0) throw new Error(`image ${spec.name}: no reference to name it by`);
  const binary = await stat(spec.binaryPath);
  if (!binary.isFile()) throw new Error(`image ${spec.name}: ${spec.binaryPath} is not a regular file`);

  const temp = `${file}.${process.pid}.partial`;
  const layerTemp = `${file}.${process.pid}.layer.partial`;
  try {
    const layer = await writeLayer(spec, binary.size, layerTemp);
    const config = json({
      architecture: spec.architecture,
      os: spec.os,
      config: { Entrypoint: [`/usr/local/bin/${spec.name}`], Env: [`PATH=${imagePath}`] },
      rootfs: { type: 'layers', diff_ids: [`sha256:${layer.diffId}`] },
      // No `created` and no history timestamps: they would make every build differ.
      history: [{ created_by: `provisioner: /usr/local/bin/${spec.name}` }],
    });
    const configDigest = sha256(config);
    const manifest = json({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${configDigest}`, size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${layer.digest}`, size: layer.size }],
    });
    const manifestDigest = sha256(manifest);
    const index = json({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: spec.refs.map((ref) => ({
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        digest: `sha256:${manifestDigest}`,
        size: manifest.length,
        platform: { architecture: spec.architecture, os: spec.os },
        annotations: { 'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': tagOf(ref) },
      })),
    });
    const dockerManifest = json([{ Config: `blobs/sha256/${configDigest}`, RepoTags: [...spec.refs], Layers: [`blobs/sha256/${layer.digest}`] }]);

    const out = createWriteStream(temp, { mode: 0o644 });
    const hash = createHash('sha256');
    let size = 0;
    const entries = async function* (): AsyncGenerator<Buffer> {
      for (const dir of ['blobs/', 'blobs/sha256/']) yield tarHeader(dir, 0, 'directory');
      yield* memberOf('oci-layout', json({ imageLayoutVersion: '1.0.0' }));
      yield* memberOf('index.json', index);
      yield* memberOf('manifest.json', dockerManifest);
      yield* memberOf(`blobs/sha256/${configDigest}`, config);
      yield* memberOf(`blobs/sha256/${manifestDigest}`, manifest);
      yield tarHeader(`blobs/sha256/${layer.digest}`, layer.size, 'file');
      for await (const chunk of createReadStream(layerTemp)) yield chunk as Buffer;
      yield padding(layer.size);
      yield Buffer.alloc(2 * blockSize); // end of archive
    };
    await pipeline(Readable.from(entries()), tap(hash, (n) => (size += n)), out);
    await rename(temp, file);
    return { file, sha256: hash.digest('hex'), size, manifestDigest: `sha256:${manifestDigest}`, refs: spec.refs };
  } finally {
    await rm(temp, { force: true });
    await rm(layerTemp, { force: true });
  }
}

/** The tag of a reference (`host/name:tag` → `tag`), `latest` when it has none. */
export function tagOf(ref: string): string {
  const lastSlash = ref.lastIndexOf('/');
  const colon = ref.indexOf(':', lastSlash + 1);
  return colon === -1 ? 'latest' : ref.slice(colon + 1);
}

/** Writes the gzip layer to `file`; returns the digests of the compressed (digest) and uncompressed (diffId) tar. */
async function writeLayer(spec: ImageSpec, binarySize: number, file: string): Promise<{ digest: string; diffId: string; size: number }> {
  const diffId = createHash('sha256');
  const digest = createHash('sha256');
  let size = 0;
  const tar = async function* (): AsyncGenerator<Buffer> {
    for (const dir of ['usr/', 'usr/local/', 'usr/local/bin/']) yield tarHeader(dir, 0, 'directory');
    yield tarHeader(`usr/local/bin/${spec.name}`, binarySize, 'file');
    let read = 0;
    for await (const chunk of createReadStream(spec.binaryPath)) {
      read += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
    if (read !== binarySize) throw new Error(`image ${spec.name}: ${spec.binaryPath} changed while it was read`);
    yield padding(binarySize);
    yield Buffer.alloc(2 * blockSize);
  };
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
    Readable.from(tar()),
    tap(diffId),
    createGzip({ level: 6 }),
    fixOsByte,
    tap(digest, (n) => (size += n)),
    createWriteStream(file, { mode: 0o644 }),
  );
  if (!headerFixed) throw new Error(`image ${spec.name}: the gzip stream had no header`);
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
 * A ustar header: mode 0755 for directories and 0644 for files except executables under
 * bin/ (0755), owner 0:0 without names, mtime 0. Names are short (< 100 bytes), so no
 * prefix field or pax records are needed.
 */
function tarHeader(name: string, size: number, type: 'file' | 'directory'): Buffer {
  if (Buffer.byteLength(name) >= 100) throw new Error(`tar member name too long: ${name}`);
  const header = Buffer.alloc(blockSize);
  const mode = type === 'directory' || /(^|\/)bin\/[^/]+$/.test(name) ? 0o755 : 0o644;
  header.write(name, 0, 100, 'utf8');
  writeOctal(header, 100, 8, mode);
  writeOctal(header, 108, 8, 0); // uid
  writeOctal(header, 116, 8, 0); // gid
  writeOctal(header, 124, 12, size);
  writeOctal(header, 136, 12, 0); // mtime
  header.fill(0x20, 148, 156); // checksum is computed with its own field as spaces
  header.write(type === 'directory' ? '5' : '0', 156, 1, 'ascii');
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

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The sha256 (hex) of a file, streamed. */
export async function sha256OfFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

/** Reads one member of an (uncompressed, ustar) archive written here; for tests and checks. */
export async function readArchiveMember(archive: string, member: string): Promise<Buffer | undefined> {
  const handle = await open(archive, 'r');
  try {
    const header = Buffer.alloc(blockSize);
    let offset = 0;
    for (;;) {
      const { bytesRead } = await handle.read(header, 0, blockSize, offset);
      if (bytesRead < blockSize || header.every((b) => b === 0)) return undefined;
      const name = header.toString('utf8', 0, 100).replace(/\0.*$/s, '');
      const size = parseInt(header.toString('ascii', 124, 136).replace(/\0.*$/s, '').trim() || '0', 8);
      if (path.posix.normalize(name) === path.posix.normalize(member)) {
        const content = Buffer.alloc(size);
        await handle.read(content, 0, size, offset + blockSize);
        return content;
      }
      offset += blockSize + size + ((blockSize - (size % blockSize)) % blockSize);
    }
  } finally {
    await handle.close();
  }
}
