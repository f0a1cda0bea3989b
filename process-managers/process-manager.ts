import type { Kysely, Migration } from 'kysely';
import { withTableTypes } from '../infra/database.ts';
import type { BatchContext, Consumer, Recorded } from '../projectors/runtime/consumer.ts';

export type { BatchContext, Recorded } from '../projectors/runtime/consumer.ts';

/**
 * A process manager reacts to events: it appends events (in the batch's transaction with the PostgreSQL
 * store, so a cause is acted on exactly once) or schedules jobs. It may keep private state tables (its own
 * schema, never exposed to readers) and has no read model.
 */
export interface ProcessManagerDefinition<State, E extends { type: string; data: unknown }> {
  readonly name: string;
  readonly version: number;
  /** Its private state tables, applied against its own schema. */
  readonly migrations: Record<string, Migration>;
  readonly canHandle: readonly E['type'][];
  readonly onFailure?: { attempts: number; then: 'park' | 'stop' };
  /** Reacts to a batch (log order, never empty); the same effect as reacting to each event in order. */
  handle(db: Kysely<State>, events: readonly Recorded<E>[], context: BatchContext): Promise<void>;
}

export interface ProcessManager extends Consumer {
  readonly kind: 'process-manager';
  readonly tables: readonly [];
}

export function defineProcessManager<State, E extends { type: string; data: unknown }>(definition: ProcessManagerDefinition<State, E>): ProcessManager {
  return {
    kind: 'process-manager',
    name: definition.name,
    version: definition.version,
    tables: [],
    migrations: definition.migrations,
    canHandle: new Set<string>(definition.canHandle),
    ...(definition.onFailure ? { onFailure: definition.onFailure } : {}),
    // The runtime hands over only events whose type is in `canHandle`, so the narrowing holds.
    apply: (db, events, context) => definition.handle(withTableTypes<State>(db), events as readonly Recorded<E>[], context),
  };
}
