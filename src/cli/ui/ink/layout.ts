/**
 * What one frame of the live view shows, decided in plain code so it can be tested
 * without a terminal: which rows each section gets when the terminal is too short for
 * everything. A frame taller than the terminal makes ink clear the screen on every
 * redraw, so sections give up detail in a fixed order until the frame fits.
 */
import { buildTree, visibleProblemLogs, type LiveModel, type LogLine, type ObjectView, type ProcessView, type ProgressView, type StageView, type TreeNode } from './model.js';

export type StageRow = { kind: 'stage'; stage: StageView } | { kind: 'finished'; count: number; durationMs: number };

export type ProcessRow = { kind: 'process'; process: ProcessView; tail: string[] } | { kind: 'healthy'; names: string[] };

export type TreeRow =
  | {
      kind: 'object';
      branch: string;
      object: ObjectView;
      showNamespace: boolean;
      /** The tree lines to draw left of a second row, under the object. */
      gutter: string;
      /** The blocking condition goes on its own row under the object, not at the end of its row. */
      blockingBelow: boolean;
    }
  | { kind: 'readyGroup'; branch: string; count: number; objectKind: string }
  | { kind: 'more'; count: number; notReady: number };

export interface FramePlan {
  stages: StageRow[];
  processes: ProcessRow[];
  progress: ProgressView[];
  tree: TreeRow[];
  problems: LogLine[];
  info?: LogLine;
}

/** Log lines shown below a troubled process when there is room, and when there is not. */
const fullTail = 5;
const shortTail = 2;
/** The tree keeps at least this many rows, whatever else wants the space. */
const minTreeRows = 3;

/**
 * Plans a frame for a terminal of `rows` lines. Ink needs the frame to stay below the
 * terminal height to redraw in place, hence one spare line.
 */
export function planFrame(model: LiveModel, rows: number): FramePlan {
  const budget = Math.max(8, rows - 1);
  const problems = model.problems.slice(-visibleProblemLogs);
  const info = model.lastInfo;
  const progress = [...model.progress.values()];
  const stageViews = [...model.stages.values()];
  const processViews = [...model.processes.values()];
  const roots = buildTree(model.objects.values());

  let stages = stageRows(stageViews, false);
  let processes = processRows(processViews, false, fullTail);
  const fixed = () => stages.length + countProcessLines(processes) + progress.length + problems.length + (info ? 1 : 0);
  const treeSize = model.objects.size;

  // Give up detail in this order: finished stages, healthy processes, log tail length.
  if (fixed() + treeSize > budget) stages = stageRows(stageViews, true);
  if (fixed() + treeSize > budget) processes = processRows(processViews, true, fullTail);
  if (fixed() + treeSize > budget) processes = processRows(processViews, true, shortTail);

  const tree = treeRows(roots, Math.max(minTreeRows, budget - fixed()));
  return { stages, processes, progress, tree, problems, ...(info ? { info } : {}) };
}

function stageRows(stages: StageView[], collapseFinished: boolean): StageRow[] {
  if (!collapseFinished) return stages.map((stage) => ({ kind: 'stage', stage }));
  const finished = stages.filter((s) => s.state === 'succeeded' || s.state === 'skipped');
  if (finished.length < 2) return stages.map((stage) => ({ kind: 'stage', stage }));
  // Wall-clock span, not a sum: stages nest (controlplane/etcd runs inside controlplane).
  const ran = finished.filter((s) => s.state === 'succeeded');
  const durationMs = ran.length ? Math.max(...ran.map((s) => s.startedAt + (s.durationMs ?? 0))) - Math.min(...ran.map((s) => s.startedAt)) : 0;
  const rows: StageRow[] = [{ kind: 'finished', count: finished.length, durationMs }];
  for (const stage of stages) if (!finished.includes(stage)) rows.push({ kind: 'stage', stage });
  return rows;
}

export function isTroubled(p: ProcessView): boolean {
  return p.state === 'exited' || p.state === 'restarting' || p.state === 'failed';
}

function processRows(processes: ProcessView[], compactHealthy: boolean, tailLines: number): ProcessRow[] {
  const row = (process: ProcessView): ProcessRow => ({ kind: 'process', process, tail: isTroubled(process) ? (process.logTail ?? []).slice(-tailLines) : [] });
  if (!compactHealthy) return processes.map(row);
  const healthy = processes.filter((p) => p.state === 'ready');
  if (healthy.length < 2) return processes.map(row);
  return [{ kind: 'healthy', names: healthy.map((p) => p.name) }, ...processes.filter((p) => p.state !== 'ready').map(row)];
}

/** Lines a process row takes: itself, its log tail, and the log file of a troubled one. */
function countProcessLines(rows: ProcessRow[]): number {
  let lines = 0;
  for (const r of rows) lines += r.kind === 'healthy' ? 1 : 1 + r.tail.length + (isTroubled(r.process) && r.process.logFile ? 1 : 0);
  return lines;
}

/**
 * The object tree flattened to rows with box-drawing branches. When it does not fit,
 * ready leaves (machines, mostly) fold into one row per parent, then the rest is cut
 * with a count of what is not shown.
 */
export function treeRows(roots: TreeNode[], limit: number): TreeRow[] {
  let rows = flatten(roots, false);
  // Blocking conditions are what a user waits on: on their own rows, they are not cut
  // off by a narrow terminal. That needs a row each, so it is the first thing given up.
  const blocked = rows.filter((r) => r.kind === 'object' && r.object.blocking !== undefined).length;
  if (rows.length + blocked <= limit) return rows.map((r) => (r.kind === 'object' && r.object.blocking ? { ...r, blockingBelow: true } : r));
  if (rows.length > limit) rows = flatten(roots, true);
  if (rows.length <= limit) return rows;
  const shown = rows.slice(0, Math.max(0, limit - 1));
  const hidden = rows.slice(shown.length);
  let count = 0;
  let notReady = 0;
  for (const r of hidden) {
    if (r.kind === 'object') {
      count++;
      if (!r.object.ready) notReady++;
    } else if (r.kind === 'readyGroup') {
      count += r.count;
    }
  }
  return [...shown, { kind: 'more', count, notReady }];
}

function flatten(roots: TreeNode[], foldReadyLeaves: boolean): TreeRow[] {
  const rows: TreeRow[] = [];
  const walk = (nodes: TreeNode[], indent: string, isRoot: boolean, parent: ObjectView | undefined) => {
    let entries: ({ node: TreeNode } | { group: TreeNode[] })[] = nodes.map((node) => ({ node }));
    if (foldReadyLeaves) {
      const readyLeaves = new Set(nodes.filter((n) => n.object.ready && n.children.length === 0));
      if (readyLeaves.size >= 2) {
        entries = [...nodes.filter((n) => !readyLeaves.has(n)).map((node) => ({ node })), { group: [...readyLeaves] }];
      }
    }
    entries.forEach((entry, i) => {
      const last = i === entries.length - 1;
      const branch = isRoot ? '' : `${indent}${last ? '└─ ' : '├─ '}`;
      if ('group' in entry) {
        const kinds = new Set(entry.group.map((n) => n.object.kind));
        rows.push({ kind: 'readyGroup', branch, count: entry.group.length, objectKind: kinds.size === 1 ? entry.group[0]!.object.kind : 'object' });
        return;
      }
      const object = entry.node.object;
      const childIndent = isRoot ? '' : `${indent}${last ? '   ' : '│  '}`;
      const gutter = `${childIndent}${entry.node.children.length ? '│ ' : '  '}`;
      rows.push({ kind: 'object', branch, object, showNamespace: object.namespace !== undefined && object.namespace !== parent?.namespace, gutter, blockingBelow: false });
      walk(entry.node.children, childIndent, false, object);
    });
  };
  walk(roots, '', true, undefined);
  return rows;
}

/** Elapsed time for a running clock: whole seconds, so it does not flicker. */
export function formatElapsed(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}
