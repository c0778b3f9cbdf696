/** File helpers of the asset store: content hashes, capped reads that tolerate absence (atomic writes are src/files.ts's). */
import { createHash } from 'node:crypto';
import { readInputText, type FileKind } from '../input-files.js';

export function sha256(content: string): string {
  return createHash('sha256').update(content).digest('hex');
}

/**
 * A file an asset keeps in the install directory (a manifest, the install config), as the
 * user may have left it: at most 16 MiB, room for a user-added file of many objects.
 */
export const assetFile: FileKind = {
  name: 'install directory file',
  maxBytes: 16 * 1024 * 1024,
  writer: 'user',
  hint: (file) => `shrink or remove ${file} (provisioner generates only small files), then rerun`,
};

/** The file's text, or undefined when it does not exist; a ConfigError past the cap. */
export function readAssetFile(file: string): Promise<string | undefined> {
  return readInputText(file, assetFile);
}
