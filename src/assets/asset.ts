/**
 * Assets, after openshift-install's asset graph: each asset names the assets it
 * depends on and generates itself from their values. An asset that produces files
 * the user may edit also knows how to load itself from those files, so that what
 * depends on it sees the user's edits. The store (./store.ts) resolves the graph,
 * reconciles generated files with the disk and the state file, and writes.
 */
import type { EventSink } from '../events.js';

/** A file an asset produces. */
export interface AssetFile {
  /** Path relative to the install directory, with `/` separators. */
  path: string;
  content: string;
  /** Permission bits. Default: 0o644. */
  mode?: number;
}

export interface Generated<T> {
  value: T;
  /** Files to write (reconciled with user edits). Empty for assets that only compute. */
  files: AssetFile[];
}

/** Values of an asset's dependencies, by asset. */
export interface Parents {
  get<T>(asset: Asset<T>): T;
}

export interface AssetContext {
  /** Absolute install directory. */
  dir: string;
  sink: EventSink;
  signal?: AbortSignal;
}

export interface Asset<T> {
  /** Stable name, recorded in the state file. */
  readonly name: string;
  readonly dependencies: readonly Asset<unknown>[];
  /**
   * A directory (relative to the install directory) this asset owns: files there that
   * the state lists as its own but the new generation omits are removed; other files
   * there are the user's and are reported, never touched.
   */
  readonly directory?: string;
  generate(parents: Parents, ctx: AssetContext): Promise<Generated<T>>;
  /**
   * Rebuilds the value from the files as they will be after this run (user edits kept,
   * user-added files in `directory` included). Called only when they differ from the
   * generated files. Without it, the generated value stands.
   */
  load?(files: readonly AssetFile[], generated: Generated<T>): T;
}
