/**
 * PEM files on disk: atomic writes (temp file in the same directory, fsync, rename) with
 * explicit modes — private keys 0600, certificates and public keys 0644 — and loading back.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { CertificateAndKey } from './certificates.js';

/** Mode of private key files and kubeconfigs: owner read/write only. */
export const privateFileMode = 0o600;
/** Mode of certificates and public keys. */
export const publicFileMode = 0o644;
/** Mode of directories that hold private keys. */
export const privateDirMode = 0o700;

/**
 * Writes `data` to `path` so that a reader sees the old content or the new, never a part:
 * a temp file beside it is written, chmod-ed to `mode` (explicitly, so umask cannot widen
 * or narrow it), fsync-ed, then renamed over `path`.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode: number): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', mode);
  try {
    await handle.chmod(mode);
    await handle.writeFile(data);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

/** Paths of a certificate and its private key. */
export interface CertKeyFiles {
  certFile: string;
  keyFile: string;
}

/** The file names `writeKeyPair(dir, base, …)` uses: `<dir>/<base>.crt` and `<dir>/<base>.key`. */
export function keyPairPaths(dir: string, base: string): CertKeyFiles {
  return { certFile: join(dir, `${base}.crt`), keyFile: join(dir, `${base}.key`) };
}

/**
 * Writes `<dir>/<base>.key` (0600) then `<dir>/<base>.crt` (0644), each atomically; creates
 * `dir` (0700) if missing. A crash between the two leaves a mismatched pair, which
 * `checkCertificate` reports, so the pair is regenerated on the next run.
 */
export async function writeKeyPair(dir: string, base: string, pair: CertificateAndKey): Promise<CertKeyFiles> {
  const paths = keyPairPaths(dir, base);
  await mkdir(dir, { recursive: true, mode: privateDirMode });
  await writeFileAtomic(paths.keyFile, pair.keyPem, privateFileMode);
  await writeFileAtomic(paths.certFile, pair.certPem, publicFileMode);
  return paths;
}

/** Reads a pair written by `writeKeyPair`. Rejects with the fs error (e.g. ENOENT) if a file is missing. */
export async function readKeyPair(dir: string, base: string): Promise<CertificateAndKey> {
  const paths = keyPairPaths(dir, base);
  const [certPem, keyPem] = await Promise.all([readFile(paths.certFile, 'utf8'), readFile(paths.keyFile, 'utf8')]);
  return { certPem, keyPem };
}
