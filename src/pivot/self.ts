/**
 * The first half of a self pivot (`pivot --to self`, `create cluster --pivot-to self`):
 * `management install` into the install's own cluster with its directory, so the providers'
 * images are loaded onto its nodes by the local control plane, which still serves them.
 */
import path from 'node:path';
import type { InstallConfig } from '../config/index.js';
import type { EventSink } from '../events.js';
import { installManagement } from '../management/install.js';
import { isUnfinished } from './from.js';
import { phaseIndex, readPivotJournal } from './journal.js';
import { pivotTargetKubeconfig, selfTarget } from './target.js';

/**
 * Skipped once the move has begun (journal past `planned`): the providers were installed
 * before it began, and the source's controllers are fenced by then. `lockHeld`: the caller
 * holds the directory lock (create cluster). Default false. `config`: the install config the
 * caller read (default: management install reads it).
 */
export async function installSelfManagement(request: { dir: string; config?: InstallConfig; dryRun?: boolean; lockHeld?: boolean; sink: EventSink; signal: AbortSignal }): Promise<void> {
  const dir = path.resolve(request.dir);
  const journal = await readPivotJournal(dir);
  if (isUnfinished(journal) && phaseIndex(journal.phase) > phaseIndex('planned')) return;
  await installManagement({ kubeconfig: pivotTargetKubeconfig(dir, selfTarget), dir, ...(request.config ? { config: request.config } : {}), dryRun: request.dryRun ?? false, lockHeld: request.lockHeld ?? false, sink: request.sink, signal: request.signal });
}
