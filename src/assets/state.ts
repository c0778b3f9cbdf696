/**
 * The state file, `<dir>/.provisioner/state.json`: for every file an asset generated,
 * the sha256 of what was written. A file on disk whose hash differs was edited by
 * the user; a generated file whose new content differs from the recorded hash is
 * a change of the inputs. Together they tell "keep the edit" from "conflict".
 */
import { InstallRecord } from '../installdir/record.js';

const stateSchemaVersion = 1;

export interface GeneratedFileRecord {
  /** Name of the asset that generated the file. */
  asset: string;
  /** sha256 (hex) of the content provisioner last generated for this path (the base for edits). */
  sha256: string;
}

export interface AssetRecord {
  /** When the asset was last generated (ISO time). */
  generatedAt: string;
  /** sha256 over the paths and content hashes of the files it generated. */
  digest: string;
}

export interface StateFile {
  version: typeof stateSchemaVersion;
  /** By path relative to the install directory, with `/` separators. */
  files: Record<string, GeneratedFileRecord>;
  assets: Record<string, AssetRecord>;
}

function emptyState(): StateFile {
  return { version: stateSchemaVersion, files: {}, assets: {} };
}

/**
 * The state file as a record: at most 4 MiB (one short record per generated file). Losing it
 * is recoverable: the files on disk then count as edited.
 */
const stateRecord = new InstallRecord<StateFile>({
  record: 'assetState',
  title: 'state file',
  maxBytes: 4 * 1024 * 1024,
  version: stateSchemaVersion,
  recovery: (file) => `move it aside (mv ${file} ${file}.bak) and rerun: every generated file on disk will then be treated as edited, so pass --keep-edits or --regenerate`,
  problems: (state) => (typeof state.files !== 'object' || state.files === null ? [{ path: 'files', message: 'expected an object of generated files by path' }] : []),
});

export function statePath(dir: string): string {
  return stateRecord.path(dir);
}

/** Reads the state file; a missing file is an empty state. A corrupt one is an EnvironmentError with a way out. */
export async function readState(dir: string): Promise<StateFile> {
  const state = await stateRecord.read(dir);
  return state ? { version: stateSchemaVersion, files: state.files, assets: state.assets ?? {} } : emptyState();
}

export async function writeState(dir: string, state: StateFile): Promise<void> {
  await stateRecord.write(dir, {
    version: state.version,
    files: Object.fromEntries(Object.entries(state.files).sort(([a], [b]) => (a < b ? -1 : 1))),
    assets: Object.fromEntries(Object.entries(state.assets).sort(([a], [b]) => (a < b ? -1 : 1))),
  });
}
