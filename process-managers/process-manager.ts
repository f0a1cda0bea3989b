import type { Kysely, Migration } from 'kysely';
import { withTableTypes } from '../infra/database.ts';
import type { BatchContext, Consumer, ConsumerInterest, Recorded } from '../projectors/runtime/consumer.ts';

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
  /** Which events of those types it needs, from what it keeps in memory (`ConsumerInterest`); all of them without one. */
  readonly interest?: () => ProcessManagerInterest<State, E>;
  readonly onFailure?: { attempts: number; then: 'park' | 'stop' };
  /** Reacts to a batch (log order, never empty); the same effect as reacting to each event in order. */
  handle(db: Kysely<State>, events: readonly Recorded<E>[], context: BatchContext): Promise<void>;
}

/** `ConsumerInterest`, typed by the process manager's tables and events. */
export interface ProcessManagerInterest<State, E extends { type: string; data: unknown }> {
  load(db: Kysely<State>): Promise<void>;
  wants(event: Recorded<E>): boolean;
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
    ...(definition.interest ? { interest: typedInterest(definition.interest) } : {}),
    // The runtime hands over only events whose type is in `canHandle`, so the narrowing holds.
    apply: (db, events, context) => definition.handle(withTableTypes<State>(db), events as readonly Recorded<E>[], context),
  };
}

function typedInterest<State, E extends { type: string; data: unknown }>(make: () => ProcessManagerInterest<State, E>): () => ConsumerInterest {
  return () => {
    const interest = make();
    return {
      load: (db) => interest.load(withTableTypes<State>(db)),
      // Asked only about events whose type is in `canHandle`, as `apply` is.
      wants: (event) => interest.wants(event as Recorded<E>),
    };
  };
}
