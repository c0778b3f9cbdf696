/**
 * PEM files on disk: atomic writes (temp file in the same directory, fsync, rename) with
 * explicit modes — private keys 0600, certificates and public keys 0644 — and loading back.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CertificateAndKey } from './certificates.js';

/** Mode of private key files and kubeconfigs: owner read/write only. */
export const privateFileMode = 0o600;
/** Mode of certificates and public keys. */
export const publicFileMode = 0o644;
/** Mode of directories that hold private keys. */
export const privateDirMode = 0o700;

import { writeFileAtomic } from '../files.js';

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
