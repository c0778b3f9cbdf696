/**
 * The pivot journal, `<dir>/.provisioner/pivot.json`: the phase reached and every object
 * of the move with its source and target UIDs. Written atomically after each step, so a
 * crash at any point leaves a journal that says what to redo (run again) or undo (--rollback).
 */
import { InstallRecord } from '../installdir/record.js';
import type { ObjectRef } from './graph.js';

/** In order; each is recorded once it is complete. */
export const pivotPhases = ['planned', 'paused', 'copied', 'verified', 'agents-followed', 'source-deleted', 'unpaused', 'done'] as const;
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

/**
 * The pivot journal as a record: at most 64 MiB (a few hundred bytes per moved object; 3 + 1000
 * machines move about 10,000 objects). Without it an unfinished move can be neither resumed nor
 * rolled back, so the way out is to look before moving it aside.
 */
const pivotJournalRecord = new InstallRecord<PivotJournal>({
  record: 'pivot',
  title: 'pivot journal',
  maxBytes: 64 * 1024 * 1024,
  version: 1,
  recovery: (file) =>
    `restore ${file} from a backup if you have one; otherwise see where the cluster's objects are (\`kubectl get clusters -A\` against the local control plane and the target), and only when no move is under way move the file aside (mv ${file} ${file}.bak) and rerun`,
  problems: (journal) =>
    !pivotPhases.includes(journal.phase as PivotPhase) || !Array.isArray(journal.objects) || !Array.isArray(journal.clusters)
      ? [{ path: 'phase', message: `expected {"version": 1, "phase": one of ${pivotPhases.join(', ')}, "clusters": [...], "objects": [...]}` }]
      : [],
});

export function pivotJournalPath(dir: string): string {
  return pivotJournalRecord.path(dir);
}

/** Reads the pivot journal of `dir`; undefined when no move was ever started. */
export async function readPivotJournal(dir: string): Promise<PivotJournal | undefined> {
  return pivotJournalRecord.read(dir);
}

export async function writePivotJournal(dir: string, journal: PivotJournal): Promise<void> {
  journal.updatedAt = new Date().toISOString();
  await pivotJournalRecord.write(dir, journal);
}
