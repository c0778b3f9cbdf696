import { atLeast, type EventSink, type LogLevel, type ProvisionerEvent } from '../../events.js';
import type { Writer } from './plain.js';

/** `--output json`: every event as one JSON object per line on stdout, with a timestamp. */
export class JsonRenderer implements EventSink {
  constructor(
    private readonly out: Writer,
    private readonly minLevel: LogLevel = 'info',
    private readonly now: () => Date = () => new Date(),
  ) {}

  emit(event: ProvisionerEvent): void {
    if (event.type === 'log' && !atLeast(event.level, this.minLevel)) return;
    this.out.write(JSON.stringify({ time: this.now().toISOString(), ...event }) + '\n');
  }
}
