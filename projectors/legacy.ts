// TEMPORARY (removed once every read model is converted): runs a projection written against the old
// one-event `apply` on the new batch runtime.
import type { Migration } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';
import { categoryOf, type AppendResult, type EventFilter, type RecordedEvent, type StreamAppend } from '../infra/event-store/port.ts';
import type { Consumer } from './runtime/consumer.ts';

export interface LegacyProjection {
  readonly name: string;
  readonly version: number;
  readonly tables: readonly string[];
  readonly migrations: Record<string, Migration>;
  readonly filter?: EventFilter;
  readonly onFailure?: { attempts: number; then: 'park' | 'stop' };
  apply(db: UntypedDb, event: RecordedEvent, context: { append(appends: StreamAppend[]): Promise<AppendResult[]> }): Promise<void>;
  applyBatch?(db: UntypedDb, events: RecordedEvent[], context: { append(appends: StreamAppend[]): Promise<AppendResult[]> }): Promise<void>;
}

class Everything extends Set<string> {
  override has(): boolean {
    return true;
  }
}

export function fromLegacy(old: LegacyProjection, kind: Consumer['kind'] = 'projection'): Consumer {
  const matches = (event: RecordedEvent) =>
    (!old.filter?.eventTypes || old.filter.eventTypes.includes(event.type)) &&
    (!old.filter?.categories || old.filter.categories.includes(categoryOf(event.stream)));
  return {
    kind,
    name: old.name,
    version: old.version,
    tables: old.tables,
    migrations: old.migrations,
    canHandle: new Everything(),
    ...(old.onFailure ? { onFailure: old.onFailure } : {}),
    async apply(db: UntypedDb, events, context) {
      const chosen = events.filter(matches);
      if (chosen.length === 0) return;
      if (old.applyBatch) return old.applyBatch(db, chosen, context);
      for (const event of chosen) await old.apply(db, event, context);
    },
  };
}
