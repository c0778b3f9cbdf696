import type { EventSink, ProvisionerEvent } from '../../src/events.js';

/** A sink that records every event, for tests to read back (by type with `ofType`). */
export class RecordingSink implements EventSink {
  readonly events: ProvisionerEvent[] = [];
  emit(event: ProvisionerEvent): void {
    this.events.push(event);
  }
  ofType<T extends ProvisionerEvent['type']>(type: T): Extract<ProvisionerEvent, { type: T }>[] {
    return this.events.filter((e): e is Extract<ProvisionerEvent, { type: T }> => e.type === type);
  }
}
