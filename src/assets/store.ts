/**
 * The asset store: resolves the asset graph, reconciles each generated file with the
 * disk and the state file, and writes only when every asset generated and no edit
 * conflicts. Per generated file:
 *
 *   on disk?  edited?¹  new generation vs. recorded   action
 *   no        -         -                             create (restore if recorded)
 *   yes       -         disk == new                   unchanged (adopted)
 *   yes       no        differs                       update
 *   yes       yes       same as recorded              keep-edit (the edit survives)
 *   yes       yes       differs                       conflict; --keep-edits keeps the edit,
 *                                                      --regenerate <file> takes the new one
 *
 *   ¹ edited: the disk differs from the recorded hash, or nothing is recorded.
 *
 * Files an asset generated before but no longer does (a removed machine pool) are
 * deleted when unedited; an edited one is a conflict (--regenerate deletes it,
 * --keep-edits keeps it as a user file). Files in an asset's directory that it never
 * generated are the user's: reported, never touched.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, InternalError, UsageError, type FieldProblem } from '../errors.js';
import type { Asset, AssetContext, AssetFile, Generated, Parents } from './asset.js';
import { writeFileAtomic } from '../files.js';
import { readAssetFile, sha256 } from './files.js';
import { readState, statePath, writeState, type StateFile } from './state.js';
import { installConfigAsset, type LoadedInstallConfig } from './install-config.js';

export type FileAction =
  | 'create'
  | 'restore'
  | 'unchanged'
  | 'update'
  | 'keep-edit'
  | 'keep-edit-forced'
  | 'regenerate'
  | 'conflict'
  | 'delete'
  | 'delete-edited'
  | 'release'
  | 'conflict-removed'
  | 'user-file';

export interface FilePlan {
  /** Relative to the install directory, `/`-separated. */
  path: string;
  asset: string;
  action: FileAction;
  /** What the inputs generate now (absent for removed and user files). */
  generated?: string;
  /** What is on disk now (absent when missing). */
  disk?: string;
  mode?: number;
}

export interface StoreOptions {
  /** Install directory. */
  dir: string;
  sink: AssetContext['sink'];
  signal?: AbortSignal;
  /** Files whose edits are replaced by the new generation (paths relative to the install dir, or to the asset's directory). */
  regenerate?: readonly string[];
  /** Keep every conflicting edit instead of stopping. Default: false. */
  keepEdits?: boolean;
  /** Plan only: skip loading assets from edited files (`diff` compares files, it needs no values). Default: false. */
  planOnly?: boolean;
  /** The install config the command already loaded (`loadInstallConfig`), used instead of reading the file again. Default: the store reads it. */
  installConfig?: LoadedInstallConfig;
}

export interface CommitReport {
  plan: readonly FilePlan[];
  /** Paths written, by action. */
  written: string[];
  deleted: string[];
  keptEdits: string[];
  released: string[];
  userFiles: string[];
}

/** Actions that write the generated content. */
const writes: ReadonlySet<FileAction> = new Set(['create', 'restore', 'update', 'regenerate']);

function toPosix(p: string): string {
  return p.split(path.sep).join('/');
}

export class AssetStore {
  private readonly values = new Map<Asset<unknown>, Promise<unknown>>();
  private readonly plans: FilePlan[] = [];
  private readonly digests = new Map<string, string>();
  private readonly regenerate: Set<string>;
  private readonly ctx: AssetContext;

  private constructor(
    private readonly options: StoreOptions,
    private readonly state: StateFile,
  ) {
    this.ctx = { dir: options.dir, sink: options.sink, ...(options.signal ? { signal: options.signal } : {}) };
    this.regenerate = new Set((options.regenerate ?? []).map((p) => this.normalize(p)));
    if (options.installConfig) this.values.set(installConfigAsset as Asset<unknown>, Promise.resolve(options.installConfig));
  }

  static async open(options: StoreOptions): Promise<AssetStore> {
    const dir = path.resolve(options.dir);
    return new AssetStore({ ...options, dir }, await readState(dir));
  }

  get dir(): string {
    return this.options.dir;
  }

  /** Every file decision so far, in the order assets generated them. */
  get plan(): readonly FilePlan[] {
    return this.plans;
  }

  conflicts(): FilePlan[] {
    return this.plans.filter((p) => p.action === 'conflict' || p.action === 'conflict-removed');
  }

  /** The asset's value, generating its dependencies first; files are planned, not written. */
  fetch<T>(asset: Asset<T>): Promise<T> {
    return this.resolve(asset, []);
  }

  private resolve<T>(asset: Asset<T>, stack: readonly string[]): Promise<T> {
    if (stack.includes(asset.name)) throw new InternalError(`asset dependency cycle: ${[...stack, asset.name].join(' -> ')}`);
    let pending = this.values.get(asset as Asset<unknown>);
    if (!pending) {
      pending = this.build(asset, [...stack, asset.name]);
      this.values.set(asset as Asset<unknown>, pending);
    }
    return pending as Promise<T>;
  }

  private async build<T>(asset: Asset<T>, stack: readonly string[]): Promise<T> {
    const parentValues = new Map<Asset<unknown>, unknown>();
    for (const dependency of asset.dependencies) parentValues.set(dependency, await this.resolve(dependency, stack));
    const parents: Parents = {
      get<P>(dependency: Asset<P>): P {
        if (!parentValues.has(dependency as Asset<unknown>)) throw new InternalError(`asset ${asset.name} read ${dependency.name}, which it does not list as a dependency`);
        return parentValues.get(dependency as Asset<unknown>) as P;
      },
    };
    this.options.signal?.throwIfAborted();
    const generated = await asset.generate(parents, this.ctx);
    if (generated.files.length === 0 && !asset.directory) return generated.value;
    const final = await this.reconcile(asset, generated);
    const changed = final.some((f, i) => f.content !== generated.files[i]?.content) || final.length !== generated.files.length;
    return changed && asset.load && !this.options.planOnly ? asset.load(final, generated) : generated.value;
  }

  /** Decides every file of `asset`; returns the files as they will be on disk afterwards. */
  private async reconcile<T>(asset: Asset<T>, generated: Generated<T>): Promise<AssetFile[]> {
    const final: AssetFile[] = [];
    const newPaths = new Set<string>();
    this.digests.set(asset.name, sha256(generated.files.map((f) => `${f.path}\0${sha256(f.content)}`).join('\n')));
    // Read every file at once: a cluster with many pools has many files, and reads are independent.
    const disks = await Promise.all(generated.files.map((f) => readAssetFile(path.join(this.dir, f.path))));
    for (const [index, file] of generated.files.entries()) {
      newPaths.add(file.path);
      const disk = disks[index];
      const recorded = this.state.files[file.path]?.sha256;
      const generatedHash = sha256(file.content);
      let action: FileAction;
      if (disk === undefined) action = recorded ? 'restore' : 'create';
      else {
        const diskHash = sha256(disk);
        if (diskHash === generatedHash) action = 'unchanged';
        else if (recorded !== undefined && diskHash === recorded) action = 'update';
        else if (this.wantsRegenerate(file.path)) action = 'regenerate';
        else if (recorded === generatedHash) action = 'keep-edit';
        else if (this.options.keepEdits) action = 'keep-edit-forced';
        else action = 'conflict';
      }
      this.plans.push({ path: file.path, asset: asset.name, action, generated: file.content, ...(disk !== undefined ? { disk } : {}), ...(file.mode ? { mode: file.mode } : {}) });
      const keepsDisk = disk !== undefined && (action === 'keep-edit' || action === 'keep-edit-forced' || action === 'conflict');
      final.push(keepsDisk ? { ...file, content: disk } : file);
    }
    for (const [recordedPath, record] of Object.entries(this.state.files)) {
      if (record.asset !== asset.name || newPaths.has(recordedPath)) continue;
      const disk = await readAssetFile(path.join(this.dir, recordedPath));
      if (disk === undefined) {
        this.plans.push({ path: recordedPath, asset: asset.name, action: 'delete' });
        continue;
      }
      let action: FileAction;
      if (sha256(disk) === record.sha256) action = 'delete';
      else if (this.wantsRegenerate(recordedPath)) action = 'delete-edited';
      else if (this.options.keepEdits) action = 'release';
      else action = 'conflict-removed';
      this.plans.push({ path: recordedPath, asset: asset.name, action, disk });
      if (action === 'release' || action === 'conflict-removed') final.push({ path: recordedPath, content: disk });
    }
    if (asset.directory) {
      for (const userPath of await this.userFiles(asset.directory, newPaths)) {
        const disk = (await readAssetFile(path.join(this.dir, userPath))) ?? '';
        this.plans.push({ path: userPath, asset: asset.name, action: 'user-file', disk });
        final.push({ path: userPath, content: disk });
      }
    }
    final.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return final;
  }

  /** Files in `directory` that this run does not generate and the state does not record. */
  private async userFiles(directory: string, generatedPaths: ReadonlySet<string>): Promise<string[]> {
    const entries = await readdir(path.join(this.dir, directory), { withFileTypes: true }).catch(() => []);
    return entries
      .filter((e) => e.isFile() && !e.name.startsWith('.'))
      .map((e) => `${directory}/${e.name}`)
      .filter((p) => !generatedPaths.has(p) && this.state.files[p] === undefined)
      .sort();
  }

  /** `--regenerate` names: absolute paths become relative to the install directory; `./` is dropped. */
  private normalize(given: string): string {
    if (path.isAbsolute(given)) return toPosix(path.relative(this.dir, given));
    return toPosix(path.normalize(given)).replace(/^\.\//, '');
  }

  /** True when `--regenerate` names this file (by its path, or by its path inside a directory, e.g. a bare file name). */
  private wantsRegenerate(filePath: string): boolean {
    for (const name of this.regenerate) if (filePath === name || filePath.endsWith(`/${name}`)) return true;
    return false;
  }

  /** Every `--regenerate` name must name a file of the plan: a typo must not silently keep an edit. */
  private checkRegenerateNames(): void {
    const unknown = [...this.regenerate].filter((name) => !this.plans.some((p) => p.path === name || p.path.endsWith(`/${name}`)));
    if (unknown.length > 0) {
      throw new UsageError(`--regenerate names ${unknown.length === 1 ? 'a file' : 'files'} that provisioner does not generate: ${unknown.join(', ')}`, {
        hint: `name a generated file, e.g. ${this.plans.find((p) => p.generated !== undefined)?.path ?? 'cluster-api/01_cluster.yaml'}`,
      });
    }
  }

  /** Throws the conflict error if any edit would be overwritten or deleted. Writes nothing. */
  checkConflicts(): void {
    this.checkRegenerateNames();
    const conflicts = this.conflicts();
    if (conflicts.length === 0) return;
    const problems: FieldProblem[] = conflicts.map((c) => ({
      path: c.path,
      message:
        c.action === 'conflict'
          ? 'edited by you, and the install config now generates a different version'
          : 'edited by you, and the install config no longer generates it (so it would be deleted)',
      hint: `take the new version with --regenerate ${c.path}, or keep yours with --keep-edits`,
    }));
    throw new ConfigError(`${conflicts.length === 1 ? 'an edited file conflicts' : `${conflicts.length} edited files conflict`} with the install config; nothing was written`, problems, {
      hint: `run \`provisioner diff --dir ${this.dir}\` to compare, then rerun with --regenerate <file> (take the generated version) or --keep-edits (keep yours)`,
    });
  }

  /**
   * Writes every planned file (each atomically), deletes removed ones, then the state
   * file. Throws before writing anything if an edit conflicts.
   */
  async commit(): Promise<CommitReport> {
    this.checkConflicts();
    this.options.signal?.throwIfAborted();
    const report: CommitReport = { plan: this.plans, written: [], deleted: [], keptEdits: [], released: [], userFiles: [] };
    const nextFiles = { ...this.state.files };
    // Each file is replaced atomically on its own, so they can be written together (the fsyncs overlap).
    const toWrite = this.plans.filter((plan) => writes.has(plan.action) && plan.generated !== undefined);
    await Promise.all(
      toWrite.map(async (plan) => {
        const target = path.join(this.dir, plan.path);
        await mkdir(path.dirname(target), { recursive: true });
        await writeFileAtomic(target, plan.generated ?? '', plan.mode);
      }),
    );
    report.written.push(...toWrite.map((plan) => plan.path));
    for (const plan of this.plans) {
      const target = path.join(this.dir, plan.path);
      switch (plan.action) {
        case 'delete':
        case 'delete-edited':
          await rm(target, { force: true });
          delete nextFiles[plan.path];
          report.deleted.push(plan.path);
          break;
        case 'release':
          delete nextFiles[plan.path];
          report.released.push(plan.path);
          break;
        case 'keep-edit':
        case 'keep-edit-forced':
          report.keptEdits.push(plan.path);
          break;
        case 'user-file':
          report.userFiles.push(plan.path);
          break;
        default:
          break;
      }
      if (plan.generated !== undefined) nextFiles[plan.path] = { asset: plan.asset, sha256: sha256(plan.generated) };
    }
    const changed = report.written.length > 0 || report.deleted.length > 0 || report.released.length > 0 || JSON.stringify(nextFiles) !== JSON.stringify(this.state.files);
    if (changed) {
      const assets = { ...this.state.assets };
      for (const [name, digest] of this.digests) assets[name] = { generatedAt: new Date().toISOString(), digest };
      await writeState(this.dir, { version: this.state.version, files: nextFiles, assets });
    }
    return report;
  }

  /** Where the state lives, for messages. */
  get statePath(): string {
    return statePath(this.dir);
  }
}

