import { sql, type ColumnType, type Generated, type Kysely, type Migration } from 'kysely';
import { quoteIdentifier, withTableTypes, type UntypedDb } from '../../infra/database.ts';
import { isAtOrAfter, type Position } from '../../infra/event-store/port.ts';
import { scopedMigrator } from '../../infra/migrator.ts';
import type { BuildStaging, Consumer } from './consumer.ts';

/**
 * Generations (DESIGN §3). Each consumer lives in generations: schemas `rm_<name>_g<n>` with a row in
 * `projection_generations` holding status and checkpoint. A projection's live generation serves readers
 * through views in `public`; a rebuild fills a `building` generation from position zero and swaps it in
 * atomically once it has caught up. A process manager's generation is private (no views).
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
  '0002_leases_and_applied_migrations': {
    async up(db) {
      // Leases in a table of their own: renewing one never waits behind a batch holding its checkpoint row.
      await db.schema
        .createTable('projection_leases')
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('generation', 'integer', (c) => c.notNull())
        .addColumn('owner', 'text', (c) => c.notNull())
        .addColumn('until', 'timestamptz', (c) => c.notNull())
        .addPrimaryKeyConstraint('projection_leases_pk', ['name', 'generation'])
        .execute();
      // What a generation's schema holds, so a start with nothing new runs no DDL at all.
      await db.schema
        .alterTable('projection_generations')
        .addColumn('applied_migrations', sql`text[]`)
        .execute();
      await db.schema
        .alterTable('projection_generations')
        .addColumn('exposed_tables', sql`text[]`)
        .execute();
    },
  },
  '0003_announced_heads': {
    async up(db) {
      // Where the live consumers of each process stand that found nothing to apply since their row last moved
      // (see `CheckpointMoves.announce`): one row per process, so a page that holds nothing for fifteen
      // consumers updates one row, not fifteen.
      await db.schema
        .createTable('projection_heads')
        .addColumn('owner', 'text', (c) => c.primaryKey())
        .addColumn('moves', 'jsonb', (c) => c.notNull())
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
    },
  },
  '0004_checkpoint_moved': {
    async up(db) {
      // Fails a statement whose checkpoint compare-and-set moved no row (`STALE_CHECKPOINT_STATE`): a process
      // manager's batch then moves its checkpoint and commits in one message, and a rival's move ends it
      // before the COMMIT runs, as a failed statement ends the rest of its message.
      await sql`create or replace function projection_checkpoint_moved(moved bigint) returns void language plpgsql as $$
        begin
          if moved <> 1 then
            raise exception 'the generation moved on elsewhere' using errcode = 'EG001';
          end if;
        end $$`.execute(db);
    },
  },
  '0005_appended_until': {
    async up(db) {
      // The last position a process manager's batches appended (its facts: points, XP, completions), committed
      // with the checkpoint that passed their cause: a read with `x-min-position` waits for the read models to
      // pass it too, so it sees what the write led to, not only the write (query-api/read-your-writes.ts).
      await db.schema.alterTable('projection_generations').addColumn('appended_until', 'text').execute();
    },
  },
};

/** The SQLSTATE of `projection_checkpoint_moved`'s refusal: the checkpoint was not where the batch began. */
export const STALE_CHECKPOINT_STATE = 'EG001';

/**
 * A generation's checkpoint as readers see it: its row's, or further on where its process announced that the
 * events after the row's checkpoint up to a position hold nothing for it (`projection_heads`: a claim counts
 * while it starts from the row's checkpoint; the log below a read horizon never changes, so it stays true).
 * `g` is the `projection_generations` row; positions compare as strings, byte by byte, as `isAtOrAfter` does.
 */
export const effectiveCheckpoint = sql<Position | null>`greatest(g.checkpoint collate "C", (
  select max((claim ->> 1) collate "C") from projection_heads h cross join lateral (select h.moves -> (g.name || ':' || g.generation) as claim) c
  where claim is not null and (claim ->> 0) is not distinct from g.checkpoint))`;

export interface RuntimeTables {
  projection_generations: {
    name: string;
    generation: number;
    version: number;
    status: 'building' | 'live' | 'retired';
    checkpoint: string | null;
    lease_owner: string | null;
    lease_until: Date | null;
    last_error: string | null;
    created_at: ColumnType<Date, never, never>;
    updated_at: ColumnType<Date, never, Date | string>;
    live_since: Date | string | null;
    applied_migrations: string[] | null;
    exposed_tables: string[] | null;
  };
  projection_parked: {
    id: Generated<string>;
    name: string;
    generation: number;
    event_id: string;
    event_position: string;
    stream: string;
    event_type: string;
    error: string;
    attempts: number;
    parked_at: ColumnType<Date, never, never>;
  };
  projection_leases: { name: string; generation: number; owner: string; until: Date | string };
  projection_heads: { owner: string; moves: string; updated_at: ColumnType<Date, never, never> };
}

export type RuntimeDb = Kysely<RuntimeTables>;

export function runtimeDb(db: UntypedDb): RuntimeDb {
  return withTableTypes<RuntimeTables>(db);
}

export interface GenerationRow {
  name: string;
  generation: number;
  version: number;
  status: 'building' | 'live' | 'retired';
  checkpoint: Position | null;
  last_error: string | null;
  applied_migrations: string[] | null;
  exposed_tables: string[] | null;
}

const generationColumns = ['name', 'generation', 'version', 'status', 'checkpoint', 'last_error', 'applied_migrations', 'exposed_tables'] as const;

export function schemaOf(name: string, generation: number): string {
  return `rm_${name}_g${generation}`;
}

const LOCK_NOT_AVAILABLE = '55P03';
const DEADLOCK = '40P01';

/**
 * Runs a piece of DDL that must not queue behind readers (API requests hold their views): it waits at most
 * `lock_timeout` for its locks, and tries again a few times with a pause, instead of blocking everybody
 * queued behind it or deadlocking with them.
 */
export async function withDdlRetries<T>(db: UntypedDb, work: (trx: UntypedDb) => Promise<T>, attempts = 20): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(async (trx) => {
        await sql`select set_config('lock_timeout', '2s', true)`.execute(trx);
        return work(trx);
      });
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (attempt >= attempts || (code !== LOCK_NOT_AVAILABLE && code !== DEADLOCK)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 50 * 2 ** attempt) * (0.5 + Math.random())));
    }
  }
}

/**
 * Creates the generation's schema and brings its tables up to the consumer's migrations; records them on the
 * generation's row where it exists already; returns what ran.
 */
async function migrateGeneration(db: UntypedDb, consumer: Consumer, generation: number): Promise<string[]> {
  const schema = schemaOf(consumer.name, generation);
  await withDdlRetries(db, (trx) => trx.schema.createSchema(schema).ifNotExists().execute());
  const scoped = Object.fromEntries(
    Object.entries(consumer.migrations).map(([name, migration]) => [name, { up: (migrating: UntypedDb) => migration.up(migrating.withSchema(schema)) }]),
  );
  const migrator = scopedMigrator({ db, provider: { getMigrations: () => Promise.resolve(scoped) }, migrationTableSchema: schema });
  // Its DDL waits for its locks at most `lock_timeout`, and may meet a deadlock or a schema dropped meanwhile: trying again is safe.
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await migrator.migrateToLatest();
    if (!error) {
      const ran = (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName);
      await runtimeDb(db)
        .updateTable('projection_generations')
        .set({ applied_migrations: Object.keys(consumer.migrations).sort() })
        .where('name', '=', consumer.name)
        .where('generation', '=', generation)
        .execute();
      return ran;
    }
    const retryable = /schema "[^"]+" does not exist|lock timeout|deadlock/.test(String((error as Error).message));
    if (attempt >= 5 || !retryable) throw error instanceof Error ? error : new Error('Migration failed', { cause: error });
  }
}

/**
 * Points the public views at a generation's tables, in the transaction that makes it live. `create or
 * replace` keeps readers' plans valid where the columns are the same; a view whose columns changed is
 * dropped and made anew.
 */
async function exposeGeneration(trx: UntypedDb, consumer: Consumer, generation: number): Promise<void> {
  if (consumer.tables.length === 0) return;
  const schema = quoteIdentifier(schemaOf(consumer.name, generation));
  for (const table of consumer.tables) {
    const view = quoteIdentifier(table);
    await sql.raw(`savepoint expose_view`).execute(trx);
    try {
      await sql.raw(`create or replace view public.${view} as select * from ${schema}.${view}`).execute(trx);
      await sql.raw(`release savepoint expose_view`).execute(trx);
    } catch (error) {
      if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE || (error as { code?: string }).code === DEADLOCK) throw error;
      await sql.raw(`rollback to savepoint expose_view`).execute(trx);
      await sql.raw(`drop view if exists public.${view}`).execute(trx);
      await sql.raw(`create view public.${view} as select * from ${schema}.${view}`).execute(trx);
    }
  }
  await runtimeDb(trx)
    .updateTable('projection_generations')
    .set({ exposed_tables: [...consumer.tables] })
    .where('name', '=', consumer.name)
    .where('generation', '=', generation)
    .execute();
}

function sameList(recorded: readonly string[] | null, wanted: readonly string[]): boolean {
  if (!recorded) return false;
  const a = [...recorded].sort();
  const b = [...wanted].sort();
  return a.length === b.length && a.every((value, index) => value === b[index]);
}

/**
 * Brings every consumer to a servable state at start-up: a first generation where there is none, the live
 * generation's pending migrations, and a rebuild where the code's version is newer than the live one. Runs
 * no DDL at all when nothing changed (the generation rows record the migrations applied and the views made),
 * and the DDL it does run waits for its locks at most `lock_timeout`, retrying.
 */
export async function prepareProjections(db: UntypedDb, consumers: readonly Consumer[]): Promise<void> {
  const rows = await runtimeDb(db).selectFrom('projection_generations').select(generationColumns).where('status', '<>', 'retired').execute();
  for (const consumer of consumers) {
    const live = rows.find((row) => row.name === consumer.name && row.status === 'live');
    if (!live) {
      await createFirstGeneration(db, consumer);
      continue;
    }
    if (live.version > consumer.version) continue;
    if (live.version < consumer.version) {
      await startRebuild(db, consumer);
      continue;
    }
    const migrated = sameList(live.applied_migrations, Object.keys(consumer.migrations)) ? [] : await migrateGeneration(db, consumer, live.generation);
    const exposed = consumer.tables.length === 0 || (migrated.length === 0 && sameList(live.exposed_tables, consumer.tables));
    if (!exposed) await withDdlRetries(db, (trx) => exposeGeneration(trx, consumer, live.generation));
  }
}

/** Tables first, then the row and the views together: a runner elsewhere never sees a generation without its tables. */
async function createFirstGeneration(db: UntypedDb, consumer: Consumer): Promise<void> {
  await migrateGeneration(db, consumer, 1);
  await withDdlRetries(db, async (trx) => {
    const inserted = await runtimeDb(trx)
      .insertInto('projection_generations')
      .values({
        name: consumer.name,
        generation: 1,
        version: consumer.version,
        status: 'live',
        live_since: sql`now()`,
        applied_migrations: Object.keys(consumer.migrations).sort(),
      })
      .onConflict((oc) => oc.doNothing())
      .returning('generation')
      .executeTakeFirst();
    if (inserted) await exposeGeneration(trx, consumer, 1);
  });
}

export async function liveGeneration(db: UntypedDb, name: string): Promise<GenerationRow | undefined> {
  return runtimeDb(db).selectFrom('projection_generations').select(generationColumns).where('name', '=', name).where('status', '=', 'live').executeTakeFirst();
}

export async function generationRow(db: UntypedDb, name: string, generation: number): Promise<GenerationRow | undefined> {
  return runtimeDb(db)
    .selectFrom('projection_generations')
    .select(generationColumns)
    .where('name', '=', name)
    .where('generation', '=', generation)
    .executeTakeFirst();
}

export async function activeGenerations(db: UntypedDb): Promise<GenerationRow[]> {
  return runtimeDb(db).selectFrom('projection_generations').select(generationColumns).where('status', 'in', ['live', 'building']).execute();
}

/** Starts (or finds) a `building` generation that will replace the live one once it has caught up. */
export async function startRebuild(db: UntypedDb, consumer: Consumer): Promise<GenerationRow> {
  const runtime = runtimeDb(db);
  for (;;) {
    const building = await runtime
      .selectFrom('projection_generations')
      .select(generationColumns)
      .where('name', '=', consumer.name)
      .where('status', '=', 'building')
      .executeTakeFirst();
    if (building) {
      if (!sameList(building.applied_migrations, Object.keys(consumer.migrations))) {
        // New migrations run against the tables as they declared them, deferred indexes included.
        await withDdlRetries(db, (trx) => restoreSecondaryIndexes(trx, schemaOf(consumer.name, building.generation)));
        await migrateGeneration(db, consumer, building.generation);
      }
      return building;
    }
    const { max } = await runtime
      .selectFrom('projection_generations')
      .select((eb) => eb.fn.max<number>('generation').as('max'))
      .where('name', '=', consumer.name)
      .executeTakeFirstOrThrow();
    const generation = (max ?? 0) + 1;
    // A fresh schema with its tables, then the row: a runner never sees a building generation without tables.
    await withDdlRetries(db, (trx) => sql.raw(`drop schema if exists ${quoteIdentifier(schemaOf(consumer.name, generation))} cascade`).execute(trx));
    await migrateGeneration(db, consumer, generation);
    // A process manager's state stays logged: its appends are durable, so its state must be as well.
    if (consumer.kind === 'projection') await unlogBuild(db, consumer.name, generation, consumer.loggedWhileBuilding, consumer.staging);
    await runtime
      .insertInto('projection_generations')
      .values({ name: consumer.name, generation, version: consumer.version, status: 'building', applied_migrations: Object.keys(consumer.migrations).sort() })
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
}

/**
 * A building generation may take over once it is at least as current as the live one: waiting for the very
 * head would never end under a write rate the rebuild cannot outrun, and readers never go back in time.
 */
export async function readyToSwap(
  db: UntypedDb,
  consumer: Consumer,
  generation: number,
  checkpoint: Position | null,
  caughtUp: boolean,
): Promise<'ready' | 'not-yet' | 'not-building'> {
  const rows = await runtimeDb(db)
    .selectFrom('projection_generations as g')
    .select([...generationColumns, effectiveCheckpoint.as('seen')])
    .where('name', '=', consumer.name)
    .where('status', 'in', ['live', 'building'])
    .execute();
  const me = rows.find((row) => row.generation === generation);
  if (me?.status !== 'building') return 'not-building';
  const live = rows.find((row) => row.status === 'live');
  return caughtUp || !live || isAtOrAfter(checkpoint, live.seen) ? 'ready' : 'not-yet';
}

/**
 * A building generation replaces the live one: statuses and views change in one transaction (under
 * `lock_timeout`, retried), then the retired schema is dropped. Returns false when the live generation is
 * still ahead; throws `StaleCheckpoint` when the generation moved meanwhile (another worker has it).
 */
export async function swapIn(
  db: UntypedDb,
  consumer: Consumer,
  generation: number,
  checkpoint: Position | null,
  /**
   * Brings the building generation from its checkpoint to the live one's inside the swap's transaction (the
   * live row is locked, so the live generation cannot move meanwhile); false when the gap is too wide. A
   * write rate the rebuild keeps up with, but never gets ahead of, would otherwise keep the swap off forever.
   */
  catchUp?: (trx: UntypedDb, from: Position | null, to: Position | null) => Promise<boolean>,
  /** Runs first in the transaction (a process manager announces itself before anything else). */
  begin?: (trx: UntypedDb) => Promise<void>,
): Promise<{ retired: number | undefined } | false> {
  const outcome = await withDdlRetries(db, async (trx) => {
    await begin?.(trx);
    const runtime = runtimeDb(trx);
    const rows = await runtime
      .selectFrom('projection_generations as g')
      .select([...generationColumns, effectiveCheckpoint.as('seen')])
      .where('name', '=', consumer.name)
      .where('status', 'in', ['live', 'building'])
      .forUpdate()
      .execute();
    const me = rows.find((row) => row.generation === generation);
    if (!me || me.status !== 'building' || me.checkpoint !== checkpoint) throw new StaleCheckpoint();
    // Up to where readers see the live one (its row, or what its process announced since): never back in time.
    const live = rows.find((row) => row.status === 'live');
    if (live && !isAtOrAfter(checkpoint, live.seen) && !(catchUp && (await catchUp(trx, checkpoint, live.seen)))) return false as const;
    if (live) {
      await runtime
        .updateTable('projection_generations')
        .set({ status: 'retired', lease_owner: null, lease_until: null, updated_at: sql`now()` })
        .where('name', '=', consumer.name)
        .where('generation', '=', live.generation)
        .execute();
    }
    await runtime
      .updateTable('projection_generations')
      .set({ status: 'live', live_since: sql`now()`, updated_at: sql`now()` })
      .where('name', '=', consumer.name)
      .where('generation', '=', generation)
      .execute();
    await exposeGeneration(trx, consumer, generation);
    return { retired: live?.generation };
  });
  if (outcome && outcome.retired !== undefined) {
    const retired = outcome.retired;
    await withDdlRetries(db, (trx) => sql.raw(`drop schema if exists ${quoteIdentifier(schemaOf(consumer.name, retired))} cascade`).execute(trx));
  }
  return outcome;
}

/**
 * A read model's building generation is written without the WAL: its tables (but those it only inserts into,
 * `loggedWhileBuilding`) are UNLOGGED while it fills, and become logged once, just before it swaps in (`SET LOGGED`
 * writes each table to the WAL in one pass). Every row a rebuild writes, and every later change to it, would
 * otherwise go through the WAL: 2.6 GB of it for the bench's 1M-event store, whose read models hold about
 * 0.6 GB, and the largest share of the server's work.
 * Nobody reads a building generation, so nothing is exposed before it is durable.
 *
 * A server crash empties unlogged tables (recovery resets them) but not the generation's checkpoint, which is
 * logged. A marker row, in an unlogged table of the generation's own, tells: once it is gone, so are the rows,
 * and the build starts again from the start of the log. A crash after `SET LOGGED` committed loses nothing.
 *
 * Secondary indexes (not unique, backing no constraint: only readers use them) are dropped while the
 * generation fills and built again once it is logged: one sorted build per index instead of an index entry
 * per row a batch writes, and `SET LOGGED` then rewrites the table without them. Their definitions wait in a
 * logged table of the generation's own, so they come back whatever happens in between.
 */
const MARKER = 'unlogged_build_marker';
const DEFERRED_INDEXES = 'deferred_indexes';

/** The generation's tables that hold read-model rows (not the migrations' bookkeeping, not the marker). */
async function readModelTables(db: UntypedDb, schema: string, persistence: 'p' | 'u' | 'any'): Promise<string[]> {
  const rows = await sql<{ name: string }>`
    select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = ${schema} and c.relkind = 'r' and c.relname not in (${MARKER}, ${DEFERRED_INDEXES}) and c.relname not like 'kysely\\_migration%'
      and (${persistence} = 'any' or c.relpersistence = ${persistence})
    order by c.relname`.execute(db);
  return rows.rows.map((row) => row.name);
}

const qualified = (schema: string, table: string) => `${quoteIdentifier(schema)}.${quoteIdentifier(table)}`;

async function markerTable(db: UntypedDb, schema: string): Promise<'none' | 'present' | 'wiped'> {
  const found = await sql<{ marker: string | null }>`select to_regclass(${qualified(schema, MARKER)})::text as marker`.execute(db);
  if (!found.rows[0]?.marker) return 'none';
  const rows = await sql<{ present: boolean }>`select exists (select from ${sql.raw(qualified(schema, MARKER))}) as present`.execute(db);
  return rows.rows[0]?.present ? 'present' : 'wiped';
}

/**
 * Makes a new building generation's tables unlogged and marks it (before its row exists, so no worker sees it
 * half done). Tables the read model only inserts into stay logged: each row goes to the WAL once either way,
 * and `SET LOGGED` would read and write the whole table again besides (the bench's 189,198 custom events:
 * 0.57 s inserted logged against 0.45 s unlogged and 0.48 s to make them logged). A crash still wipes the
 * marker, and with it the whole build, logged tables included.
 */
export async function unlogBuild(
  db: UntypedDb,
  name: string,
  generation: number,
  loggedWhileBuilding: readonly string[] = [],
  staging?: BuildStaging,
): Promise<void> {
  const schema = schemaOf(name, generation);
  await withDdlRetries(db, async (trx) => {
    // Its staging tables first, so that they are made unlogged with the others (they never become logged).
    await staging?.create(trx.withSchema(schema));
    for (const table of await readModelTables(trx, schema, 'p'))
      if (!loggedWhileBuilding.includes(table)) await sql.raw(`alter table ${qualified(schema, table)} set unlogged`).execute(trx);
    await sql.raw(`create unlogged table if not exists ${qualified(schema, MARKER)} (since timestamptz not null default now())`).execute(trx);
    await sql.raw(`insert into ${qualified(schema, MARKER)} default values`).execute(trx);
    await deferSecondaryIndexes(trx, schema);
  });
}

/** Drops the generation's secondary indexes, keeping their definitions to build them again in `relogBuild`. */
async function deferSecondaryIndexes(trx: UntypedDb, schema: string): Promise<void> {
  const indexes = await sql<{ name: string; definition: string }>`
    select i.relname as name, pg_get_indexdef(x.indexrelid) as definition
    from pg_index x
    join pg_class i on i.oid = x.indexrelid
    join pg_class t on t.oid = x.indrelid
    join pg_namespace n on n.oid = t.relnamespace
    where n.nspname = ${schema} and not x.indisunique and not x.indisprimary
      and t.relname not like 'kysely\\_migration%'
      and not exists (select from pg_constraint c where c.conindid = x.indexrelid)
    order by i.relname`.execute(trx);
  await sql.raw(`create table if not exists ${qualified(schema, DEFERRED_INDEXES)} (name text primary key, definition text not null)`).execute(trx);
  for (const index of indexes.rows) {
    await sql`insert into ${sql.raw(qualified(schema, DEFERRED_INDEXES))} (name, definition) values (${index.name}, ${index.definition}) on conflict do nothing`.execute(
      trx,
    );
    await sql.raw(`drop index ${qualified(schema, index.name)}`).execute(trx);
  }
}

/** Builds the secondary indexes `deferSecondaryIndexes` dropped (a generation that never had them: nothing). */
async function restoreSecondaryIndexes(trx: UntypedDb, schema: string): Promise<void> {
  const found = await sql<{ table: string | null }>`select to_regclass(${qualified(schema, DEFERRED_INDEXES)})::text as table`.execute(trx);
  if (!found.rows[0]?.table) return;
  const indexes = await sql<{ definition: string }>`select definition from ${sql.raw(qualified(schema, DEFERRED_INDEXES))} order by name`.execute(trx);
  for (const index of indexes.rows) await sql.raw(index.definition).execute(trx);
  await sql.raw(`drop table ${qualified(schema, DEFERRED_INDEXES)}`).execute(trx);
}

/**
 * When a server crash wiped the generation's unlogged rows: empties every table of it (a table a later
 * migration added is logged and kept its rows), moves its checkpoint back to the start of the log and marks it
 * again, in one transaction. True when it did.
 */
export async function restartWipedBuild(db: UntypedDb, name: string, generation: number): Promise<boolean> {
  const schema = schemaOf(name, generation);
  if ((await markerTable(db, schema)) !== 'wiped') return false;
  return withDdlRetries(db, async (trx) => {
    if ((await markerTable(trx, schema)) !== 'wiped') return false;
    const tables = await readModelTables(trx, schema, 'any');
    if (tables.length > 0) await sql.raw(`truncate ${tables.map((table) => qualified(schema, table)).join(', ')}`).execute(trx);
    await runtimeDb(trx)
      .updateTable('projection_generations')
      .set({ checkpoint: null, updated_at: sql`now()`, last_error: 'the server lost this rebuild’s unlogged rows in a crash; it started again' })
      .where('name', '=', name)
      .where('generation', '=', generation)
      .where('status', '=', 'building')
      .execute();
    await sql.raw(`insert into ${qualified(schema, MARKER)} default values`).execute(trx);
    return true;
  });
}

/**
 * Makes a building generation durable before it swaps in: every unlogged table logged, the marker dropped, in
 * one transaction. 'wiped' when a crash emptied it meanwhile (the worker then starts it again); 'logged' when
 * it is (or always was) logged.
 */
export async function relogBuild(db: UntypedDb, name: string, generation: number, staging?: BuildStaging): Promise<'logged' | 'wiped'> {
  const schema = schemaOf(name, generation);
  if ((await markerTable(db, schema)) === 'none') return 'logged';
  return withDdlRetries(db, async (trx) => {
    const marker = await markerTable(trx, schema);
    if (marker !== 'present') return marker === 'wiped' ? 'wiped' : 'logged';
    if (staging && (await stagingTablesPresent(trx, schema, staging))) {
      // The fold's sorts and aggregates in memory: the standings' 407,940 staged moves spilled to disk at the
      // default 4 MB (3.2 s for their fold, 2.2 s without the spills).
      await sql`set local work_mem = '64MB'`.execute(trx);
      await staging.fold(trx.withSchema(schema));
      if (staging.tables.length > 0) await sql.raw(`drop table ${staging.tables.map((table) => qualified(schema, table)).join(', ')}`).execute(trx);
    }
    for (const table of await readModelTables(trx, schema, 'u')) await sql.raw(`alter table ${qualified(schema, table)} set logged`).execute(trx);
    await restoreSecondaryIndexes(trx, schema);
    await sql.raw(`drop table ${qualified(schema, MARKER)}`).execute(trx);
    return 'logged' as const;
  });
}

/** Whether every table of the consumer's staging exists in the schema (a generation started without them has none). */
async function stagingTablesPresent(db: UntypedDb, schema: string, staging: BuildStaging): Promise<boolean> {
  const found = await sql<{ present: number }>`
    select count(*)::int as present from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = ${schema} and c.relkind = 'r' and c.relname = any(${[...staging.tables]}::text[])`.execute(db);
  return found.rows[0]?.present === staging.tables.length;
}

/**
 * Whether a building generation's batches may write to the consumer's staging tables: it is still unlogged
 * (its marker is there: `relogBuild` folds them and drops the marker in one transaction) and has them.
 */
export async function stagingInPlace(db: UntypedDb, name: string, generation: number, staging: BuildStaging | undefined): Promise<boolean> {
  if (!staging) return false;
  const schema = schemaOf(name, generation);
  return (await markerTable(db, schema)) === 'present' && (await stagingTablesPresent(db, schema, staging));
}

/** The generation's checkpoint is not where this worker left it: another worker applied batches meanwhile. */
export class StaleCheckpoint extends Error {
  constructor() {
    super('the generation moved on elsewhere');
    this.name = 'StaleCheckpoint';
  }
}
