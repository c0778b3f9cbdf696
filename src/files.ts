/**
 * Atomic file writes, shared by every module that keeps state on disk (PKI, pidfiles,
 * the lock, the asset store, journals): a reader sees the old content or the new, never
 * a part, and a crash never leaves a half-written file under the real name. Also the
 * one streamed file hash.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';

/**
 * Writes `data` to `path`: a temp file beside it is written, chmod-ed to `mode`
 * (explicitly, so umask cannot widen or narrow it), fsync-ed, then renamed over `path`.
 * The directory must exist. Default mode 0644; keys and kubeconfigs pass 0600.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): Promise<void> {
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

/** Whether `path` exists (for the install directory's checks and the bundle's build cache); any failure to reach it counts as absent. */
export async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** File content, or undefined when the file does not exist. */
export async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** sha256 (hex) of a file's content, streamed. */
export async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path, { highWaterMark: 1 << 20 }), hash);
  return hash.digest('hex');
}
