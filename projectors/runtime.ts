import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { Migrator, sql, type Kysely, type Migration } from 'kysely';
import type { Database, DedicatedSession } from '../infra/database.ts';
import { quoteIdentifier } from '../infra/database.ts';
import { isAtOrAfter, type EventStore, type Position, type RecordedEvent, type SubscriptionBatch } from '../infra/event-store/port.ts';
import type { Logger } from '../infra/logging.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import type { Consumer as Projection, BatchContext as ProjectionContext } from './runtime/consumer.ts';
import { scheduleJob } from '../infra/jobs.ts';

/**
 * The projector runtime (DESIGN §3). Each projection lives in generations: schemas `rm_<name>_g<n>` with
 * a row in `projection_generations` holding status, checkpoint and lease. The live generation serves
 * readers through views in `public`; a rebuild fills a `building` generation from position zero and swaps
 * it in atomically once it has caught up.
 */
export const projectionRuntimeMigrations: Record<string, Migration> = {
  '0001_projection_runtime': {
    async up(db) {
      await db.schema
        .createTable('projection_generations')
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('generation', 'integer', (c) => c.notNull())
        .addColumn('version', 'integer', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('building', 'live', 'retired')`))
        .addColumn('checkpoint', 'text')
        .addColumn('lease_owner', 'text')
        .addColumn('lease_until', 'timestamptz')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn('live_since', 'timestamptz')
        .addPrimaryKeyConstraint('projection_generations_pk', ['name', 'generation'])
        .execute();
      await sql`create unique index projection_one_live on projection_generations (name) where status = 'live'`.execute(db);
      await sql`create unique index projection_one_building on projection_generations (name) where status = 'building'`.execute(db);
      await db.schema
        .createTable('projection_parked')
        .addColumn('id', 'bigserial', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('generation', 'integer', (c) => c.notNull())
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('event_position', 'text', (c) => c.notNull())
        .addColumn('stream', 'text', (c) => c.notNull())
        .addColumn('event_type', 'text', (c) => c.notNull())
        .addColumn('error', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('parked_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
      await db.schema.createIndex('projection_parked_by_name').on('projection_parked').columns(['name', 'generation']).execute();
    },
  },
};

export interface GenerationRow {
  name: string;
  generation: number;
  version: number;
  status: 'building' | 'live' | 'retired';
  checkpoint: Position | null;
  lease_owner: string | null;
  lease_until: Date | null;
  last_error: string | null;
}

export function schemaOf(name: string, generation: number): string {
  return `rm_${name}_g${generation}`;
}

/** Creates the generation's schema and brings its tables up to the projection's migrations. */
async function migrateGeneration(db: Kysely<any>, projection: Projection, generation: number): Promise<void> {
  const schema = schemaOf(projection.name, generation);
  await db.schema.createSchema(schema).ifNotExists().execute();
  const scoped = Object.fromEntries(
    Object.entries(projection.migrations).map(([name, migration]) => [name, { up: (migrating: Kysely<any>) => migration.up(migrating.withSchema(schema)) }]),
  );
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => scoped },
    migrationTableSchema: schema,
  });
  // The Migrator looks at every schema of the database; another projection's swap dropping its retired
  // schema at that moment makes the look fail ("schema ... does not exist"). Looking again is safe.
  for (let attempt = 1; ; attempt++) {
    const { error } = await migrator.migrateToLatest();
    if (!error) return;
    if (attempt >= 5 || !/schema "[^"]+" does not exist/.test(String((error as Error).message))) throw error;
  }
}

/** Points the public views at a generation's tables. Run inside the transaction that makes it live. */
async function exposeGeneration(trx: Kysely<any>, projection: Projection, generation: number): Promise<void> {
  const schema = quoteIdentifier(schemaOf(projection.name, generation));
  for (const table of projection.tables) {
    const view = quoteIdentifier(table);
    await sql.raw(`drop view if exists public.${view}`).execute(trx);
    await sql.raw(`create view public.${view} as select * from ${schema}.${view}`).execute(trx);
  }
}

/**
 * Brings every projection to a servable state at start-up: a first generation where there is none, the
 * live generation's pending migrations, and a rebuild where the code's version is newer than the live one.
 */
export async function prepareProjections(db: Kysely<any>, projections: readonly Projection[]): Promise<void> {
  for (const projection of projections) {
    const live = await liveGeneration(db, projection.name);
    if (!live) {
      await migrateGeneration(db, projection, 1);
      await db.transaction().execute(async (trx) => {
        const inserted = await trx
          .insertInto('projection_generations')
          .values({ name: projection.name, generation: 1, version: projection.version, status: 'live', live_since: sql`now()` })
          .onConflict((oc) => oc.doNothing())
          .returning('generation')
          .executeTakeFirst();
        if (inserted) await exposeGeneration(trx, projection, 1);
      });
    } else if (live.version === projection.version) {
      await migrateGeneration(db, projection, live.generation);
      await db.transaction().execute((trx) => exposeGeneration(trx, projection, live.generation));
    } else if (live.version < projection.version) {
      await startRebuild(db, projection);
    }
  }
}

export async function liveGeneration(db: Kysely<any>, name: string): Promise<GenerationRow | undefined> {
  return (await db.selectFrom('projection_generations').selectAll().where('name', '=', name).where('status', '=', 'live').executeTakeFirst()) as
    GenerationRow | undefined;
}

/** Starts (or finds) a `building` generation that will replace the live one once it has caught up. */
export async function startRebuild(db: Kysely<any>, projection: Projection): Promise<GenerationRow> {
  const building = (await db
    .selectFrom('projection_generations')
    .selectAll()
    .where('name', '=', projection.name)
    .where('status', '=', 'building')
    .executeTakeFirst()) as GenerationRow | undefined;
  if (building) return building;
  const { max } = (await db
    .selectFrom('projection_generations')
    .select((eb) => eb.fn.max<number>('generation').as('max'))
    .where('name', '=', projection.name)
    .executeTakeFirstOrThrow()) as { max: number | null };
  const generation = (max ?? 0) + 1;
  await sql.raw(`drop schema if exists ${quoteIdentifier(schemaOf(projection.name, generation))} cascade`).execute(db);
  await migrateGeneration(db, projection, generation);
  await db
    .insertInto('projection_generations')
    .values({ name: projection.name, generation, version: projection.version, status: 'building' })
    .onConflict((oc) => oc.doNothing())
    .execute();
  return startRebuild(db, projection);
}

export interface ProjectionStatus {
  name: string;
  generation: number;
  version: number;
  status: GenerationRow['status'];
  checkpoint: Position | null;
  eventsBehind: number;
  secondsBehind: number;
  parked: number;
  leaseOwner: string | null;
  lastError: string | null;
}

export async function projectionStatus(db: Kysely<any>, store: EventStore): Promise<ProjectionStatus[]> {
  const rows = (await db
    .selectFrom('projection_generations')
    .selectAll()
    .where('status', '<>', 'retired')
    .orderBy('name')
    .orderBy('generation')
    .execute()) as GenerationRow[];
  const parked = await db
    .selectFrom('projection_parked')
    .select(['name', 'generation', (eb) => eb.fn.countAll<string>().as('count')])
    .groupBy(['name', 'generation'])
    .execute();
  return Promise.all(
    rows.map(async (row) => {
      const eventsBehind = await store.countAfter(row.checkpoint);
      const next = eventsBehind > 0 ? (await store.readAll({ after: row.checkpoint, limit: 1 })).events[0] : undefined;
      return {
        name: row.name,
        generation: row.generation,
        version: row.version,
        status: row.status,
        checkpoint: row.checkpoint,
        eventsBehind,
        secondsBehind: next ? Math.max(0, (Date.now() - next.createdAt.getTime()) / 1000) : 0,
        parked: Number(parked.find((p) => p.name === row.name && p.generation === row.generation)?.count ?? 0),
        leaseOwner: row.lease_owner,
        lastError: row.last_error,
      };
    }),
  );
}

/**
 * Read-your-writes: resolves true once every named projection's live checkpoint is at or past `position`,
 * false if that takes longer than `timeoutMs`.
 */
export async function waitForProjections(db: Kysely<any>, names: readonly string[], position: Position, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    const rows = await db
      .selectFrom('projection_generations')
      .select(['name', 'checkpoint'])
      .where('name', 'in', [...names])
      .where('status', '=', 'live')
      .execute();
    const reached = names.every((name) => {
      const checkpoint = rows.find((row) => row.name === name)?.checkpoint as string | null | undefined;
      return checkpoint != null && checkpoint >= position;
    });
    if (reached) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(1, deadline - Date.now()))));
  }
}

class LeaseLost extends Error {}

export interface RuntimeOptions {
  batchSize?: number;
  leaseMs?: number;
  /** How often the runner looks for generations to work on (a rebuild requested elsewhere). */
  scanIntervalMs?: number;
  retryDelayMs?: number;
  /** Called inside a batch's transaction after its events were applied and before its checkpoint commits. */
  onBatchApplied?: (name: string, generation: number, batch: SubscriptionBatch) => Promise<void> | void;
}

/**
 * Runs a worker for every generation of the given projections that this code can drive (live or
 * building, at the code's version). Two runners, in one process or many, never both apply a batch: the
 * checkpoint moves by compare-and-set in the batch's own transaction, behind an advisory lock and a lease.
 */
export class ProjectionRunner {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly workers = new Map<string, GenerationWorker>();
  private readonly stopped = new AbortController();
  private scanning: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly database: Database,
    private readonly store: EventStore,
    private readonly projections: readonly Projection[],
    private readonly logger: Logger,
    private readonly options: RuntimeOptions = {},
  ) {}

  async start(): Promise<void> {
    // Every worker listens for the stop (one per projection generation, and their sleeps): more than Node's default ten.
    setMaxListeners(0, this.stopped.signal);
    await this.scan();
    this.timer = setInterval(() => void this.scan(), this.options.scanIntervalMs ?? 1000);
  }

  /** Looks for generations without a worker here (a rebuild requested by the CLI, a swap) and starts them. */
  scan(): Promise<void> {
    this.scanning ??= this.scanOnce().finally(() => (this.scanning = null));
    return this.scanning;
  }

  private async scanOnce(): Promise<void> {
    if (this.stopped.signal.aborted) return;
    const rows = (await this.database.db
      .selectFrom('projection_generations')
      .selectAll()
      .where('status', 'in', ['live', 'building'])
      .execute()
      .catch((error) => {
        this.logger.warn({ err: error }, 'projection scan failed');
        return [];
      })) as GenerationRow[];
    for (const row of rows) {
      if (this.stopped.signal.aborted) return;
      const projection = this.projections.find((p) => p.name === row.name);
      const key = `${row.name}:${row.generation}`;
      if (!projection || projection.version !== row.version || this.workers.has(key)) continue;
      const worker = new GenerationWorker(this.database, this.store, projection, row.generation, this.owner, this.logger, this.options);
      this.workers.set(key, worker);
      void worker.run(this.stopped.signal).finally(() => this.workers.delete(key));
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.stopped.abort();
    await this.scanning;
    await Promise.all([...this.workers.values()].map((worker) => worker.finished));
  }
}

class GenerationWorker {
  private done!: () => void;
  readonly finished = new Promise<void>((resolve) => (this.done = resolve));
  private readonly schema: string;
  /** Until the row says otherwise: a live generation finds out on its first batch and stops asking. */
  private building = true;

  constructor(
    private readonly database: Database,
    private readonly store: EventStore,
    private readonly projection: Projection,
    private readonly generation: number,
    private readonly owner: string,
    private readonly logger: Logger,
    private readonly options: RuntimeOptions,
  ) {
    this.schema = schemaOf(projection.name, generation);
  }

  private get db(): Kysely<any> {
    return this.database.db;
  }

  private get leaseMs(): number {
    return this.options.leaseMs ?? 15_000;
  }

  async run(stopped: AbortSignal): Promise<void> {
    const log = this.logger.child({ projection: this.projection.name, generation: this.generation });
    try {
      await this.work(stopped, log);
    } catch (error) {
      log.error({ err: error }, 'projection worker stopped');
    } finally {
      this.done();
    }
  }

  private async work(stopped: AbortSignal, log: Logger): Promise<void> {
    while (!stopped.aborted) {
      const row = await this.row();
      if (!row || row.status === 'retired' || row.version !== this.projection.version) return;
      const lock = await this.acquire();
      if (!lock) {
        await sleep(Math.min(this.leaseMs / 3, 1000), stopped);
        continue;
      }
      try {
        await this.follow(stopped, log);
      } catch (error) {
        if (!(error instanceof LeaseLost)) {
          log.error({ err: error }, 'projection worker failed; retrying');
          await this.recordError(error);
          await sleep(this.options.retryDelayMs ?? 1000, stopped);
        }
      } finally {
        await lock.release();
      }
    }
  }

  /** Session advisory lock where the database has sessions, then the lease row (which also names the owner). */
  private async acquire(): Promise<{ release(): Promise<void> } | null> {
    let session: DedicatedSession | null = null;
    try {
      session = await this.database.openDedicatedSession();
      if (session) {
        const [row] = await session.query<{ locked: boolean }>('select pg_try_advisory_lock(hashtextextended($1, 0)) as locked', [this.schema]);
        if (!row?.locked) {
          await session.close();
          return null;
        }
      }
      const leased = await this.renewLease(this.db);
      if (!leased) {
        await session?.close();
        return null;
      }
    } catch (error) {
      await session?.close();
      throw error;
    }
    const heartbeat = setInterval(() => void this.renewLease(this.db).catch(() => undefined), this.leaseMs / 3);
    return {
      release: async () => {
        clearInterval(heartbeat);
        await this.db
          .updateTable('projection_generations')
          .set({ lease_owner: null, lease_until: null })
          .where('name', '=', this.projection.name)
          .where('generation', '=', this.generation)
          .where('lease_owner', '=', this.owner)
          .execute()
          .catch(() => undefined);
        await session?.close();
      },
    };
  }

  private async renewLease(db: Kysely<any>): Promise<boolean> {
    const result = await db
      .updateTable('projection_generations')
      .set({ lease_owner: this.owner, lease_until: sql`now() + ${`${this.leaseMs} milliseconds`}::interval` })
      .where('name', '=', this.projection.name)
      .where('generation', '=', this.generation)
      .where('status', '<>', 'retired')
      .where((eb) => eb.or([eb('lease_owner', 'is', null), eb('lease_owner', '=', this.owner), eb('lease_until', '<', sql<Date>`now()`)]))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  private async follow(stopped: AbortSignal, log: Logger): Promise<void> {
    let checkpoint = (await this.row())?.checkpoint ?? null;
    const subscription = this.store.subscribe({ after: checkpoint, batchSize: this.options.batchSize ?? 500 });
    const onStop = () => void subscription.close();
    stopped.addEventListener('abort', onStop, { once: true });
    try {
      for await (const batch of subscription) {
        if (batch.checkpoint !== checkpoint) {
          await this.applyBatch(batch, checkpoint, log);
          checkpoint = batch.checkpoint;
        }
        if (this.building && (await this.readyToSwap(checkpoint, batch.caughtUp))) await this.swapIn(checkpoint, log);
        if (stopped.aborted) return;
      }
    } finally {
      stopped.removeEventListener('abort', onStop);
      await subscription.close();
    }
  }

  /** The batch and its checkpoint in one transaction; the compare-and-set comes first so a rival blocks, then loses. */
  private async applyBatch(batch: SubscriptionBatch, from: Position | null, log: Logger): Promise<void> {
    try {
      await this.db.transaction().execute(async (trx) => {
        await this.advance(trx, from, batch.checkpoint);
        const scoped = trx.withSchema(this.schema);
        const context = this.contextFor(trx);
        const events = batch.events.filter((event) => this.projection.canHandle.has(event.type));
        if (events.length > 0) await this.projection.apply(scoped, events, context);
        await this.options.onBatchApplied?.(this.projection.name, this.generation, batch);
      });
    } catch (error) {
      if (error instanceof LeaseLost) throw error;
      if (batch.events.length === 0) throw error;
      log.warn({ err: error }, 'batch failed; applying its events one by one');
      await this.applyOneByOne(batch, from, log);
    }
  }

  private contextFor(trx: Kysely<any>): ProjectionContext {
    const store = this.store;
    // One NOTIFY per transaction is enough to wake the subscribers at commit.
    let notified = false;
    return {
      append: async (appends) => {
        if (!(store instanceof PostgresEventStore)) return store.appendMultiple(appends);
        const results = await store.appendInTransaction(trx, appends, { notify: !notified });
        notified = true;
        return results;
      },
      schedule: (job) => scheduleJob(trx, job),
    };
  }

  private async applyOneByOne(batch: SubscriptionBatch, from: Position | null, log: Logger): Promise<void> {
    const policy = this.projection.onFailure ?? { attempts: 3, then: 'park' as const };
    let checkpoint = from;
    for (const event of batch.events) {
      let lastError: unknown;
      for (let attempt = 1; attempt <= policy.attempts; attempt++) {
        try {
          await this.db.transaction().execute(async (trx) => {
            await this.advance(trx, checkpoint, event.position);
            if (this.projection.canHandle.has(event.type)) await this.projection.apply(trx.withSchema(this.schema), [event], this.contextFor(trx));
          });
          lastError = undefined;
          break;
        } catch (error) {
          if (error instanceof LeaseLost) throw error;
          lastError = error;
          await sleep(25 * attempt);
        }
      }
      if (lastError !== undefined) {
        if (policy.then === 'stop') throw lastError;
        await this.park(event, checkpoint, lastError, policy.attempts, log);
      }
      checkpoint = event.position;
    }
    if (checkpoint !== batch.checkpoint) await this.db.transaction().execute((trx) => this.advance(trx, checkpoint, batch.checkpoint));
  }

  private async park(event: RecordedEvent, from: Position | null, error: unknown, attempts: number, log: Logger): Promise<void> {
    log.error({ err: error, eventId: event.id, eventType: event.type, stream: event.stream }, 'event parked after repeated failures');
    await this.db.transaction().execute(async (trx) => {
      await this.advance(trx, from, event.position);
      await trx
        .insertInto('projection_parked')
        .values({
          name: this.projection.name,
          generation: this.generation,
          event_id: event.id,
          event_position: event.position,
          stream: event.stream,
          event_type: event.type,
          error: error instanceof Error ? error.message : String(error),
          attempts,
        })
        .execute();
    });
  }

  private async advance(trx: Kysely<any>, from: Position | null, to: Position | null): Promise<void> {
    const result = await trx
      .updateTable('projection_generations')
      .set({ checkpoint: to, updated_at: sql`now()`, last_error: null, lease_until: sql`now() + ${`${this.leaseMs} milliseconds`}::interval` })
      .where('name', '=', this.projection.name)
      .where('generation', '=', this.generation)
      .where('status', '<>', 'retired')
      .where('lease_owner', '=', this.owner)
      .where(sql<boolean>`checkpoint is not distinct from ${from}`)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) throw new LeaseLost();
  }

  /**
   * A building generation may take over once it is at least as current as the live one: waiting for the
   * very head would never end under a write rate the rebuild cannot outrun, and readers never go back in time.
   */
  private async readyToSwap(checkpoint: Position | null, caughtUp: boolean): Promise<boolean> {
    const rows = (await this.db
      .selectFrom('projection_generations')
      .selectAll()
      .where('name', '=', this.projection.name)
      .where('status', 'in', ['live', 'building'])
      .execute()) as GenerationRow[];
    const me = rows.find((row) => row.generation === this.generation);
    if (me?.status !== 'building') return (this.building = false);
    const live = rows.find((row) => row.status === 'live');
    return caughtUp || !live || isAtOrAfter(checkpoint, live.checkpoint);
  }

  /** A building generation replaces the live one: status and views change in one transaction. */
  private async swapIn(checkpoint: Position | null, log: Logger): Promise<void> {
    const retired = await this.db.transaction().execute(async (trx) => {
      const rows = (await trx
        .selectFrom('projection_generations')
        .selectAll()
        .where('name', '=', this.projection.name)
        .where('status', 'in', ['live', 'building'])
        .forUpdate()
        .execute()) as GenerationRow[];
      const me = rows.find((row) => row.generation === this.generation);
      if (!me || me.status !== 'building' || me.checkpoint !== checkpoint || me.lease_owner !== this.owner) throw new LeaseLost();
      const live = rows.find((row) => row.status === 'live');
      if (live && !isAtOrAfter(checkpoint, live.checkpoint)) return false as const;
      if (live) {
        await trx
          .updateTable('projection_generations')
          .set({ status: 'retired', lease_owner: null, lease_until: null, updated_at: sql`now()` })
          .where('name', '=', this.projection.name)
          .where('generation', '=', live.generation)
          .execute();
      }
      await trx
        .updateTable('projection_generations')
        .set({ status: 'live', live_since: sql`now()`, updated_at: sql`now()` })
        .where('name', '=', this.projection.name)
        .where('generation', '=', this.generation)
        .execute();
      await exposeGeneration(trx, this.projection, this.generation);
      return live?.generation;
    });
    if (retired === false) return;
    this.building = false;
    log.info({ retired }, 'rebuilt generation is live');
    if (retired !== undefined) {
      await sql.raw(`drop schema if exists ${quoteIdentifier(schemaOf(this.projection.name, retired))} cascade`).execute(this.db);
    }
  }

  private async row(): Promise<GenerationRow | undefined> {
    return (await this.db
      .selectFrom('projection_generations')
      .selectAll()
      .where('name', '=', this.projection.name)
      .where('generation', '=', this.generation)
      .executeTakeFirst()) as GenerationRow | undefined;
  }

  private async recordError(error: unknown): Promise<void> {
    await this.db
      .updateTable('projection_generations')
      .set({ last_error: error instanceof Error ? error.message : String(error) })
      .where('name', '=', this.projection.name)
      .where('generation', '=', this.generation)
      .execute()
      .catch(() => undefined);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
