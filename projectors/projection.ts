import type { Kysely, Migration } from 'kysely';
import type { AppendResult, EventFilter, RecordedEvent, StreamAppend } from '../infra/event-store/port.ts';

/**
 * A read model: its tables (created by its migrations) and the handler that folds events into them.
 * The handler writes through a Kysely scoped to the generation's schema, so a rebuild writes the same code
 * into fresh tables while the live generation keeps serving.
 */
export interface Projection {
  /** Lowercase letters, digits and underscores; part of the generation's schema name. */
  readonly name: string;
  /** Bump when the handler's meaning changes: start-up then rebuilds from the log and swaps the result in. */
  readonly version: number;
  /** Tables readers use; each is exposed in `public` as a view on the live generation's table. */
  readonly tables: readonly string[];
  /** Applied in order, by name, against the generation's schema. Use the schema builder, not raw SQL names. */
  readonly migrations: Record<string, Migration>;
  /** Only events that match reach `apply`; the checkpoint still moves past the others. */
  readonly filter?: EventFilter;
  /** When an event keeps failing: park it and go on (default), or stop the projection. */
  readonly onFailure?: { attempts: number; then: 'park' | 'stop' };
  apply(db: Kysely<any>, event: RecordedEvent, context: ProjectionContext): Promise<void>;
  /** A whole batch at once, when the projection can do it in fewer round trips; the same effect as `apply` on each. */
  applyBatch?(db: Kysely<any>, events: RecordedEvent[], context: ProjectionContext): Promise<void>;
}

/** What a process manager may do besides writing its tables. */
export interface ProjectionContext {
  /**
   * Appends events as part of the batch: with the PostgreSQL store in the batch's own transaction, so the
   * events and the checkpoint that consumed their cause commit together (exactly once). Other stores append
   * at once; deterministic event ids then make a re-applied batch append nothing new.
   */
  append(appends: StreamAppend[]): Promise<AppendResult[]>;
}
