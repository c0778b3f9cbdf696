/**
 * Every path of an install directory that provisioner writes besides the user's files, in one
 * place: the records of `.provisioner/` and the directories beside them. Nothing else builds a
 * `.provisioner/…` path.
 */
import path from 'node:path';

/** provisioner's own directory inside an install directory. */
export const stateDirName = '.provisioner';

/** Where each of provisioner's records lives, relative to `<dir>/.provisioner`. */
export const recordFileNames = {
  /** `create cluster`'s stages (lifecycle/journal.ts). */
  journal: 'journal.json',
  /** The generated files' hashes (assets/state.ts). */
  assetState: 'state.json',
  /** The pivot's phases and objects (pivot/journal.ts). */
  pivot: 'pivot.json',
  /** The existing management cluster this install uses (management/attach.ts). */
  management: 'management.json',
  /** The Rancher this install was handed to (handoff/rancher/journal.ts). */
  rancher: 'rancher.json',
  /** The Fleet manager this install was registered with (services/fleet.ts). */
  fleet: 'fleet.json',
  /** The cluster's objects as they were when create cluster finished (services/create-cluster.ts). */
  clusterState: 'cluster-state.yaml',
} as const;

export type RecordName = keyof typeof recordFileNames;

/** `<dir>/.provisioner` (absolute). */
export function stateDirOf(dir: string): string {
  return path.join(path.resolve(dir), stateDirName);
}

/** The absolute path of one of provisioner's records in `dir`. */
export function recordPath(dir: string, record: RecordName): string {
  return path.join(stateDirOf(dir), recordFileNames[record]);
}

/** A record's path relative to the install directory, for messages that tell a user which file to move aside. */
export function recordRelativePath(record: RecordName): string {
  return path.join(stateDirName, recordFileNames[record]);
}

/** The local control plane's own directory (data, certificates, pidfiles): controlplane/layout.ts lays it out. */
export function controlPlaneStateDir(dir: string): string {
  return path.join(stateDirOf(dir), 'controlplane');
}
