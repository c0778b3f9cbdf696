/** File helpers of the asset store: atomic writes, content hashes, reads that tolerate absence. */
import { createHash } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic as writeAtomically } from '../files.js';

export function sha256(content: string): string {
  return createHash('sha256').update(content).digest('hex');
}

/** The file's text, or undefined when it does not exist. */
export async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Writes `file` atomically (src/files.ts), creating its directory first. */
export async function writeFileAtomic(file: string, content: string, mode = 0o644): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeAtomically(file, content, mode);
}
