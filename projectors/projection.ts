import type { Kysely, Migration } from 'kysely';
import { withTableTypes } from '../infra/database.ts';
import type { LoggedEvent } from '../infra/event-store/port.ts';
import type { BuildStaging, Consumer } from './runtime/consumer.ts';

/**
 * An event as a read model sees it: a domain event union as the log records it, without its metadata (who
 * and why: what process managers and replays look at). A runner of read models only leaves it unread.
 */
export type Recorded<E extends { type: string; data: unknown }> = E extends unknown ? LoggedEvent<E['type'], E['data']> : never;

/**
 * A read model: its tables (declared as a TypeScript interface beside its migrations, `Kysely<Tables>`),
 * the event types it handles, and a set-based `apply` that folds a whole batch in memory and writes the
 * result with few statements (multi-row upserts, `unnest`), in the batch's transaction with its checkpoint.
 * The handler writes through a Kysely scoped to the generation's schema, so a rebuild writes the same code
 * into fresh tables while the live generation keeps serving.
 */
export interface ProjectionDefinition<Tables, E extends { type: string; data: unknown }> {
  /** Lowercase letters, digits and underscores; part of the generation's schema name. */
  readonly name: string;
  /** Bump when the handler's meaning changes: start-up then rebuilds from the log and swaps the result in. */
  readonly version: number;
  /** Tables readers use; each is exposed in `public` as a view on the live generation's table. */
  readonly tables: readonly (keyof Tables & string)[];
  /**
   * Tables a building generation only inserts into (no update or delete, `on conflict do nothing` at most),
   * batch by batch or once when its `staging` is folded: a rebuild writes them to the WAL as it fills them,
   * which costs less than rewriting them whole once it is done.
   */
  readonly loggedWhileBuilding?: readonly (keyof Tables & string)[];
  /**
   * Merges a rebuild may put off to its end (see `BuildStaging`): its batches append to these tables (declared
   * in `Tables` too, but created by `create`, not by a migration) when `apply`'s `staging` says they are in
   * place, and `fold` merges them as one batch would have, before the generation is made durable.
   */
  readonly staging?: {
    readonly tables: readonly (keyof Tables & string)[];
    create(db: Kysely<Tables>): Promise<void>;
    fold(db: Kysely<Tables>): Promise<void>;
  };
  /** Applied in order, by name, against the generation's schema. Use the schema builder, not raw SQL names. */
  readonly migrations: Record<string, Migration>;
  /** Only these event types reach `apply`. */
  readonly canHandle: readonly E['type'][];
  /** When an event keeps failing: park it and go on (default), or stop the projection. */
  readonly onFailure?: { attempts: number; then: 'park' | 'stop' };
  /**
   * Folds a batch (log order, never empty) into the tables. Must equal applying the events one at a time in
   * order: the runtime falls back to that to find and park a poison event.
   */
  apply(db: Kysely<Tables>, events: readonly Recorded<E>[], batch: { readonly staging: boolean }): Promise<void>;
}

export interface Projection extends Consumer {
  readonly kind: 'projection';
}

/** Types a read model's definition against its tables and events, and erases it for the runtime. */
export function defineProjection<Tables, E extends { type: string; data: unknown }>(definition: ProjectionDefinition<Tables, E>): Projection {
  return {
    kind: 'projection',
    name: definition.name,
    version: definition.version,
    tables: definition.tables,
    ...(definition.loggedWhileBuilding ? { loggedWhileBuilding: definition.loggedWhileBuilding } : {}),
    ...(definition.staging ? { staging: stagingOf(definition.staging) } : {}),
    migrations: definition.migrations,
    canHandle: new Set<string>(definition.canHandle),
    ...(definition.onFailure ? { onFailure: definition.onFailure } : {}),
    // The runtime hands over only events whose type is in `canHandle`, so the narrowing holds (a read model never reads the metadata).
    apply: (db, events, context) =>
      definition.apply(withTableTypes<Tables>(db), events as readonly LoggedEvent[] as readonly Recorded<E>[], { staging: context.staging }),
  };
}

function stagingOf<Tables>(staging: NonNullable<ProjectionDefinition<Tables, never>['staging']>): BuildStaging {
  return {
    tables: staging.tables,
    create: (db) => staging.create(withTableTypes<Tables>(db)),
    fold: (db) => staging.fold(withTableTypes<Tables>(db)),
  };
}
