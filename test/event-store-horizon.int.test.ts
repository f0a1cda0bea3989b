import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Database } from '../infra/database.ts';
import type { AppendResult, NewEvent, Position, RecordedEvent } from '../infra/event-store/port.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { migrate } from '../service.ts';
import { freshDatabase } from './support/databases.ts';

/**
 * The read horizon of the PostgreSQL store (es_horizon): a reader never passes an appender that is still
 * open, and nothing else holds it back. Readers are a second store on a pool of their own, as another
 * process would be.
 */
// A busy machine can leave an appender's transaction idle for more than the requests' second between two
// statements; what is tested here is the horizon, not those limits.
const test = await freshDatabase({ timeouts: { statementMs: 30_000, idleInTransactionMs: 30_000 } });

describe('PostgreSQL event store: the read horizon', () => {
  let store: PostgresEventStore;
  let readers: Database;
  let reader: PostgresEventStore;
  const clients: pg.Client[] = [];

  beforeAll(async () => {
    await migrate(test.database.db);
    store = new PostgresEventStore(test.database);
    readers = await openPostgres(test.url, { max: 4, timeouts: { statementMs: 30_000, idleInTransactionMs: 30_000 } });
    reader = new PostgresEventStore(readers);
    await sql`create table horizon_side (id bigint generated always as identity primary key, note text not null)`.execute(test.database.db);
    await sql`create schema horizon_read_model`.execute(test.database.db);
    await sql`create table horizon_read_model.totals (stream text primary key, events bigint not null)`.execute(test.database.db);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
    await reader?.close();
    await readers?.close();
    await store?.close();
    await test.drop();
  });

  /** A session of its own, for a transaction the test holds open. */
  async function session(url = test.url): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    await client.connect();
    clients.push(client);
    return client;
  }

  /** Everything of `category` visible to a reader now, in log order, in small pages. */
  async function visible(category: string, after: Position | null = null): Promise<RecordedEvent[]> {
    const seen: RecordedEvent[] = [];
    for (let checkpoint = after; ;) {
      const page = await reader.readAll({ after: checkpoint, limit: 7, filter: { categories: [category] } });
      seen.push(...page.events);
      if (page.checkpoint === null || page.isEnd) return seen;
      checkpoint = page.checkpoint;
    }
  }

  const category = () => `h${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const newEvents = (count: number, type = 'Happened'): NewEvent[] => Array.from({ length: count }, (_, n) => ({ id: randomUUID(), type, data: { n } }));

  /** A transaction of the event store's own database, held open by the test until `release()`. */
  function holdOpen<T>(work: (trx: Kysely<any>) => Promise<T>) {
    let release!: (commit: boolean) => void;
    const decision = new Promise<boolean>((resolve) => (release = resolve));
    let ready!: (value: T) => void;
    let failed!: (error: unknown) => void;
    const started = new Promise<T>((resolve, reject) => ((ready = resolve), (failed = reject)));
    const done = test.database.db
      .transaction()
      .execute(async (trx) => {
        const value = await work(trx).catch((error: unknown) => {
          failed(error);
          throw error;
        });
        ready(value);
        if (!(await decision)) throw new Rollback();
        return value;
      })
      .catch((error) => {
        if (error instanceof Rollback) return null;
        throw error;
      });
    return { started, done, commit: () => release(true), rollBack: () => release(false) };
  }

  describe('stress: concurrent appenders that roll back at random and commit out of order', () => {
    it('a paging reader and a subscriber get every committed event exactly once, in order, and no rolled-back one', { timeout: 300_000 }, async () => {
      const seed = Number(process.env.HORIZON_SEED ?? Date.now() % 2 ** 31);
      console.log(`[horizon stress] seed ${seed} (replay the random decisions with HORIZON_SEED=${seed})`);
      const target = Number(process.env.HORIZON_EVENTS ?? 100_000);
      const start = (await reader.head())?.position ?? null;

      const committed = new Set<string>();
      const rolledBack = new Set<string>();
      let committedCount = 0;
      let stopping = false;
      const enough = () => stopping || committedCount >= target;
      const counts = { transactions: 0, rollbacks: 0, appends: 0, multiples: 0, longWaits: 0 };

      // Eight appenders that own their transaction: an id taken, a random wait, then commit or (1 in 5) roll back.
      const transactional = async (worker: number) => {
        const random = generator(seed, worker);
        while (!enough()) {
          const stream = `horizon-${random.below(500)}`;
          const events = newEvents(1 + random.below(50));
          const extra = random.below(8) === 0 ? newEvents(1 + random.below(5), 'Noted') : [];
          const announceEarly = random.below(10) === 0;
          const rollBack = random.below(5) === 0;
          const longWait = random.below(50) === 0;
          const wait = longWait ? 200 : random.below(21);
          const noteAfter = random.below(4) === 0;
          try {
            await test.database.db.transaction().execute(async (trx) => {
              if (announceEarly) {
                // Announced, no transaction id yet: holds nobody back.
                await store.announceAppender(trx);
                await sleep(random.below(4));
              }
              await store.appendInTransaction(trx, [{ stream, events }]);
              // A second append in the same transaction (announcing again is free), to a stream of its own.
              if (extra.length > 0) await store.appendInTransaction(trx, [{ stream: `horizon-w${worker}`, events: extra }]);
              // The rest of the work a process manager does in its batch, after the append.
              if (noteAfter) await sql`insert into horizon_side (note) values (${stream})`.execute(trx);
              await sleep(wait);
              if (rollBack) throw new Rollback();
            });
          } catch (error) {
            if (!(error instanceof Rollback)) throw error;
            for (const event of [...events, ...extra]) rolledBack.add(event.id!);
            counts.rollbacks++;
            continue;
          }
          for (const event of [...events, ...extra]) committed.add(event.id!);
          committedCount += events.length + extra.length;
          counts.transactions++;
          if (longWait) counts.longWaits++;
        }
      };
      // The one-statement path, beside them.
      const oneStatement = async () => {
        const random = generator(seed, 100);
        while (!enough()) {
          const events = newEvents(1 + random.below(50));
          await store.append(`horizon-${random.below(500)}`, events);
          for (const event of events) committed.add(event.id!);
          committedCount += events.length;
          counts.appends++;
          await sleep(random.below(3));
        }
      };
      // Several streams at once (in name order: two appenders lock streams in the same order, no deadlock).
      const multiple = async () => {
        const random = generator(seed, 200);
        while (!enough()) {
          const streams = [...new Set(Array.from({ length: 1 + random.below(4) }, () => `horizon-${random.below(500)}`))].sort();
          const appends = streams.map((stream) => ({ stream, events: newEvents(1 + random.below(20)) }));
          await store.appendMultiple(appends);
          for (const append of appends) for (const event of append.events) committed.add(event.id!);
          committedCount += appends.reduce((sum, append) => sum + append.events.length, 0);
          counts.multiples++;
          await sleep(random.below(3));
        }
      };

      // The sentinel is appended once every appender has finished: whoever delivers it has passed them all.
      const sentinel = randomUUID();
      const failures: string[] = [];

      // A reader as a subscriber written by hand: pages of random sizes, each after the last checkpoint.
      const paging = async (which: number) => {
        const random = generator(seed, 300 + which);
        const delivered: RecordedEvent[] = [];
        let checkpoint = start;
        const stop = new AbortController();
        for (;;) {
          const version = reader.appendVersion();
          const page = await reader.readAll({ after: checkpoint, limit: [1, 7, 100, 500, 1000][random.below(5)]! });
          if (page.checkpoint !== null) {
            if (checkpoint !== null && page.checkpoint <= checkpoint)
              failures.push(`paging ${which}: checkpoint went from ${checkpoint} to ${page.checkpoint}`);
            let previous = checkpoint;
            for (const event of page.events) {
              if (previous !== null && event.position <= previous) failures.push(`paging ${which}: ${event.position} after ${previous}`);
              previous = event.position;
            }
            if (previous !== page.checkpoint) failures.push(`paging ${which}: the page ends at ${previous}, its checkpoint is ${page.checkpoint}`);
            checkpoint = page.checkpoint;
            delivered.push(...page.events);
            if (page.events.some((event) => event.id === sentinel)) return delivered;
          }
          if (page.isEnd && version === reader.appendVersion()) await reader.waitForAppends(50, stop.signal);
        }
      };
      // The store's own subscription.
      const subscribing = async () => {
        const delivered: RecordedEvent[] = [];
        const subscription = reader.subscribe({ after: start, batchSize: 300 });
        let checkpoint = start;
        try {
          for await (const batch of subscription) {
            if (batch.checkpoint !== null && checkpoint !== null && batch.checkpoint < checkpoint) {
              failures.push(`subscription: checkpoint went from ${checkpoint} to ${batch.checkpoint}`);
            }
            for (const event of batch.events) {
              const previous = delivered.at(-1)?.position ?? start;
              if (previous !== null && event.position <= previous) failures.push(`subscription: ${event.position} after ${previous}`);
              if (batch.checkpoint === null || event.position > batch.checkpoint) failures.push(`subscription: ${event.position} beyond its batch`);
              delivered.push(event);
            }
            checkpoint = batch.checkpoint;
            if (batch.events.some((event) => event.id === sentinel)) return delivered;
          }
        } finally {
          await subscription.close();
        }
        return delivered;
      };
      // What the head and the count say must never go back either, however transactions interleave.
      const watching = async () => {
        let head: Position | null = start;
        let count = 0;
        let reads = 0;
        while (!stopping) {
          const now = (await reader.head())?.position ?? null;
          if (head !== null && (now === null || now < head)) failures.push(`head went from ${head} to ${now}`);
          head = now;
          const visibleNow = await reader.countAfter(start);
          if (visibleNow < count) failures.push(`countAfter went from ${count} to ${visibleNow}`);
          count = visibleNow;
          reads++;
          await sleep(5);
        }
        return reads;
      };

      const readingByPages = Promise.all([paging(0), paging(1)]);
      const readingBySubscription = subscribing();
      const watchingHead = watching();
      const began = Date.now();
      await Promise.all([...Array.from({ length: 8 }, (_, worker) => transactional(worker)), oneStatement(), multiple()]);
      const appendedIn = Date.now() - began;
      const last = await store.append('horizon-sentinel', [{ id: sentinel, type: 'Sentinel', data: {} }]);
      committed.add(sentinel);
      const [[byPages, byOtherPages], bySubscription] = await Promise.all([readingByPages, readingBySubscription]);
      stopping = true;
      const headReads = await watchingHead;
      console.log(
        `[horizon stress] ${committed.size} events committed, ${rolledBack.size} rolled back; ${counts.transactions} transactions ` +
          `(${counts.longWaits} long waits), ${counts.rollbacks} rollbacks, ${counts.appends} one-statement appends, ${counts.multiples} multi-stream appends ` +
          `in ${appendedIn} ms; read everything ${Date.now() - began} ms after the start; ${headReads} head reads`,
      );

      expect(failures).toEqual([]);
      expect(committed.size).toBeGreaterThanOrEqual(Math.min(target, 100_000));
      for (const [name, delivered] of [
        ['paging', byPages],
        ['other paging', byOtherPages],
        ['subscription', bySubscription],
      ] as const) {
        const ids = delivered.map((event) => event.id);
        const unique = new Set(ids);
        expect(unique.size, `${name}: delivered an event twice`).toBe(ids.length);
        expect(
          ids.filter((id) => rolledBack.has(id)),
          `${name}: delivered rolled-back events`,
        ).toEqual([]);
        const missing = [...committed].filter((id) => !unique.has(id));
        expect(missing.length, `${name}: committed events never delivered (first: ${missing.slice(0, 3).join(', ')})`).toBe(0);
        expect(ids.length).toBe(committed.size);
        expect(delivered.at(-1)!.position).toBe(last.position);
      }
      expect(bySubscription.map((event) => event.position)).toEqual(byPages.map((event) => event.position));
      expect(byOtherPages.map((event) => event.position)).toEqual(byPages.map((event) => event.position));
      // Rolled back means gone: not a row of the log.
      const leftovers = await sql<{ count: string }>`select count(*) as count from es_events where event_id = any(${[...rolledBack]}::uuid[])`.execute(
        test.database.db,
      );
      expect(Number(leftovers.rows[0]!.count)).toBe(0);
      expect(await reader.countAfter(start)).toBe(committed.size);
      expect((await reader.head())?.position).toBe(last.position);
    });
  });

  describe('liveness: transactions that do not append hold nobody back', () => {
    /** Appends through each path and expects every reader call to see the events at once. */
    async function expectVisibleAtOnce(blockerXid: bigint) {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      const appended: AppendResult[] = [];
      appended.push(await store.append(`${cat}-one`, newEvents(2)));
      appended.push(...(await store.appendMultiple([{ stream: `${cat}-two`, events: newEvents(1) }])));
      appended.push(
        ...(await test.database.db.transaction().execute((trx) => store.appendInTransaction(trx, [{ stream: `${cat}-three`, events: newEvents(3) }]))),
      );
      const last = appended.at(-1)!.position;

      // The blocker is older than the events and the old server-wide horizon (pg_snapshot_xmin) would stop at it.
      const xmin = await sql<{ xmin: string }>`select pg_snapshot_xmin(pg_current_snapshot())::text as xmin`.execute(readers.db);
      expect(BigInt(xmin.rows[0]!.xmin) <= blockerXid).toBe(true);
      expect(appended.every((result) => BigInt(`0x${result.position.slice(0, 16)}`) > blockerXid)).toBe(true);

      const events = await visible(cat, before);
      expect(events.map((event) => event.stream)).toEqual([`${cat}-one`, `${cat}-one`, `${cat}-two`, `${cat}-three`, `${cat}-three`, `${cat}-three`]);
      expect(events.at(-1)!.position).toBe(last);
      expect((await reader.head())?.position).toBe(last);
      expect(await reader.countAfter(before)).toBe(6);
      const page = await reader.readAll({ after: before, limit: 100 });
      expect(page.checkpoint).toBe(last);
      expect(page.isEnd).toBe(true);
    }

    async function xidOf(client: pg.Client): Promise<bigint> {
      return BigInt((await client.query<{ xid: string }>('select pg_current_xact_id()::text as xid')).rows[0]!.xid);
    }

    it('(a) a writing transaction held open in another database of the same server', async () => {
      const other = await freshDatabase();
      try {
        const elsewhere = await session(other.url);
        await elsewhere.query('begin');
        await elsewhere.query('create temp table scratch (n int)');
        await elsewhere.query('insert into scratch values (1)');
        await expectVisibleAtOnce(await xidOf(elsewhere));
      } finally {
        await other.drop();
      }
    });

    it('(b) a writing transaction held open in the same database, on a table that is not the event store', async () => {
      const side = await session();
      await side.query('begin');
      try {
        await side.query(`insert into horizon_side (note) values ('held open')`);
        await expectVisibleAtOnce(await xidOf(side));
      } finally {
        await side.query('rollback');
      }
    });

    it('(c) a long read-model batch: reads the log, writes its table, stays open', async () => {
      const batch = await session();
      await batch.query('begin');
      try {
        await batch.query('select stream_name, count(*) from es_events group by stream_name');
        await batch.query(
          `insert into horizon_read_model.totals (stream, events) select stream_name, count(*) from es_events group by stream_name
           on conflict (stream) do update set events = excluded.events`,
        );
        await expectVisibleAtOnce(await xidOf(batch));
      } finally {
        await batch.query('rollback');
      }
    });

    it('an appender that announced itself but has not written yet (no transaction id)', async () => {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      const held = holdOpen(async (trx) => {
        await store.announceAppender(trx);
        const row = await sql<{ xid: string | null }>`select pg_current_xact_id_if_assigned()::text as xid`.execute(trx);
        return row.rows[0]!.xid;
      });
      try {
        expect(await held.started).toBeNull();
        const later = await store.append(`${cat}-later`, newEvents(1));
        expect((await visible(cat, before)).map((event) => event.position)).toEqual([later.position]);
        expect((await reader.head())?.position).toBe(later.position);
      } finally {
        held.commit();
        await held.done;
      }
    });
  });

  describe('an appender still open holds back what commits after it', () => {
    it('(d) nothing after it is visible until it commits; then everything, in order, exactly once', async () => {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      const subscription = reader.subscribe({ after: before, filter: { categories: [cat] }, batchSize: 2 });
      const received: RecordedEvent[] = [];
      const consuming = (async () => {
        for await (const batch of subscription) {
          received.push(...batch.events);
          if (received.length >= 7) return;
        }
      })();

      const early = newEvents(2, 'Early');
      const held = holdOpen((trx) => store.appendInTransaction(trx, [{ stream: `${cat}-early`, events: early }]));
      let later: AppendResult[];
      try {
        const [earlyResult] = await held.started;
        later = [
          await store.append(`${cat}-b`, newEvents(1, 'Later')),
          ...(await store.appendMultiple([{ stream: `${cat}-c`, events: newEvents(2, 'Later') }])),
          ...(await test.database.db.transaction().execute((trx) => store.appendInTransaction(trx, [{ stream: `${cat}-d`, events: newEvents(2, 'Later') }]))),
        ];
        expect(later.every((result) => result.position > earlyResult!.position)).toBe(true);

        // Committed but behind an open appender: no reader sees them yet.
        expect(await visible(cat, before)).toEqual([]);
        expect((await reader.head())?.position ?? null).toBe(before);
        expect(await reader.countAfter(before)).toBe(0);
        expect((await reader.readAll({ after: before })).checkpoint).toBeNull();
      } finally {
        held.commit();
        await held.done;
      }
      await consuming;
      await subscription.close();

      const expected = ['Early', 'Early', 'Later', 'Later', 'Later', 'Later', 'Later'];
      expect(received.map((event) => event.type)).toEqual(expected);
      expect(new Set(received.map((event) => event.id)).size).toBe(7);
      expect(received.map((event) => event.position)).toEqual([...received.map((event) => event.position)].sort());
      expect(received.slice(0, 2).map((event) => event.id)).toEqual(early.map((event) => event.id));
      expect((await visible(cat, before)).map((event) => event.id)).toEqual(received.map((event) => event.id));
      expect((await reader.head())?.position).toBe(later.at(-1)!.position);
      expect(await reader.countAfter(before)).toBe(7);
    });

    it('a rolled-back appender releases what committed after it, and its own events never show', async () => {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      const early = newEvents(3, 'Early');
      const held = holdOpen((trx) => store.appendInTransaction(trx, [{ stream: `${cat}-early`, events: early }]));
      let later: AppendResult;
      try {
        await held.started;
        later = await store.append(`${cat}-later`, newEvents(1, 'Later'));
        expect(await visible(cat, before)).toEqual([]);
      } finally {
        held.rollBack();
      }
      expect(await held.done).toBeNull();
      expect((await visible(cat, before)).map((event) => event.position)).toEqual([later.position]);
      expect(await reader.countAfter(before)).toBe(1);
    });
  });

  describe('the horizon stops at running appenders and nothing else, at every instant', () => {
    it('never passes an appender that is still running (checked against each announced backend’s own transaction id)', { timeout: 300_000 }, async () => {
      // The check reads es_horizon(), then (later) which announced appenders are still running with an id
      // below it. Such an appender got its id before the horizon's snapshot and announced before that, so
      // the horizon must not be above it; if it is, a reader passes it and skips its events for good.
      await sql
        .raw(
          `create or replace function horizon_check() returns table (horizon text, passed text) language plpgsql volatile as $$
           declare h xid8 := es_horizon();
           begin
             -- What the backends run now, not the statistics es_horizon() read into this transaction's cache.
             perform pg_stat_clear_snapshot();
             return query
             select h::text, string_agg(running::text, ',')
             from pg_snapshot_xip(pg_current_snapshot()) as running
             where running < h and (running::text::bigint % 4294967296) in (
               select activity.backend_xid::text::bigint
               from pg_locks announced join pg_stat_activity activity on activity.pid = announced.pid
               where announced.locktype = 'advisory' and announced.classid = ${0x45530001} and announced.objid = ${0x41505044}
                 and announced.objsubid = 2 and activity.backend_xid is not null
                 and announced.database = (select oid from pg_database where datname = current_database()));
           end $$`,
        )
        .execute(test.database.db);
      const seed = Number(process.env.HORIZON_SEED ?? Date.now() % 2 ** 31);
      console.log(`[horizon check] seed ${seed}`);
      const checks = Number(process.env.HORIZON_CHECKS ?? 30_000);
      // A candidate is a running transaction below the horizon whose backend holds the announcement now. The
      // check reads the backends' ids and their locks one after the other, so a backend that was running a
      // non-appending transaction (the coalesced NOTIFY) and announces its next append in between looks like
      // one: a candidate is a violation only if its transaction really appended events.
      const candidates: { horizon: string; running: string }[] = [];
      let done = 0;
      const finished = () => done >= checks;
      const appending = async (worker: number) => {
        const random = generator(seed, 400 + worker);
        while (!finished()) {
          if (random.below(4) === 0) {
            await test.database.db
              .transaction()
              .execute((trx) => store.appendInTransaction(trx, [{ stream: `check-${random.below(100)}`, events: newEvents(1) }]));
          } else {
            await store.append(`check-${random.below(100)}`, newEvents(1 + random.below(3)));
          }
        }
      };
      const checking = async () => {
        while (!finished()) {
          const row = (await sql<{ horizon: string; passed: string | null }>`select * from horizon_check()`.execute(readers.db)).rows[0]!;
          done++;
          for (const running of row.passed?.split(',') ?? []) candidates.push({ horizon: row.horizon, running });
        }
      };
      await Promise.all([...Array.from({ length: 8 }, (_, worker) => appending(worker)), ...Array.from({ length: 4 }, checking)]);
      const appended = candidates.length
        ? (
            await sql<{
              id: string;
            }>`select distinct transaction_id::text as id from es_events where transaction_id::text = any(${candidates.map((c) => c.running)})`.execute(
              test.database.db,
            )
          ).rows.map((row) => row.id)
        : [];
      const violations = candidates
        .filter((candidate) => appended.includes(candidate.running))
        .map((candidate) => `es_horizon() returned ${candidate.horizon} while the appender ${candidate.running} was running`);
      console.log(`[horizon check] ${done} checks, ${candidates.length} candidates, ${violations.length} violations`);
      expect(violations).toEqual([]);
    });

    it('a transaction that an appender waits for holds nobody else back', async () => {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      const row = (await sql<{ id: string }>`insert into horizon_side (note) values ('contended') returning id`.execute(test.database.db)).rows[0]!.id;
      // X writes a row and stays open; it never appends.
      const blocker = await session();
      await blocker.query('begin');
      await blocker.query(`update horizon_side set note = 'held by X' where id = $1`, [row]);
      const x = BigInt((await blocker.query<{ xid: string }>('select pg_current_xact_id()::text as xid')).rows[0]!.xid);
      // B appends and stays open for now.
      const b = holdOpen((trx) => store.appendInTransaction(trx, [{ stream: `${cat}-b`, events: newEvents(2, 'B') }]));
      // B has its id before A starts, so B's is the older one.
      await b.started;
      // A appends (a later id than B), then waits for X's row: the oldest running appender is B, then A.
      let pidOfA!: (pid: number) => void;
      const aPid = new Promise<number>((resolve) => (pidOfA = resolve));
      const a = holdOpen(async (trx) => {
        const [result] = await store.appendInTransaction(trx, [{ stream: `${cat}-a`, events: newEvents(1, 'A') }]);
        pidOfA((await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid);
        await sql`update horizon_side set note = 'A' where id = ${row}`.execute(trx);
        return result!;
      });
      try {
        const [bResult] = await b.started;
        const pid = await aPid;
        while (
          (await sql<{ waiting: boolean }>`select exists (select 1 from pg_locks where pid = ${pid} and not granted) as waiting`.execute(readers.db)).rows[0]!
            .waiting !== true
        ) {
          await sleep(5);
        }
        expect(x < BigInt(`0x${bResult!.position.slice(0, 16)}`)).toBe(true);
        b.commit();
        await b.done;
        // B committed and is older than A, the only appender still running: X must not stop the readers.
        expect((await visible(cat, before)).map((event) => event.type)).toEqual(['B', 'B']);
        expect((await reader.head())?.position).toBe(bResult!.position);
      } finally {
        b.commit();
        await blocker.query('rollback');
        a.commit();
        await Promise.all([b.done, a.done]);
      }
      expect((await visible(cat, before)).map((event) => event.type)).toEqual(['B', 'B', 'A']);
    });
  });

  describe('refusal: a transaction that wrote before its first append', () => {
    it('is refused, and none of its writes or events survive', async () => {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      const note = `refused ${cat}`;
      const events = newEvents(2);
      const error = await test.database.db
        .transaction()
        .execute(async (trx) => {
          await sql`insert into horizon_side (note) values (${note})`.execute(trx);
          await store.appendInTransaction(trx, [{ stream: `${cat}-1`, events }]);
        })
        .catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/must announce its transaction before the transaction writes anything/);

      expect(await store.readStream(`${cat}-1`)).toEqual([]);
      expect(await visible(cat, before)).toEqual([]);
      const rows = await sql<{
        count: string;
      }>`select count(*) as count from es_events where event_id = any(${events.map((event) => event.id!)}::uuid[])`.execute(test.database.db);
      expect(Number(rows.rows[0]!.count)).toBe(0);
      const notes = await sql<{ count: string }>`select count(*) as count from horizon_side where note = ${note}`.execute(test.database.db);
      expect(Number(notes.rows[0]!.count)).toBe(0);
    });

    it('is refused too when it only took a transaction id', async () => {
      const cat = category();
      const error = await test.database.db
        .transaction()
        .execute(async (trx) => {
          await sql`select pg_current_xact_id()`.execute(trx);
          await store.appendInTransaction(trx, [{ stream: `${cat}-1`, events: newEvents(1) }]);
        })
        .catch((caught: unknown) => caught);
      expect((error as Error).message).toMatch(/must announce/);
      expect(await store.readStream(`${cat}-1`)).toEqual([]);
    });

    it('is not refused when it only read, or announced before writing', async () => {
      const cat = category();
      const before = (await reader.head())?.position ?? null;
      await test.database.db.transaction().execute(async (trx) => {
        await sql`select count(*) from horizon_side`.execute(trx);
        await store.appendInTransaction(trx, [{ stream: `${cat}-read-first`, events: newEvents(1) }]);
      });
      await test.database.db.transaction().execute(async (trx) => {
        await store.announceAppender(trx);
        await sql`insert into horizon_side (note) values (${cat})`.execute(trx);
        await store.appendInTransaction(trx, [{ stream: `${cat}-announced-first`, events: newEvents(1) }]);
      });
      expect((await visible(cat, before)).map((event) => event.stream)).toEqual([`${cat}-read-first`, `${cat}-announced-first`]);
    });
  });
});

class Rollback extends Error {}

function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}

/** mulberry32, one sequence per worker: a failing run replays its decisions from the printed seed. */
function generator(seed: number, stream: number) {
  let state = (seed ^ Math.imul(stream + 1, 0x9e3779b9)) >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { below: (n: number) => Math.floor(next() * n) };
}
