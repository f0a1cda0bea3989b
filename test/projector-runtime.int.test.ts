import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import {
  ProjectionRunner,
  effectiveCheckpoint,
  generationRow,
  liveGeneration,
  prepareProjections,
  projectionStatus,
  runtimeDb,
  startRebuild,
  waitForProjections,
  type RuntimeOptions,
} from '../projectors/runtime/index.ts';
import { CheckpointMoves } from '../projectors/runtime/worker.ts';
import { listParked, requestRebuild, retryParked, skipParked } from '../projectors/maintenance.ts';
import type { Projection } from '../projectors/projection.ts';
import { defineProcessManager } from '../process-managers/process-manager.ts';
import { migrate } from '../service.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';
import { tallyProjection, waitUntil } from './support/projections.ts';

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

async function setUp(test: TestDatabase) {
  await migrate(test.database.db);
  await prepareProjections(test.database.db, [tallyProjection]);
  return new PostgresEventStore(test.database);
}

function runner(test: TestDatabase, store: PostgresEventStore, options: RuntimeOptions = {}) {
  return new ProjectionRunner(test.database, store, [tallyProjection], silent, { scanIntervalMs: 100, leaseMs: 1500, ...options });
}

async function tallyRows(test: TestDatabase) {
  return test.database.db.selectFrom('tally').selectAll().orderBy('event_id').execute();
}

/** Where readers see a generation (its row, or what its process announced since), as another session reads it now. */
async function seenCheckpoint(test: TestDatabase, name: string, generation?: number): Promise<string | null | undefined> {
  let query = test.database.db.selectFrom('projection_generations as g').select(effectiveCheckpoint.as('checkpoint')).where('g.name', '=', name);
  query = generation === undefined ? query.where('g.status', '=', 'live') : query.where('g.generation', '=', generation);
  return (await query.executeTakeFirst())?.checkpoint;
}

async function caughtUp(test: TestDatabase, store: PostgresEventStore) {
  const head = await store.head();
  return head !== null && (await seenCheckpoint(test, 'tally')) === head.position;
}

async function appendTally(store: PostgresEventStore, streams: number, perStream: number, type = 'Counted') {
  for (let s = 0; s < streams; s++) {
    await store.append(
      `tally-${Math.random().toString(36).slice(2)}`,
      Array.from({ length: perStream }, (_, n) => ({ type, data: { n } })),
    );
  }
}

/** Runs a rebuild's first batch and stops, as an operator's Ctrl-C or a deploy would. */
async function rebuildOneBatch(test: TestDatabase, store: PostgresEventStore, generation: number): Promise<void> {
  let stopping: Promise<void> | undefined;
  const interrupted: ProjectionRunner = runner(test, store, {
    batchSize: 10,
    onBatchApplied: (_name, applied) => {
      if (applied === generation) stopping ??= interrupted.stop();
    },
  });
  await interrupted.start();
  await waitUntil(() => stopping !== undefined, 20_000, 'the first batch of the rebuild');
  await stopping;
}

describe('projector runtime', () => {
  let test: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    test = await freshDatabase();
    store = await setUp(test);
  });
  afterAll(async () => {
    await store.close();
    await test.drop();
  });

  it('applies every event once, reports its status, and parks an event whose handler keeps failing', async () => {
    const projector = runner(test, store, { batchSize: 7 });
    await projector.start();
    await appendTally(store, 5, 4);
    await store.append('tally-poisoned', [
      { type: 'Counted', data: {} },
      { type: 'Poison', data: {} },
      { type: 'Counted', data: {} },
    ]);
    await appendTally(store, 2, 3);
    await waitUntil(() => caughtUp(test, store), 20_000, 'projection to catch up');
    await projector.stop();

    const rows = await tallyRows(test);
    expect(rows).toHaveLength(5 * 4 + 2 + 2 * 3);
    expect(rows.every((row) => row.applied === 1)).toBe(true);

    const parked = await test.database.db.selectFrom('projection_parked').selectAll().execute();
    expect(parked).toHaveLength(1);
    expect(parked[0]).toMatchObject({ name: 'tally', event_type: 'Poison', stream: 'tally-poisoned', attempts: 3 });

    await appendTally(store, 1, 5);
    const [status] = await projectionStatus(test.database.db, store);
    expect(status).toMatchObject({ name: 'tally', generation: 1, status: 'live', eventsBehind: 5, parked: 1 });
    expect(status!.secondsBehind).toBeGreaterThanOrEqual(0);

    const resumed = runner(test, store);
    await resumed.start();
    await waitUntil(() => caughtUp(test, store), 20_000, 'projection to resume');
    await resumed.stop();
    const [after] = await projectionStatus(test.database.db, store);
    expect(after).toMatchObject({ eventsBehind: 0, secondsBehind: 0 });
    expect((await tallyRows(test)).every((row) => row.applied === 1)).toBe(true);
  });

  it('under a steady stream of appends applies at most one live batch per period, each event once', async () => {
    const period = 200;
    const sizes: number[] = [];
    const projector = runner(test, store, {
      liveBatchIntervalMs: period,
      onBatchApplied: (_name, _generation, batch) => {
        if (batch.events.length > 0) sizes.push(batch.events.length);
      },
    });
    await projector.start();
    await appendTally(store, 1, 1);
    await waitUntil(() => caughtUp(test, store), 20_000, 'projection to catch up');
    sizes.length = 0;
    const before = (await tallyRows(test)).length;
    const started = performance.now();
    let appended = 0;
    // One event per append, each acknowledged before the next: a write every few milliseconds for a second.
    while (performance.now() - started < 1000) {
      await appendTally(store, 1, 1);
      appended++;
    }
    await waitUntil(() => caughtUp(test, store), 20_000, 'projection to catch up');
    const periods = Math.ceil((performance.now() - started) / period);
    await projector.stop();

    expect(sizes.reduce((sum, size) => sum + size, 0)).toBe(appended);
    // The first batch goes at once (the consumer was idle), then one per tick of the period at most.
    expect(sizes.length).toBeLessThanOrEqual(periods + 1);
    expect(sizes.length).toBeLessThan(appended);
    const rows = await tallyRows(test);
    expect(rows).toHaveLength(before + appended);
    expect(rows.every((row) => row.applied === 1)).toBe(true);
  });

  it('sees an idle generation where its process announced it, while the claim starts from its row; tidies claims no longer counted', async () => {
    const db = test.database.db;
    const at = (n: number) => n.toString(16).padStart(32, '0');
    const runtime = runtimeDb(db);
    await runtime
      .insertInto('projection_generations')
      .values({
        name: 'idle',
        generation: 1,
        version: 1,
        status: 'live',
        checkpoint: at(10),
        lease_owner: null,
        lease_until: null,
        last_error: null,
        live_since: null,
        applied_migrations: null,
        exposed_tables: null,
      })
      .execute();
    const heads = () => runtime.selectFrom('projection_heads').select('owner').execute();
    const moves = new CheckpointMoves(db, 'announcer');
    expect(await seenCheckpoint(test, 'idle')).toBe(at(10));
    expect(await waitForProjections(db, ['idle'], at(20), 0)).toBe(false);

    await moves.announce('idle', 1, at(10), at(20));
    expect(await seenCheckpoint(test, 'idle')).toBe(at(20));
    expect(await waitForProjections(db, ['idle'], at(20), 0)).toBe(true);
    expect((await projectionStatus(db, store)).find((row) => row.name === 'idle')?.checkpoint).toBe(at(20));
    // Its row is still where it was; the process's row holds the claim, kept by a tidy while it counts.
    expect((await generationRow(db, 'idle', 1))?.checkpoint).toBe(at(10));
    await moves.tidy();
    expect(await heads()).toEqual([{ owner: 'announcer' }]);

    // A claim that does not start from the row (another worker moved it) counts for nothing.
    await moves.announce('idle', 1, at(5), at(30));
    expect(await seenCheckpoint(test, 'idle')).toBe(at(10));
    // The row moved past the claim: the row is what counts, and the claim goes at the next tidy.
    await moves.announce('idle', 1, at(10), at(20));
    await runtime
      .updateTable('projection_generations')
      .set({ checkpoint: at(25) })
      .where('name', '=', 'idle')
      .execute();
    expect(await seenCheckpoint(test, 'idle')).toBe(at(25));
    await moves.tidy();
    expect(await heads()).toEqual([]);
    await runtime.deleteFrom('projection_generations').where('name', '=', 'idle').execute();
  });

  it('retries a parked event once its handler is fixed, and skips one for good', async () => {
    const db = test.database.db;
    const [parked] = await listParked(db, { name: 'tally' });
    expect(parked).toMatchObject({ name: 'tally', generation: 1, status: 'live', eventType: 'Poison', attempts: 3 });
    // Still broken: it stays parked, with one attempt more and the new error.
    expect(await retryParked(db, store, [tallyProjection], parked!.id)).toMatchObject({ outcome: 'failed', error: expect.stringMatching(/cannot apply/) });
    expect(await listParked(db)).toMatchObject([{ id: parked!.id, attempts: 4 }]);
    // Fixed (a new release of the handler): applied to the live generation, gone from the list.
    const fixed: Projection = {
      ...tallyProjection,
      apply: (scoped, events, context) =>
        tallyProjection.apply(
          scoped,
          events.map((event) => ({ ...event, type: 'Counted' })),
          context,
        ),
    };
    expect(await retryParked(db, store, [fixed], parked!.id)).toMatchObject({ outcome: 'applied', name: 'tally', generation: 1 });
    expect(await listParked(db)).toEqual([]);
    expect((await tallyRows(test)).filter((row) => row.event_id === parked!.eventId)).toMatchObject([{ applied: 1 }]);
    await expect(retryParked(db, store, [fixed], parked!.id)).rejects.toThrow(/No parked event/);

    const projector = runner(test, store);
    await projector.start();
    await store.append('tally-poisoned-again', [{ type: 'Poison', data: {} }]);
    await waitUntil(() => caughtUp(test, store), 20_000, 'the second poison to be parked');
    await projector.stop();
    const [second] = await listParked(db);
    expect(await skipParked(db, second!.id)).toMatchObject({ id: second!.id, name: 'tally', outcome: 'skipped' });
    expect(await listParked(db)).toEqual([]);
    expect((await projectionStatus(db, store))[0]).toMatchObject({ parked: 0, eventsBehind: 0 });
    expect((await tallyRows(test)).some((row) => row.event_id === second!.eventId)).toBe(false);
  });

  it('rebuilds into a new generation while writes continue, keeps serving, and swaps in an equal read model', async () => {
    const projector = runner(test, store);
    await projector.start();
    await appendTally(store, 10, 5);
    await waitUntil(() => caughtUp(test, store), 20_000, 'first catch-up');
    const before = await liveGeneration(test.database.db, 'tally');

    let writing = true;
    const writer = (async () => {
      // A steady stream of writes, as production would have (an unthrottled loop on two cores would starve the rebuild).
      while (writing) {
        await appendTally(store, 1, 3);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    const building = await startRebuild(test.database.db, tallyProjection);
    expect(building.generation).toBe(before!.generation + 1);
    // The live generation keeps answering while the new one fills up.
    expect((await tallyRows(test)).length).toBeGreaterThan(0);
    await waitUntil(async () => (await liveGeneration(test.database.db, 'tally'))?.generation === building.generation, 30_000, 'the swap');
    writing = false;
    await writer;
    await waitUntil(() => caughtUp(test, store), 20_000, 'catch-up after the swap');
    await projector.stop();

    const rows = await tallyRows(test);
    const all = await store.readAll({ filter: { categories: ['tally'] }, limit: 100_000 });
    const expected = all.events
      .filter((event) => event.type !== 'Poison')
      .map((event) => event.id)
      .sort();
    expect(rows.map((row) => row.event_id)).toEqual(expected);
    expect(rows.every((row) => row.applied === 1)).toBe(true);
    const schemas = await test.database.db.selectFrom('information_schema.schemata').select('schema_name').where('schema_name', 'like', 'rm_tally_%').execute();
    expect(schemas.map((row) => row.schema_name)).toEqual([`rm_tally_g${building.generation}`]);
  });

  it('resumes an interrupted rebuild in the same generation, from its checkpoint', async () => {
    const db = test.database.db;
    await appendTally(store, 10, 5);
    const building = await startRebuild(db, tallyProjection);
    // A rebuild interrupted after its first batch (an operator's Ctrl-C, a deploy).
    await rebuildOneBatch(test, store, building.generation);
    const saved = (await db
      .selectFrom('projection_generations')
      .selectAll()
      .where('name', '=', 'tally')
      .where('generation', '=', building.generation)
      .executeTakeFirstOrThrow()) as { status: string; checkpoint: string | null };
    expect(saved.status).toBe('building');
    expect(saved.checkpoint).not.toBeNull();
    expect(saved.checkpoint! < (await store.head())!.position).toBe(true);

    // Asking again finds the same generation where it stopped.
    expect(await requestRebuild(db, tallyProjection)).toEqual({ name: 'tally', generation: building.generation, resumed: true, checkpoint: saved.checkpoint });
    let firstResumed: string | undefined;
    const resumed = runner(test, store, {
      onBatchApplied: (_name, generation, batch) => {
        if (generation === building.generation && batch.events.length > 0) firstResumed ??= batch.events[0]!.position;
      },
    });
    await resumed.start();
    await waitUntil(async () => (await liveGeneration(db, 'tally'))?.generation === building.generation, 30_000, 'the resumed rebuild to swap in');
    await resumed.stop();
    expect(firstResumed! > saved.checkpoint!).toBe(true);
    const rows = await tallyRows(test);
    const all = await store.readAll({ filter: { categories: ['tally'] }, limit: 100_000 });
    expect(rows.map((row) => row.event_id)).toEqual(
      all.events
        .filter((event) => event.type !== 'Poison')
        .map((event) => event.id)
        .sort(),
    );
    expect(rows.every((row) => row.applied === 1)).toBe(true);
  });

  it("builds without the WAL or readers' indexes, starts again from the start of the log when a server crash wiped the build, and swaps in logged tables", async () => {
    const db = test.database.db;
    await appendTally(store, 10, 5);
    const building = await startRebuild(db, tallyProjection);
    const schema = `rm_tally_g${building.generation}`;
    const persistence = async () =>
      (
        await sql<{ name: string; persistence: string }>`
          select c.relname as name, c.relpersistence as persistence from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = ${schema} and c.relkind = 'r' and c.relname not like 'kysely%' order by c.relname`.execute(db)
      ).rows;
    const indexes = async () =>
      (
        await sql<{ name: string }>`select indexname as name from pg_indexes where schemaname = ${schema} and tablename = 'tally' order by indexname`.execute(
          db,
        )
      ).rows.map((row) => row.name);
    expect(await persistence()).toEqual([
      { name: 'deferred_indexes', persistence: 'p' },
      { name: 'tally', persistence: 'u' },
      { name: 'unlogged_build_marker', persistence: 'u' },
    ]);
    // The readers' index waits for the swap; the primary key (upserts need it) stays.
    expect(await indexes()).toEqual(['tally_pkey']);

    await rebuildOneBatch(test, store, building.generation);
    // What crash recovery does to unlogged tables: they come back empty; the checkpoint, logged, does not move.
    expect((await generationRow(db, 'tally', building.generation))!.checkpoint).not.toBeNull();
    await sql.raw(`truncate "${schema}"."tally", "${schema}"."unlogged_build_marker"`).execute(db);

    let firstApplied: string | undefined;
    const resumed = runner(test, store, {
      onBatchApplied: (_name, generation, batch) => {
        if (generation === building.generation && batch.events.length > 0) firstApplied ??= batch.events[0]!.position;
      },
    });
    await resumed.start();
    await waitUntil(async () => (await liveGeneration(db, 'tally'))?.generation === building.generation, 30_000, 'the restarted rebuild to swap in');
    await resumed.stop();
    const all = await store.readAll({ filter: { categories: ['tally'] }, limit: 100_000 });
    const counted = all.events.filter((event) => event.type !== 'Poison');
    // Started again from the first event of the log, not from the checkpoint the crash left behind.
    expect(firstApplied).toBe(counted[0]!.position);
    const rows = await tallyRows(test);
    expect(rows.map((row) => row.event_id)).toEqual(counted.map((event) => event.id).sort());
    expect(rows.every((row) => row.applied === 1)).toBe(true);
    expect(await persistence()).toEqual([{ name: 'tally', persistence: 'p' }]);
    expect(await indexes()).toEqual(['tally_by_stream', 'tally_pkey']);
  });
});

const test = await freshDatabase();

describe('projector runtime on PostgreSQL, across processes and sessions', () => {
  let store: PostgresEventStore;

  beforeAll(async () => {
    store = await setUp(test);
  });
  afterAll(async () => {
    await store.close();
    await test.drop();
  });

  it('two runners racing apply each batch once', async () => {
    const first = runner(test, store, { batchSize: 5 });
    const second = runner(test, store, { batchSize: 5 });
    await Promise.all([first.start(), second.start()]);
    await Promise.all([appendTally(store, 20, 5), appendTally(store, 20, 5)]);
    await waitUntil(() => caughtUp(test, store), 30_000, 'both runners to finish');
    await Promise.all([first.stop(), second.stop()]);
    const rows = await tallyRows(test);
    expect(rows).toHaveLength(200);
    expect(rows.filter((row) => row.applied !== 1)).toEqual([]);
  });

  it('a projector killed between applying a batch and writing its checkpoint leaves a read model equal to a rebuild', async () => {
    await appendTally(store, 10, 10);
    const checkpointBefore = (await liveGeneration(test.database.db, 'tally'))!.checkpoint;
    const rowsBefore = (await tallyRows(test)).length;

    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/projector-process.ts', test.url], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitUntil(() => output.includes('APPLIED'), 30_000, 'the child to apply a batch');
    // The batch is applied inside the open transaction; nothing of it is visible, the checkpoint has not moved.
    expect((await liveGeneration(test.database.db, 'tally'))!.checkpoint).toBe(checkpointBefore);
    child.kill('SIGKILL');
    await once(child, 'exit');

    expect((await tallyRows(test)).length).toBe(rowsBefore);
    const restarted = runner(test, store);
    await restarted.start();
    await waitUntil(() => caughtUp(test, store), 30_000, 'the restarted projector');
    const live = (await tallyRows(test)).map((row) => ({ ...row }));
    expect(live).toHaveLength(rowsBefore + 100);
    expect(live.every((row) => row.applied === 1)).toBe(true);

    const building = await startRebuild(test.database.db, tallyProjection);
    await waitUntil(async () => (await liveGeneration(test.database.db, 'tally'))?.generation === building.generation, 30_000, 'the rebuild');
    await restarted.stop();
    expect(await tallyRows(test)).toEqual(live);
  });

  it('two projector processes racing apply each batch once', async () => {
    const rowsBefore = (await tallyRows(test)).length;
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/projector-follow.ts', test.url, '5'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitUntil(() => output.includes('READY'), 30_000, 'the child projector process');
    let appliedHere = 0;
    const here = runner(test, store, { batchSize: 5, onBatchApplied: (_name, _generation, batch) => void (appliedHere += batch.events.length) });
    await here.start();
    await Promise.all([appendTally(store, 10, 5), appendTally(store, 10, 5)]);
    await waitUntil(() => caughtUp(test, store), 30_000, 'both processes to catch up');
    // Whichever held the projection, the other takes over once the child stops.
    child.kill('SIGTERM');
    await once(child, 'exit');
    await Promise.all([appendTally(store, 10, 5), appendTally(store, 10, 5)]);
    await waitUntil(() => caughtUp(test, store), 30_000, 'the remaining process to catch up');
    await here.stop();

    const rows = await tallyRows(test);
    expect(rows).toHaveLength(rowsBefore + 200);
    expect(rows.filter((row) => row.applied !== 1)).toEqual([]);
    // Every batch applied by one process only: the events both report sum to exactly the events appended.
    const appliedThere = [...output.matchAll(/APPLIED (\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0);
    expect(appliedThere + appliedHere).toBe(200);
    expect(appliedHere).toBeGreaterThan(0);
  });

  it('reports every checkpoint once it has committed, a batch or a move past events it does not handle, in order', async () => {
    // Each report is checked against the checkpoint as another session reads it at that moment.
    const reports: { name: string; checkpoint: string | null; row: Promise<string | null | undefined> }[] = [];
    const projector = runner(test, store, {
      batchSize: 4,
      onCheckpoint: (name, generation, checkpoint) => void reports.push({ name, checkpoint, row: seenCheckpoint(test, name, generation) }),
    });
    await projector.start();
    await appendTally(store, 3, 5);
    // Events the projection does not handle: its checkpoint moves past them without a batch.
    await appendTally(store, 2, 3, 'Ignored');
    await waitUntil(() => caughtUp(test, store), 20_000, 'projection to catch up');
    await projector.stop();

    const head = (await store.head())!.position;
    expect(new Set(reports.map((report) => report.name))).toEqual(new Set(['tally']));
    expect(reports.at(-1)?.checkpoint).toBe(head);
    const seen = await Promise.all(reports.map(async (report) => ({ reported: report.checkpoint, row: await report.row })));
    for (const { reported, row } of seen) expect(row! >= reported!).toBe(true);
    const reported = seen.map((report) => report.reported!);
    expect(reported).toEqual([...reported].sort());
    expect(new Set(reported).size).toBe(reported.length);
  });
  it("announces a process manager's batch as an appender in its first statement, gives it a transaction id only at its first write, and applies it once", async () => {
    // Each `Shouted` is answered by an `Echoed` in a new stream of its own, appended in the batch's transaction.
    const held: boolean[] = [];
    // Whether the batch's transaction had an id (which holds back every reader's horizon) while the handler read.
    const idWhileReading: boolean[] = [];
    const echo = defineProcessManager<object, { type: 'Shouted'; data: { n: number } }>({
      name: 'echo',
      version: 1,
      migrations: {},
      canHandle: ['Shouted'],
      async handle(db, events, context) {
        // The appender announcement (a shared advisory lock) is held before the batch's work writes anything.
        const lock = await sql<{ held: boolean }>`
          select exists (select 1 from pg_locks where locktype = 'advisory' and pid = pg_backend_pid() and mode = 'ShareLock' and objsubid = 2 and granted) as held`.execute(
          db,
        );
        held.push(lock.rows[0]!.held);
        const id = await sql<{ assigned: boolean }>`select pg_current_xact_id_if_assigned() is not null as assigned`.execute(db);
        idWhileReading.push(id.rows[0]!.assigned);
        await context.append(
          events.map((event) => ({
            stream: `echo-${event.data.n}`,
            expectedRevision: 'no_stream' as const,
            events: [{ type: 'Echoed', data: { n: event.data.n } }],
          })),
        );
      },
    });
    await prepareProjections(test.database.db, [echo]);
    let announcements = 0;
    const announceAppender = store.announceAppender.bind(store);
    store.announceAppender = (trx) => {
      announcements++;
      return announceAppender(trx);
    };
    const manager = new ProjectionRunner(test.database, store, [echo], silent, { scanIntervalMs: 100, leaseMs: 1500, batchSize: 7 });
    try {
      await manager.start();
      for (let n = 0; n < 40; n++) await store.append(`shout-${n}`, [{ type: 'Shouted', data: { n } }]);
      const echoes = () =>
        sql<{
          n: number;
          count: number;
        }>`select (data ->> 'n')::int as n, count(*)::int as count from es_events where event_type = 'Echoed' group by 1 order by 1`.execute(test.database.db);
      await waitUntil(async () => (await echoes()).rows.length === 40, 20_000, 'every shout to be echoed');
      await manager.stop();
      expect((await echoes()).rows).toEqual(Array.from({ length: 40 }, (_, n) => ({ n, count: 1 })));
      expect(held.length).toBeGreaterThan(0);
      expect(held.every(Boolean)).toBe(true);
      expect(idWhileReading).toHaveLength(held.length);
      expect(idWhileReading.some(Boolean)).toBe(false);
      // No statement of its own: the batch's first statement took it, and the appends knew.
      expect(announcements).toBe(0);
    } finally {
      await manager.stop();
      delete (store as { announceAppender?: unknown }).announceAppender;
    }
  });
  it("passes over the events a process manager's interest declines, without a batch, and learns from the others in log order", async () => {
    type Configured = { type: 'Configured'; data: { organisationId: string } };
    type Fact = { type: 'Fact'; data: { organisationId: string; n: number } };
    const handed: string[] = [];
    const loads: string[][] = [];
    const relay = defineProcessManager<{ relay_organisations: { id: string } }, Configured | Fact>({
      name: 'relay',
      version: 1,
      migrations: {
        '0001': {
          async up(db) {
            await db.schema
              .createTable('relay_organisations')
              .addColumn('id', 'text', (c) => c.primaryKey())
              .execute();
          },
        },
      },
      canHandle: ['Configured', 'Fact'],
      interest: () => {
        const configured = new Set<string>();
        return {
          async load(db) {
            configured.clear();
            for (const row of await db.selectFrom('relay_organisations').select('id').execute()) configured.add(row.id);
            loads.push([...configured].sort());
          },
          wants(event) {
            if (event.type === 'Configured') {
              configured.add(event.data.organisationId);
              return true;
            }
            return configured.has(event.data.organisationId);
          },
        };
      },
      async handle(db, events, context) {
        for (const event of events) {
          handed.push(event.type === 'Fact' ? `${event.data.organisationId}:${event.data.n}` : `configured ${event.data.organisationId}`);
          if (event.type === 'Configured')
            await db
              .insertInto('relay_organisations')
              .values({ id: event.data.organisationId })
              .onConflict((oc) => oc.doNothing())
              .execute();
          else
            await context.append([
              {
                stream: `relayed-${event.data.organisationId}-${event.data.n}`,
                expectedRevision: 'no_stream',
                events: [{ type: 'Relayed', data: event.data }],
              },
            ]);
        }
      },
    });
    await prepareProjections(test.database.db, [relay]);
    const caughtUpRelay = async () => {
      const head = await store.head();
      return head !== null && (await seenCheckpoint(test, 'relay')) === head.position;
    };
    const relayed = async () =>
      (
        await sql<{ stream_name: string }>`select stream_name from es_events where event_type = 'Relayed' order by global_position`.execute(test.database.db)
      ).rows.map((row) => row.stream_name);
    const fact = (organisationId: string, n: number) => ({ type: 'Fact', data: { organisationId, n } });

    let manager = new ProjectionRunner(test.database, store, [relay], silent, { scanIntervalMs: 100, leaseMs: 1500 });
    try {
      await manager.start();
      // Organisation b is configured in the same append (one page) as its first fact, before it in the log.
      await store.append('relay-input-1', [fact('a', 1), { type: 'Configured', data: { organisationId: 'b' } }, fact('b', 2), fact('a', 3)]);
      await store.append('relay-input-2', [fact('a', 4)]);
      await waitUntil(caughtUpRelay, 20_000, 'the relay to pass every event');
      await manager.stop();
      expect(handed).toEqual(['configured b', 'b:2']);
      expect(await relayed()).toEqual(['relayed-b-2']);

      // A new worker loads what the tables say (b) before its first page; a later configuration counts from its place in the log.
      handed.length = 0;
      loads.length = 0;
      manager = new ProjectionRunner(test.database, store, [relay], silent, { scanIntervalMs: 100, leaseMs: 1500 });
      await manager.start();
      await store.append('relay-input-3', [fact('c', 5), fact('b', 6), { type: 'Configured', data: { organisationId: 'c' } }, fact('c', 7), fact('a', 8)]);
      await waitUntil(caughtUpRelay, 20_000, 'the relay to pass the later events');
      await manager.stop();
      expect(loads[0]).toEqual(['b']);
      expect(handed).toEqual(['b:6', 'configured c', 'c:7']);
      expect(await relayed()).toEqual(['relayed-b-2', 'relayed-b-6', 'relayed-c-7']);
    } finally {
      await manager.stop();
    }
  });
  it("wakes this process's readers when a process manager's batch that held the horizon ends without appending", async () => {
    // The manager's batch takes a transaction id, so it holds every reader's horizon; while it is open an event
    // appended elsewhere is committed but hidden, and the tally's reads find nothing new. It then commits
    // without appending: no NOTIFY says so. The poll is an hour here, so only the runtime's own wake-up can
    // show the event to the tally before the test times out.
    const reads: ('started' | 'done')[] = [];
    const readAll = store.readAll.bind(store);
    store.readAll = async (options) => {
      reads.push('started');
      try {
        return await readAll(options);
      } finally {
        reads.push('done');
      }
    };
    let hidden: string | null = null;
    const holder = defineProcessManager<object, { type: 'Held'; data: object }>({
      name: 'holder',
      version: 1,
      migrations: {},
      canHandle: ['Held'],
      async handle(db) {
        await sql`select pg_current_xact_id()`.execute(db);
        const stream = `tally-hidden-${Math.random().toString(36).slice(2)}`;
        await store.append(stream, [{ type: 'Counted', data: {} }]);
        hidden = stream;
        // Until the reads that its wake-ups start have come back (the event hidden from them), at most 2 s.
        const from = reads.length;
        await waitUntil(() => reads.slice(from).filter((step) => step === 'done').length >= 2, 2000).catch(() => undefined);
      },
    });
    await prepareProjections(test.database.db, [tallyProjection, holder]);
    const both = new ProjectionRunner(test.database, store, [tallyProjection, holder], silent, {
      scanIntervalMs: 100,
      leaseMs: 1500,
      idlePollMs: 3_600_000,
      liveBatchIntervalMs: 0,
    });
    try {
      await both.start();
      await store.append(`held-${Math.random().toString(36).slice(2)}`, [{ type: 'Held', data: {} }]);
      await waitUntil(() => hidden !== null, 20_000, 'the manager to append while it holds the horizon');
      await waitUntil(
        async () => (await test.database.db.selectFrom('tally').select('applied').where('stream', '=', hidden!).executeTakeFirst()) !== undefined,
        20_000,
        'the tally to apply the event the batch had hidden',
      );
    } finally {
      await both.stop();
      delete (store as { readAll?: unknown }).readAll;
    }
  });
  it("moves a process manager's checkpoint and commits in one message, and rolls the batch back when a rival moved it meanwhile", async () => {
    const handed: number[][] = [];
    const purposes = new Map<string, number>();
    let observing = false;
    test.database.observeStatements((purpose) => {
      if (observing) purposes.set(purpose, (purposes.get(purpose) ?? 0) + 1);
    });
    let rivalMovedTo: string | null = null;
    const guarded = defineProcessManager<object, { type: 'Guarded'; data: { n: number } }>({
      name: 'guarded',
      version: 1,
      migrations: {},
      canHandle: ['Guarded'],
      async handle(_db, events, context) {
        handed.push(events.map((event) => event.data.n));
        await context.append(events.map((event) => ({ stream: `guarded-echo-${event.data.n}`, events: [{ type: 'GuardedEcho', data: { n: event.data.n } }] })));
        if (rivalMovedTo === null) {
          // A rival (another session, outside the lock this batch holds) applied the first event and moved the row.
          rivalMovedTo = events[0]!.position;
          await test.database.db.updateTable('projection_generations').set({ checkpoint: rivalMovedTo }).where('name', '=', 'guarded').execute();
        }
      },
    });
    await prepareProjections(test.database.db, [guarded]);
    const manager = new ProjectionRunner(test.database, store, [guarded], silent, { scanIntervalMs: 100, leaseMs: 1500 });
    try {
      await manager.start();
      await waitUntil(
        async () => (await seenCheckpoint(test, 'guarded')) === ((await store.head())?.position ?? null),
        20_000,
        'the manager to reach the head',
      );
      observing = true;
      await store.append(
        'guarded-input',
        [1, 2, 3].map((n) => ({ type: 'Guarded', data: { n } })),
      );
      await waitUntil(async () => (await seenCheckpoint(test, 'guarded')) === (await store.head())?.position, 20_000, 'the manager to pass the three events');
      await manager.stop();
      observing = false;
      // Its first batch was rolled back, its echoes with it; it went on from where the rival left the row.
      expect(handed).toEqual([
        [1, 2, 3],
        [2, 3],
      ]);
      const echoes = await sql<{ n: number }>`select (data ->> 'n')::int as n from es_events where event_type = 'GuardedEcho' order by global_position`.execute(
        test.database.db,
      );
      expect(echoes.rows).toEqual([{ n: 2 }, { n: 3 }]);
      // Each batch: its claim (BEGIN with it) and its move with the COMMIT; the only transaction statement of
      // their own is the ROLLBACK of the batch the rival overtook.
      expect(purposes.get('checkpoint')).toBe(2 * handed.length);
      expect(purposes.get('transaction')).toBe(1);
    } finally {
      await manager.stop();
    }
  });
  it("begins each batch's transaction in its checkpoint's statement: a checkpoint and a commit per batch, no BEGIN of its own", async () => {
    const purposes = new Map<string, number>();
    let observing = false;
    test.database.observeStatements((purpose) => {
      if (observing) purposes.set(purpose, (purposes.get(purpose) ?? 0) + 1);
    });
    let batches = 0;
    const projector = runner(test, store, { batchSize: 5, onBatchApplied: () => void batches++ });
    observing = true;
    await projector.start();
    await appendTally(store, 6, 5);
    await waitUntil(() => caughtUp(test, store), 20_000, 'projection to catch up');
    await projector.stop();
    observing = false;
    expect(batches).toBeGreaterThan(0);
    expect(purposes.get('checkpoint')).toBe(batches);
    // The batches' COMMITs, and no other transaction statement.
    expect(purposes.get('transaction')).toBe(batches);
  });
});
