import type { EventSink, LogLevel, ProvisionerEvent } from '../../events.js';
import type { Writer } from './plain.js';

const levelRank: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** `--output json`: every event as one JSON object per line on stdout, with a timestamp. */
export class JsonRenderer implements EventSink {
  constructor(
    private readonly out: Writer,
    private readonly minLevel: LogLevel = 'info',
    private readonly now: () => Date = () => new Date(),
  ) {}

  emit(event: ProvisionerEvent): void {
    if (event.type === 'log' && levelRank[event.level] < levelRank[this.minLevel]) return;
    this.out.write(JSON.stringify({ time: this.now().toISOString(), ...event }) + '\n');
  }
}
