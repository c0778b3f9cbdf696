/**
 * What stays on the terminal after the live view is gone: a table of stage timings,
 * then whatever still needs attention (objects not ready, processes that exited, the
 * warnings and errors seen), then the last info message.
 */
import { formatDuration } from '../plain.js';
import { isTroubled } from './layout.js';
import type { LiveModel } from './model.js';
import { formatTable } from '../../../text-table.js';

/** Not-ready objects listed by name in the summary; the rest are counted. */
const listedObjects = 10;

export function formatSummary(model: LiveModel, now: number): string {
  const sections: string[][] = [];

  if (model.stages.size > 0) {
    const rows: string[][] = [];
    let first = Infinity;
    let last = -Infinity;
    for (const s of model.stages.values()) {
      const ended = s.durationMs !== undefined ? s.startedAt + s.durationMs : now;
      if (s.state !== 'skipped') {
        first = Math.min(first, s.startedAt);
        last = Math.max(last, ended);
      }
      const result = s.state === 'started' ? 'unfinished' : s.state;
      const took = s.state === 'skipped' ? '-' : formatDuration(ended - s.startedAt);
      rows.push([s.stage, result, took, s.message ?? '']);
    }
    if (Number.isFinite(first)) rows.push(['total (wall clock)', '', formatDuration(last - first), '']);
    sections.push(formatTable(['STAGE', 'RESULT', 'TIME', ''], rows));
  }

  if (model.objects.size > 0) {
    const objects = [...model.objects.values()];
    const notReady = objects.filter((o) => !o.ready);
    const lines = [`Objects: ${objects.length - notReady.length}/${objects.length} ready`];
    for (const o of notReady.slice(0, listedObjects)) {
      const b = o.blocking;
      const blocking = b ? `: waiting on ${b.condition}${b.reason ? ` (${b.reason})` : ''}${b.message ? `: ${b.message}` : ''}` : '';
      lines.push(`  ${o.kind} ${o.namespace ? `${o.namespace}/` : ''}${o.name} ${o.phase ?? 'Pending'}${blocking}`);
    }
    if (notReady.length > listedObjects) lines.push(`  … and ${notReady.length - listedObjects} more not ready`);
    sections.push(lines);
  }

  const troubled = [...model.processes.values()].filter(isTroubled);
  if (troubled.length > 0) {
    const lines: string[] = [];
    for (const p of troubled) {
      const exit = p.signal || p.exitCode !== undefined ? ` (exit ${p.signal ?? p.exitCode})` : '';
      lines.push(`Process ${p.name} ${p.state}${exit}${p.message ? `: ${p.message}` : ''}`);
      for (const l of p.logTail ?? []) lines.push(`  │ ${l}`);
      if (p.logFile) lines.push(`  log: ${p.logFile}`);
    }
    sections.push(lines);
  }

  if (model.problems.length > 0) {
    const lines = model.droppedProblems > 0 ? [`(${model.droppedProblems} earlier warnings not kept)`] : [];
    for (const l of model.problems) lines.push(`${l.level === 'error' ? 'ERROR' : 'WARN'} ${l.repeats ? `(${l.repeats}×) ` : ''}${l.text}`);
    sections.push(lines);
  }

  if (model.lastInfo) sections.push([model.lastInfo.text]);

  return sections.length ? sections.map((lines) => lines.join('\n')).join('\n\n') + '\n' : '';
}

