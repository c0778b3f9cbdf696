/**
 * The pivot journal, `<dir>/.provisioner/pivot.json`: the phase reached and every object
 * of the move with its source and target UIDs. Written atomically after each step, so a
 * crash at any point leaves a journal that says what to redo (run again) or undo (--rollback).
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { readIfExists, writeFileAtomic } from '../process/fs.js';
import type { ObjectRef } from './graph.js';

/** In order; each is recorded once it is complete. */
export const pivotPhases = ['planned', 'paused', 'copied', 'verified', 'source-deleted', 'unpaused', 'done'] as const;
export type PivotPhase = (typeof pivotPhases)[number];

export function phaseIndex(phase: PivotPhase): number {
  return pivotPhases.indexOf(phase);
}

export interface JournalObject extends ObjectRef {
  sourceUid: string;
  /** Set once the copy exists in the target. */
  targetUid?: string;
  /** Cluster-scoped: copied, never deleted from the source. */
  global: boolean;
  /** The kind has a status subresource: the status is copied through it. */
  hasStatus: boolean;
  /** Creation tier (owners first). */
  tier: number;
  /** Global only: it existed in the target before the move, so it is neither overwritten nor rolled back. */
  preexisting?: boolean;
}

export interface JournalCluster {
  namespace: string;
  name: string;
  /** spec.paused before the move: a cluster the user had paused stays paused. */
  wasPaused: boolean;
}

export interface PivotJournal {
  version: 1;
  /** The target's kubeconfig (absolute) and API server URL: a resume must point at the same cluster. */
  targetKubeconfig: string;
  targetServer: string;
  phase: PivotPhase;
  startedAt: string;
  updatedAt: string;
  clusters: JournalCluster[];
  objects: JournalObject[];
  /** Set by a rollback that finished: the journal is then history, not work to resume. */
  rolledBack?: boolean;
  /** Last failure, for the next run's message. */
  lastError?: string;
}

export function pivotJournalPath(dir: string): string {
  return path.join(path.resolve(dir), '.provisioner', 'pivot.json');
}

export async function readPivotJournal(dir: string): Promise<PivotJournal | undefined> {
  const text = await readIfExists(pivotJournalPath(dir));
  return text === undefined ? undefined : (JSON.parse(text) as PivotJournal);
}

export async function writePivotJournal(dir: string, journal: PivotJournal): Promise<void> {
  journal.updatedAt = new Date().toISOString();
  await mkdir(path.dirname(pivotJournalPath(dir)), { recursive: true });
  await writeFileAtomic(pivotJournalPath(dir), JSON.stringify(journal, null, 2) + '\n', 0o600);
}
