/**
 * `provisioner diff`: how the manifests on disk differ from what the install config
 * generates now, file by file and object by object; and, when given a connection to a
 * running control plane (`LiveObjectSource`), how the live objects differ from the disk.
 */
import path from 'node:path';
import {
  AssetStore,
  clusterApiManifestsAsset,
  diffObjects,
  loadInstallConfig,
  parseManifestFile,
  type FileAction,
  type LiveObjectSource,
  type LocatedObject,
  type ObjectChange,
} from '../assets/index.js';
import { desiredSetSelector, installConfigOwner } from '../config/index.js';
import { ConfigError } from '../errors.js';
import type { EventSink } from '../events.js';

export interface DiffOptions {
  dir: string;
  sink: EventSink;
  signal?: AbortSignal;
  /** Compare with the live objects too. Absent: live objects are not compared (and the report says so). */
  live?: LiveObjectSource;
}

export type FileStatus = 'missing' | 'inputs-changed' | 'edited' | 'conflict' | 'removed' | 'removed-edited' | 'user';

export interface FileDiff {
  path: string;
  status: FileStatus;
  /** What `create manifests` would do now, in words. */
  note: string;
  changes: ObjectChange[];
  /** Set when a file on disk cannot be parsed. */
  unreadable?: string;
}

export type LiveComparison = { compared: true; source: string; changes: ObjectChange[] } | { compared: false; reason: string };

export interface DiffResult {
  files: FileDiff[];
  unchangedFiles: number;
  live: LiveComparison;
  /** True when anything differs. */
  differs: boolean;
}

const statusOf: Partial<Record<FileAction, { status: FileStatus; note: string }>> = {
  create: { status: 'missing', note: 'not on disk; create manifests would write it' },
  restore: { status: 'missing', note: 'deleted from disk; create manifests would write it again' },
  update: { status: 'inputs-changed', note: 'the install config changed; create manifests would update it' },
  'keep-edit': { status: 'edited', note: 'edited by you; kept, since the install config still generates the version you edited' },
  conflict: { status: 'conflict', note: 'edited by you, and the install config now generates a different version: create manifests stops until you pass --regenerate or --keep-edits' },
  delete: { status: 'removed', note: 'no longer generated; create manifests would delete it' },
  'conflict-removed': { status: 'removed-edited', note: 'edited by you, and no longer generated: create manifests stops until you pass --regenerate or --keep-edits' },
  'user-file': { status: 'user', note: 'your own file; applied as is' },
};

function located(file: string, content: string | undefined): { objects: LocatedObject[]; error?: string } {
  if (content === undefined) return { objects: [] };
  try {
    return { objects: parseManifestFile(file, content).map((object) => ({ object, file })) };
  } catch (error) {
    return { objects: [], error: error instanceof ConfigError ? error.details.join('; ') || error.message : String(error) };
  }
}

export async function diffManifests(options: DiffOptions): Promise<DiffResult> {
  const dir = path.resolve(options.dir);
  const installConfig = await loadInstallConfig({ dir, sink: options.sink });
  const { config } = installConfig;
  const store = await AssetStore.open({ dir, sink: options.sink, ...(options.signal ? { signal: options.signal } : {}), planOnly: true, installConfig });
  await store.fetch(clusterApiManifestsAsset);

  const files: FileDiff[] = [];
  let unchangedFiles = 0;
  const onDisk: LocatedObject[] = [];
  for (const plan of store.plan) {
    if (plan.asset !== clusterApiManifestsAsset.name) continue;
    const disk = located(plan.path, plan.disk);
    onDisk.push(...disk.objects);
    const described = statusOf[plan.action];
    if (!described) {
      unchangedFiles++;
      continue;
    }
    const generated = located(plan.path, plan.generated);
    const changes = plan.action === 'user-file' ? [] : diffObjects(disk.objects, generated.objects, { before: 'on disk', after: 'generated' });
    files.push({ path: plan.path, ...described, changes, ...(disk.error ? { unreadable: disk.error } : {}) });
  }

  let live: LiveComparison;
  if (options.live) {
    const owner = installConfigOwner(config);
    const liveObjects = await options.live.listDesiredSet(owner, desiredSetSelector(owner), options.signal);
    live = { compared: true, source: options.live.description, changes: diffObjects(liveObjects.map((object) => ({ object })), onDisk, { before: 'live', after: 'on disk' }) };
  } else {
    live = { compared: false, reason: 'no connection to a running control plane was given' };
  }
  const liveDiffers = live.compared && live.changes.some((c) => c.kind !== 'unchanged');
  const result: DiffResult = { files, unchangedFiles, live, differs: files.length > 0 || liveDiffers };
  options.sink.emit({ type: 'result', kind: 'diff', text: renderDiff(result), data: result });
  return result;
}

/** The human report: one section per differing file, its object diffs, then the live part. */
function renderDiff(result: DiffResult): string {
  const out: string[] = [];
  if (result.files.length === 0) out.push(`No differences: the ${result.unchangedFiles} manifests on disk are what the install config generates.`);
  for (const file of result.files) {
    out.push(`=== ${file.path}: ${file.note}`);
    if (file.unreadable) out.push(`    (cannot read the file on disk: ${file.unreadable})`);
    for (const change of file.changes) {
      if (change.kind === 'unchanged') continue;
      const what = change.kind === 'replaced' ? `${change.replacedKey} -> ${change.key}` : change.key;
      out.push(`*** ${change.kind}: ${what}`);
      out.push(change.diff.trimEnd());
    }
    out.push('');
  }
  if (result.files.length > 0) out.push(`${result.files.length} file(s) differ; ${result.unchangedFiles} unchanged.`);
  if (result.live.compared) {
    const changed = result.live.changes.filter((c) => c.kind !== 'unchanged');
    out.push('', `=== live objects (${result.live.source}) vs. on disk: ${changed.length === 0 ? 'no differences' : `${changed.length} object(s) differ`}`);
    for (const change of changed) {
      out.push(`*** ${change.kind}: ${change.key}`, change.diff.trimEnd());
    }
  } else {
    out.push('', `Live objects not compared: ${result.live.reason}.`);
  }
  return out.join('\n');
}
