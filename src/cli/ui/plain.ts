import { atLeast, type EventSink, type LogLevel, type ProvisionerEvent } from '../../events.js';

export interface Writer {
  write(chunk: string): unknown;
}

/** Formats one event as a single human line, or undefined when it has nothing to say. */
export function formatPlain(event: ProvisionerEvent): string | undefined {
  switch (event.type) {
    case 'log': {
      const fields = event.fields
        ? ' ' + Object.entries(event.fields).map(([k, v]) => `${k}=${v}`).join(' ')
        : '';
      const prefix = event.level === 'info' ? '' : `${event.level.toUpperCase()} `;
      return `${prefix}${event.message}${fields}`;
    }
    case 'progress': {
      if (!event.done) return undefined;
      return `${event.label}: done${event.total !== undefined ? ` (${formatAmount(event.total, event.unit)})` : ''}`;
    }
    case 'stage': {
      const took = event.durationMs !== undefined ? ` in ${formatDuration(event.durationMs)}` : '';
      return `stage ${event.stage} ${event.state}${took}${event.message ? `: ${event.message}` : ''}`;
    }
    case 'process': {
      const ports = event.ports ? ' ' + Object.entries(event.ports).map(([k, v]) => `${k}=${v}`).join(' ') : '';
      const pid = event.pid !== undefined ? ` pid=${event.pid}` : '';
      const exit = event.exitCode !== undefined || event.signal ? ` exit=${event.signal ?? event.exitCode}` : '';
      const lines = [`${event.name} ${event.state}${pid}${ports}${exit}${event.message ? `: ${event.message}` : ''}`];
      if (event.logTail?.length) lines.push(...event.logTail.map((l) => `  | ${l}`));
      if (event.logFile && (event.state === 'failed' || event.state === 'exited')) lines.push(`  log: ${event.logFile}`);
      return lines.join('\n');
    }
    case 'object': {
      const ns = event.namespace ? `${event.namespace}/` : '';
      const blocking = event.blocking
        ? ` waiting on ${event.blocking.condition}${event.blocking.reason ? ` (${event.blocking.reason})` : ''}${event.blocking.message ? `: ${event.blocking.message}` : ''}`
        : '';
      return `${event.kind} ${ns}${event.name} ${event.ready ? 'ready' : (event.phase ?? 'pending')}${blocking}`;
    }
    case 'result':
      return undefined;
  }
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes}m${Math.round((ms % 60_000) / 1000)}s`;
}

export function formatAmount(amount: number, unit?: string): string {
  if (unit === 'bytes') {
    if (amount >= 1 << 20) return `${(amount / (1 << 20)).toFixed(1)} MiB`;
    if (amount >= 1 << 10) return `${(amount / (1 << 10)).toFixed(1)} KiB`;
    return `${amount} B`;
  }
  return unit ? `${amount} ${unit}` : String(amount);
}

/**
 * Plain-line renderer for pipes and CI logs: a timestamped line on stderr only when
 * something changes; results as-is on stdout.
 */
export class PlainRenderer implements EventSink {
  private lastObjectLine = new Map<string, string>();

  constructor(
    private readonly out: Writer,
    private readonly err: Writer,
    private readonly minLevel: LogLevel = 'info',
    private readonly now: () => Date = () => new Date(),
  ) {}

  emit(event: ProvisionerEvent): void {
    if (event.type === 'result') {
      this.out.write(event.text.endsWith('\n') ? event.text : `${event.text}\n`);
      return;
    }
    if (event.type === 'log' && !atLeast(event.level, this.minLevel)) return;
    const line = formatPlain(event);
    if (line === undefined) return;
    if (event.type === 'object') {
      // Only changes: an object repeating its state adds nothing to a log.
      const key = `${event.kind}/${event.namespace ?? ''}/${event.name}`;
      if (this.lastObjectLine.get(key) === line) return;
      this.lastObjectLine.set(key, line);
    }
    const stamp = this.now().toISOString().slice(11, 19);
    this.err.write(line.split('\n').map((l, i) => (i === 0 ? `${stamp} ${l}` : `         ${l}`)).join('\n') + '\n');
  }
}
