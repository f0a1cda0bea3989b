import type { Migration } from 'kysely';
import type { UntypedDb } from '../../infra/database.ts';
import type { AppendResult, RecordedEvent, StreamAppend } from '../../infra/event-store/port.ts';
import type { DueJob } from '../../infra/jobs.ts';

/**
 * What the projector runtime drives, type-erased: a read model (`projection`) or a process manager. Both
 * consume the ordered log in batches and commit their writes with their checkpoint in one transaction;
 * they differ in what they may do (a projection writes its own tables only; a process manager also appends
 * events and schedules jobs) and in what they expose (a projection's tables become views in `public`; a
 * process manager's state is private).
 */
export interface Consumer {
  readonly kind: 'projection' | 'process-manager';
  /** Lowercase letters, digits and underscores; part of the generation's schema name. */
  readonly name: string;
  /** Bump when the meaning changes: start-up then builds a new generation from the log and swaps it in. */
  readonly version: number;
  /** Tables exposed to readers as views in `public` (none for a process manager). */
  readonly tables: readonly string[];
  /**
   * Tables a building generation only inserts into (never updates or deletes a row; `on conflict do nothing`
   * at most), batch by batch or once when its staging is folded: a rebuild keeps them logged while it fills
   * them (see `unlogBuild`).
   */
  readonly loggedWhileBuilding?: readonly string[];
  /** What a building generation of a read model may defer to its end (see `BuildStaging`). */
  readonly staging?: BuildStaging;
  /** Applied in order, by name, against the generation's schema. */
  readonly migrations: Record<string, Migration>;
  /** The event types it handles; the runtime hands it nothing else (the checkpoint still moves past the rest). */
  readonly canHandle: ReadonlySet<string>;
  /**
   * A finer filter than `canHandle`, kept in memory by each worker (see `ConsumerInterest`). Without one, every
   * event of a handled type is handed over.
   */
  readonly interest?: () => ConsumerInterest;
  /** When an event keeps failing: park it and go on (default), or stop. */
  readonly onFailure?: { attempts: number; then: 'park' | 'stop' };
  /**
   * Applies a batch: events in log order, every one of a type in `canHandle`, never empty. Must have the
   * same effect as applying them one at a time in order (the runtime does that to find a poison event).
   * `db` is scoped to the generation's schema and runs in the batch's transaction.
   */
  apply(db: UntypedDb, events: readonly RecordedEvent[], context: BatchContext): Promise<void>;
}

/**
 * Which events of a handled type a consumer needs, told from what it keeps in memory: a process manager that
 * acts only for organisations with some configuration passes over the others' events without a transaction
 * (a page of nothing else for it moves its checkpoint with the idle consumers'). `load` reads what it keeps
 * from the generation's own tables each time the worker reads its checkpoint; `wants` is then asked about
 * every event of a handled type past that checkpoint, in log order, before any of them is applied, and may
 * learn from it (an event that configures an organisation). It must never decline an event whose application
 * would change anything; accepting one that changes nothing only costs the batch.
 */
export interface ConsumerInterest {
  load(db: UntypedDb): Promise<void>;
  wants(event: RecordedEvent): boolean;
}

/**
 * Tables only a building generation has, where its batches put what they would otherwise merge into the read
 * model's tables at once (an upsert that adds to a row many batches touch): appended rows, no index. They are
 * created with the generation (unlogged: a crash wipes them with the rest of the build), and folded into the
 * read model's tables in the transaction that makes the generation durable, which then drops them. A batch
 * knows it may use them from `BatchContext.staging`; a generation started without them (by an older version
 * of the code) never has them, and its batches merge as live ones do. A staging of no tables is always in
 * place: its fold must then derive what it defers from the read model's own rows alone.
 */
export interface BuildStaging {
  /** None when what a batch defers derives from rows it writes anyway (the fold then computes it from them). */
  readonly tables: readonly string[];
  /** Creates the tables, against the generation's schema. */
  create(db: UntypedDb): Promise<void>;
  /** Merges their rows into the read model's tables, against the generation's schema (the runtime drops them after). */
  fold(db: UntypedDb): Promise<void>;
}

/** What the runtime offers a batch besides its tables. */
export interface BatchContext {
  /** The generation is building and its `BuildStaging` tables are in place: the batch may write to them. */
  readonly staging: boolean;
  /**
   * Appends events as part of the batch: with the PostgreSQL store in the batch's own transaction, so the
   * events and the checkpoint that consumed their cause commit together (exactly once). Other stores append
   * at once; deterministic event ids then make a re-applied batch append nothing new.
   */
  append(appends: StreamAppend[]): Promise<AppendResult[]>;
  /** Records due work in `public.scheduled_jobs` in the batch's transaction (a deterministic id schedules once). */
  schedule(job: DueJob): Promise<void>;
}

/**
 * A domain event union (`{type, data}`) as the log records it: `switch (event.type)` narrows `event.data`.
 */
export type Recorded<E extends { type: string; data: unknown }> = E extends unknown ? RecordedEvent<E['type'], E['data']> : never;
