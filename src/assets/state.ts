/**
 * The state file, `<dir>/.provisioner/state.json`: for every file an asset generated,
 * the sha256 of what was written. A file on disk whose hash differs was edited by
 * the user; a generated file whose new content differs from the recorded hash is
 * a change of the inputs. Together they tell "keep the edit" from "conflict".
 */
import path from 'node:path';
import { ConfigError } from '../errors.js';
import { readIfExists, writeFileAtomic } from './files.js';

export const stateDirName = '.provisioner';
export const stateFileName = 'state.json';
export const stateSchemaVersion = 1;

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

export function emptyState(): StateFile {
  return { version: stateSchemaVersion, files: {}, assets: {} };
}

export function statePath(dir: string): string {
  return path.join(dir, stateDirName, stateFileName);
}

/** Reads the state file; a missing file is an empty state. A corrupt one is a config error with a way out. */
export async function readState(dir: string): Promise<StateFile> {
  const file = statePath(dir);
  const text = await readIfExists(file);
  if (text === undefined) return emptyState();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`the state file ${file} is not valid JSON`, [], {
      hint: `move it aside (mv ${file} ${file}.bak) and rerun: every generated file on disk will then be treated as edited, so pass --keep-edits or --regenerate`,
      cause: error,
    });
  }
  const state = parsed as Partial<StateFile>;
  if (state.version !== stateSchemaVersion || typeof state.files !== 'object' || state.files === null) {
    throw new ConfigError(`the state file ${file} has an unknown format (version ${String(state.version)})`, [], {
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
  await writeFileAtomic(statePath(dir), JSON.stringify(sorted, null, 2) + '\n', 0o600);
}
