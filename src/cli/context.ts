import type { EventSink } from '../events.js';

/** How results and events are rendered. Default: `text` (ink on a TTY, plain lines otherwise). */
export type OutputMode = 'text' | 'json';

/** What every command handler receives: where to send events and when to stop. */
export interface CommandContext {
  sink: EventSink;
  /** Aborted on the first SIGINT/SIGTERM; services stop cleanly and leave state resumable. */
  signal: AbortSignal;
  output: OutputMode;
}
