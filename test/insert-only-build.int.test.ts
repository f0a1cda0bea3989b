import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DomainEvent } from '../domain/decider.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { defineProjection } from '../projectors/projection.ts';
import { ProjectionRunner, generationRow, liveGeneration, prepareProjections, startRebuild, waitForProjections } from '../projectors/runtime/index.ts';
import { migrate } from '../service.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';
import { waitUntil } from './support/projections.ts';

interface JournalTables {
  journal: { event_id: string; stream: string };
  journal_counts: { stream: string; count: number };
  journal_count_moves: { stream: string; count: number };
}

const countsOf = (events: readonly { stream: string }[]) => {
  const counts = new Map<string, number>();
  for (const event of events) counts.set(event.stream, (counts.get(event.stream) ?? 0) + 1);
  return [...counts].map(([stream, count]) => ({ stream, count }));
};

/**
 * A read model with a table it only inserts into (the journal) and one it updates (the counts), whose
 * rebuild stages the counts' moves and folds them at its end.
 */
const journalProjection = defineProjection<JournalTables, DomainEvent<'Noted', unknown>>({
  name: 'journal',
  version: 1,
  tables: ['journal', 'journal_counts'],
  loggedWhileBuilding: ['journal'],
  canHandle: ['Noted'],
  staging: {
    tables: ['journal_count_moves'],
    async create(db) {
      await db.schema
        .createTable('journal_count_moves')
        .addColumn('stream', 'text', (c) => c.notNull())
        .addColumn('count', 'integer', (c) => c.notNull())
        .execute();
    },
    async fold(db) {
      await db
        .insertInto('journal_counts')
        .columns(['stream', 'count'])
        .expression((eb) =>
          eb
            .selectFrom('journal_count_moves')
            .select(['stream', (eb) => eb.fn.sum<number>('count').as('count')])
            .groupBy('stream'),
        )
        .onConflict((oc) => oc.column('stream').doUpdateSet({ count: sql`journal_counts.count + excluded.count` }))
        .execute();
    },
  },
  migrations: {
    '0001_journal': {
      async up(db) {
        await db.schema
          .createTable('journal')
          .addColumn('event_id', 'text', (c) => c.primaryKey())
          .addColumn('stream', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('journal_counts')
          .addColumn('stream', 'text', (c) => c.primaryKey())
          .addColumn('count', 'integer', (c) => c.notNull())
          .execute();
      },
    },
  },
  async apply(db, events, { staging }) {
    await db
      .insertInto('journal')
      .values(events.map((event) => ({ event_id: event.id, stream: event.stream })))
      .onConflict((oc) => oc.doNothing())
      .execute();
    if (staging) {
      staged.batches++;
      await db.insertInto('journal_count_moves').values(countsOf(events)).execute();
      return;
    }
    await db
      .insertInto('journal_counts')
      .values(countsOf(events))
      .onConflict((oc) => oc.column('stream').doUpdateSet({ count: sql`journal_counts.count + excluded.count` }))
      .execute();
  },
});

/** Batches applied with their moves staged, by every runner of this file. */
const staged = { batches: 0 };

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

describe('a rebuild keeps the tables a read model only inserts into logged, and stages what it merges', () => {
  let test: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    test = await freshDatabase();
    await migrate(test.database.db);
    await prepareProjections(test.database.db, [journalProjection]);
    store = new PostgresEventStore(test.database);
    for (let stream = 0; stream < 6; stream++)
      await store.append(
        `journal-${stream}`,
        Array.from({ length: 5 }, (_, n) => ({ type: 'Noted', data: { n } })),
      );
  });

  afterAll(async () => {
    await store.close();
    await test.drop();
  });

  it('writes them through the WAL, stages and folds, starts the whole build again when a crash wiped the others, and swaps in every row once', async () => {
    const db = test.database.db;
    // The live generation at the head first: a build whose first batch reached the live one's checkpoint would
    // be ready to swap in at once, before the stop below.
    const live = new ProjectionRunner(test.database, store, [journalProjection], silent, { scanIntervalMs: 100, leaseMs: 1500 });
    await live.start();
    expect(await waitForProjections(db, ['journal'], (await store.head())!.position, 20_000)).toBe(true);
    await live.stop();
    const building = await startRebuild(db, journalProjection);
    const schema = `rm_journal_g${building.generation}`;
    const persistence = async () =>
      (
        await sql<{ name: string; persistence: string }>`
          select c.relname as name, c.relpersistence as persistence from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = ${schema} and c.relkind = 'r' and c.relname not like 'kysely%' and c.relname <> 'deferred_indexes' order by c.relname`.execute(db)
      ).rows;
    expect(await persistence()).toEqual([
      { name: 'journal', persistence: 'p' },
      { name: 'journal_count_moves', persistence: 'u' },
      { name: 'journal_counts', persistence: 'u' },
      { name: 'unlogged_build_marker', persistence: 'u' },
    ]);
    // The live generation merged its batches; the building one stages them from its first.
    expect(staged.batches).toBe(0);

    // The build's first batch, then a stop (a deploy, a Ctrl-C).
    let stopping: Promise<void> | undefined;
    const interrupted: ProjectionRunner = new ProjectionRunner(test.database, store, [journalProjection], silent, {
      scanIntervalMs: 100,
      leaseMs: 1500,
      batchSize: 5,
      buildingBatchPages: 1,
      onBatchApplied: (_name, generation) => {
        if (generation === building.generation) stopping ??= interrupted.stop();
      },
    });
    await interrupted.start();
    await waitUntil(() => stopping !== undefined, 20_000, 'the first batch of the rebuild');
    await stopping;
    expect((await generationRow(db, 'journal', building.generation))!.checkpoint).not.toBeNull();
    const journalled = await sql<{ count: string }>`select count(*) as count from ${sql.raw(`"${schema}".journal`)}`.execute(db);
    expect(Number(journalled.rows[0]!.count)).toBeGreaterThan(0);
    expect(staged.batches).toBeGreaterThan(0);
    const moves = await sql<{ count: string }>`select count(*) as count from ${sql.raw(`"${schema}".journal_count_moves`)}`.execute(db);
    expect(Number(moves.rows[0]!.count)).toBeGreaterThan(0);
    // What crash recovery does: the unlogged tables come back empty, the logged journal keeps its rows.
    await sql.raw(`truncate "${schema}"."journal_counts", "${schema}"."journal_count_moves", "${schema}"."unlogged_build_marker"`).execute(db);

    const resumed = new ProjectionRunner(test.database, store, [journalProjection], silent, { scanIntervalMs: 100, leaseMs: 1500, batchSize: 10 });
    await resumed.start();
    await waitUntil(async () => (await liveGeneration(db, 'journal'))?.generation === building.generation, 30_000, 'the restarted rebuild to swap in');
    await resumed.stop();

    const journal = await db.withSchema(schema).selectFrom('journal').select(['event_id', 'stream']).orderBy('event_id').execute();
    const counts = await db.withSchema(schema).selectFrom('journal_counts').select(['stream', 'count']).orderBy('stream').execute();
    const all = await store.readAll({ filter: { categories: ['journal'] }, limit: 1000 });
    expect(journal).toEqual(all.events.map((event) => ({ event_id: event.id, stream: event.stream })).sort((a, b) => (a.event_id < b.event_id ? -1 : 1)));
    // Counted once each, folded from the staged moves: the counts agree with the journal, which the restart
    // emptied with the rest; the staging table is gone.
    expect(counts).toEqual(Array.from({ length: 6 }, (_, stream) => ({ stream: `journal-${stream}`, count: 5 })));
    expect(await persistence()).toEqual([
      { name: 'journal', persistence: 'p' },
      { name: 'journal_counts', persistence: 'p' },
    ]);
  });
});
