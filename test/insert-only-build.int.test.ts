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
}

/** A read model with a table it only inserts into (the journal) and one it updates (the counts). */
const journalProjection = defineProjection<JournalTables, DomainEvent<'Noted', unknown>>({
  name: 'journal',
  version: 1,
  tables: ['journal', 'journal_counts'],
  insertOnly: ['journal'],
  canHandle: ['Noted'],
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
  async apply(db, events) {
    await db
      .insertInto('journal')
      .values(events.map((event) => ({ event_id: event.id, stream: event.stream })))
      .onConflict((oc) => oc.doNothing())
      .execute();
    const counts = new Map<string, number>();
    for (const event of events) counts.set(event.stream, (counts.get(event.stream) ?? 0) + 1);
    await db
      .insertInto('journal_counts')
      .values([...counts].map(([stream, count]) => ({ stream, count })))
      .onConflict((oc) => oc.column('stream').doUpdateSet({ count: sql`journal_counts.count + excluded.count` }))
      .execute();
  },
});

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

describe('a rebuild keeps the tables a read model only inserts into logged', () => {
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

  it('writes them through the WAL, starts the whole build again when a crash wiped the others, and swaps in every row once', async () => {
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
      { name: 'journal_counts', persistence: 'u' },
      { name: 'unlogged_build_marker', persistence: 'u' },
    ]);

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
    // What crash recovery does: the unlogged tables come back empty, the logged journal keeps its rows.
    await sql.raw(`truncate "${schema}"."journal_counts", "${schema}"."unlogged_build_marker"`).execute(db);

    const resumed = new ProjectionRunner(test.database, store, [journalProjection], silent, { scanIntervalMs: 100, leaseMs: 1500, batchSize: 10 });
    await resumed.start();
    await waitUntil(async () => (await liveGeneration(db, 'journal'))?.generation === building.generation, 30_000, 'the restarted rebuild to swap in');
    await resumed.stop();

    const journal = await db.withSchema(schema).selectFrom('journal').select(['event_id', 'stream']).orderBy('event_id').execute();
    const counts = await db.withSchema(schema).selectFrom('journal_counts').select(['stream', 'count']).orderBy('stream').execute();
    const all = await store.readAll({ filter: { categories: ['journal'] }, limit: 1000 });
    expect(journal).toEqual(all.events.map((event) => ({ event_id: event.id, stream: event.stream })).sort((a, b) => (a.event_id < b.event_id ? -1 : 1)));
    // Counted once each: the counts agree with the journal, which the restart emptied with the rest.
    expect(counts).toEqual(Array.from({ length: 6 }, (_, stream) => ({ stream: `journal-${stream}`, count: 5 })));
    expect(await persistence()).toEqual([
      { name: 'journal', persistence: 'p' },
      { name: 'journal_counts', persistence: 'p' },
    ]);
  });
});
