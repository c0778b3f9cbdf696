/**
 * `create manifests`: generates `<dir>/cluster-api/*.yaml` from the install config,
 * keeping the user's edits, and stops (writing nothing) when a changed install config
 * would overwrite or delete an edited file.
 */
import path from 'node:path';
import { AssetStore, clusterApiManifestsAsset, installConfigAsset, manifestsDirName, type ClusterApiManifests, type CommitReport, type FileAction } from './index.js';
import type { InstallConfig } from '../config/index.js';
import { log, type EventSink } from '../events.js';

export interface CreateManifestsOptions {
  dir: string;
  /** Edited files to replace with the generated version. Default: none. */
  regenerate: readonly string[];
  /** Keep every edited file that conflicts with the install config. Default: false. */
  keepEdits: boolean;
  sink: EventSink;
  signal?: AbortSignal;
}

export interface CreateManifestsResult {
  directory: string;
  /** The install config the manifests were generated from (the store's one reading of it). */
  config: InstallConfig;
  manifests: ClusterApiManifests;
  report: CommitReport;
  /** Files per action, for the summary. */
  counts: Partial<Record<FileAction, number>>;
}

export async function createManifests(options: CreateManifestsOptions): Promise<CreateManifestsResult> {
  const dir = path.resolve(options.dir);
  const store = await AssetStore.open({
    dir,
    sink: options.sink,
    ...(options.signal ? { signal: options.signal } : {}),
    regenerate: options.regenerate,
    keepEdits: options.keepEdits,
  });
  const manifests = await store.fetch(clusterApiManifestsAsset);
  const { config } = await store.fetch(installConfigAsset);
  const report = await store.commit();

  const counts: Partial<Record<FileAction, number>> = {};
  for (const plan of report.plan) counts[plan.action] = (counts[plan.action] ?? 0) + 1;
  for (const plan of report.plan) {
    switch (plan.action) {
      case 'keep-edit':
        log(options.sink, 'info', `kept your edit of ${plan.path} (the install config still generates the version you edited)`);
        break;
      case 'keep-edit-forced':
        log(options.sink, 'warn', `kept your edit of ${plan.path} over a new generated version (--keep-edits); \`provisioner diff\` shows what you are not taking`);
        break;
      case 'regenerate':
        log(options.sink, 'info', `replaced your edit of ${plan.path} with the generated version (--regenerate)`);
        break;
      case 'delete':
      case 'delete-edited':
        log(options.sink, 'info', `removed ${plan.path}: the install config no longer generates it`);
        break;
      case 'release':
        log(options.sink, 'warn', `kept ${plan.path} although the install config no longer generates it (--keep-edits): it is now your file and will be applied as is`);
        break;
      case 'restore':
        log(options.sink, 'info', `restored ${plan.path}, which was deleted`);
        break;
      case 'user-file':
        log(options.sink, 'info', `${plan.path} is your own file: left as is, and applied with the others`);
        break;
      default:
        break;
    }
  }
  const directory = path.join(dir, manifestsDirName);
  const summary = summarize(counts);
  options.sink.emit({
    type: 'result',
    kind: 'manifests',
    text: `Manifests in ${directory}: ${manifests.files.length} files${summary ? ` (${summary})` : ''}`,
    data: { directory, files: manifests.files.map((f) => ({ path: f.path, origin: f.origin })), written: report.written, deleted: report.deleted, keptEdits: report.keptEdits },
  });
  return { directory, config, manifests, report, counts };
}

function summarize(counts: Partial<Record<FileAction, number>>): string {
  const parts: [FileAction[], string][] = [
    [['create', 'restore'], 'created'],
    [['update', 'regenerate'], 'updated'],
    [['unchanged'], 'unchanged'],
    [['keep-edit', 'keep-edit-forced', 'release'], 'edits kept'],
    [['delete', 'delete-edited'], 'deleted'],
    [['user-file'], 'yours'],
  ];
  return parts
    .map(([actions, label]) => [actions.reduce((n, a) => n + (counts[a] ?? 0), 0), label] as const)
    .filter(([n]) => n > 0)
    .map(([n, label]) => `${n} ${label}`)
    .join(', ');
}
