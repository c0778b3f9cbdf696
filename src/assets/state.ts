/**
 * The state file, `<dir>/.provisioner/state.json`: for every file an asset generated,
 * the sha256 of what was written. A file on disk whose hash differs was edited by
 * the user; a generated file whose new content differs from the recorded hash is
 * a change of the inputs. Together they tell "keep the edit" from "conflict".
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError } from '../errors.js';
import { readJsonFile, type FileKind } from '../input-files.js';
import { writeFileAtomic } from '../files.js';

export const stateDirName = '.provisioner';
const stateFileName = 'state.json';
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

export function statePath(dir: string): string {
  return path.join(dir, stateDirName, stateFileName);
}

/**
 * The state file as a file kind: provisioner's own, at most 4 MiB (one short record per
 * generated file). Losing it is recoverable: the files on disk then count as edited.
 */
const stateFileKind: FileKind = {
  name: 'state file',
  maxBytes: 4 * 1024 * 1024,
  writer: 'provisioner',
  hint: (file) => `move it aside (mv ${file} ${file}.bak) and rerun: every generated file on disk will then be treated as edited, so pass --keep-edits or --regenerate`,
};

/** Reads the state file; a missing file is an empty state. A corrupt one is an EnvironmentError with a way out. */
export async function readState(dir: string): Promise<StateFile> {
  const file = statePath(dir);
  const parsed = await readJsonFile(file, stateFileKind);
  if (parsed === undefined) return emptyState();
  const state = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Partial<StateFile>;
  if (state.version !== stateSchemaVersion || typeof state.files !== 'object' || state.files === null) {
    throw new EnvironmentError(`the state file ${file} has an unknown format (version ${String(state.version)})`, {
      hint: 'it was written by another provisioner version; use that version, or move the file aside and rerun with --keep-edits',
    });
  }
  return { version: stateSchemaVersion, files: state.files, assets: state.assets ?? {} };
}

export async function writeState(dir: string, state: StateFile): Promise<void> {
  const sorted: StateFile = {
    version: state.version,
    files: Object.fromEntries(Object.entries(state.files).sort(([a], [b]) => (a < b ? -1 : 1))),
    assets: Object.fromEntries(Object.entries(state.assets).sort(([a], [b]) => (a < b ? -1 : 1))),
  };
  await mkdir(path.dirname(statePath(dir)), { recursive: true });
  await writeFileAtomic(statePath(dir), JSON.stringify(sorted, null, 2) + '\n', 0o600);
}
