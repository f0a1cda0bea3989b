import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { WrongExpectedRevisionError, type RecordedEvent } from '../infra/event-store/port.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { migrate } from '../service.ts';
import { eventStoreContract } from './event-store.contract.ts';
import { freshDatabase } from './support/databases.ts';
import { waitUntil } from './support/projections.ts';

const test = await freshDatabase();

describe('PostgreSQL event store on a pg pool', () => {
  eventStoreContract('PostgreSQL (pg pool)', async () => {
    await migrate(test.database.db);
    const store = new PostgresEventStore(test.database);
    return { store, close: () => store.close() };
  });

  describe('beyond the contract', () => {
    let store: PostgresEventStore;
    beforeAll(async () => {
      await migrate(test.database.db);
      store = new PostgresEventStore(test.database);
    });
    afterAll(async () => {
      await store.close();
      await test.drop();
    });

    it('an append whose transaction took an earlier sequence number but commits after a later one still reaches a subscriber, exactly once, in checkpoint order', async () => {
      const category = `ooo${Date.now().toString(36)}`;
      const start = (await store.head())?.position ?? null;
      const subscription = store.subscribe({ after: start, filter: { categories: [category] } });
      const received: RecordedEvent[] = [];
      const consuming = (async () => {
        for await (const batch of subscription) {
          received.push(...batch.events);
          if (received.length >= 2) return;
        }
      })();

      // Transaction A appends first (earlier transaction id and global position) and stays open.
      let releaseA!: () => void;
      const holdA = new Promise<void>((resolve) => (releaseA = resolve));
      let appendedA!: () => void;
      const aHasAppended = new Promise<void>((resolve) => (appendedA = resolve));
      const transactionA = test.database.db.transaction().execute(async (trx) => {
        const [result] = await store.appendInTransaction(trx, [{ stream: `${category}-a`, events: [{ type: 'Early', data: {} }] }]);
        appendedA();
        await holdA;
        return result!;
      });
      await aHasAppended;

      // Transaction B appends later and commits first.
      const b = await store.append(`${category}-b`, [{ type: 'Late', data: {} }]);

      // While A is open, B is held back from every reader: reading by position alone would hand out B and
      // then skip A forever.
      const whileOpen = await store.readAll({ after: start, filter: { categories: [category] } });
      expect(whileOpen.events).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(received).toEqual([]);

      releaseA();
      const a = await transactionA;
      await consuming;
      await subscription.close();

      expect(a.position < b.position).toBe(true);
      expect(received.map((event) => event.type)).toEqual(['Early', 'Late']);
      expect(received.map((event) => event.position)).toEqual([a.position, b.position]);
      const everything = await store.readAll({ after: start, filter: { categories: [category] } });
      expect(everything.events.map((event) => event.type)).toEqual(['Early', 'Late']);
    });

    it('wakes other processes with the NOTIFY its append statements carry, and sends one of its own only after an append that carried none', async () => {
      const carrying = new PostgresEventStore(test.database, { notifyIntervalMs: 0 });
      const listener = new pg.Client({ connectionString: test.url });
      await listener.connect();
      let heard = 0;
      listener.on('notification', (message) => {
        if (message.channel === 'es_appended') heard++;
      });
      await listener.query('listen es_appended');
      const purposes: string[] = [];
      test.database.observeStatements((purpose) => purposes.push(purpose));
      try {
        const category = `wake${Date.now().toString(36)}`;
        // Alone (the plain statement), then two streams at once (es_append).
        for (let n = 0; n < 3; n++) await carrying.append(`${category}-${n}`, [{ type: 'Made', data: { n } }]);
        await carrying.appendMultiple([
          { stream: `${category}-a`, events: [{ type: 'Made', data: { n: 3 } }] },
          { stream: `${category}-b`, events: [{ type: 'Made', data: { n: 4 } }] },
        ]);
        expect(purposes.filter((purpose) => purpose === 'append')).toHaveLength(4);
        expect(purposes.filter((purpose) => purpose === 'notify')).toEqual([]);
        await waitUntil(() => heard >= 4, 10_000, 'the appends heard');
        expect(heard).toBeGreaterThanOrEqual(4);

        // An expectation checked without events goes in a transaction of its own, which carries no NOTIFY: one follows it.
        await carrying.appendMultiple([
          { stream: `${category}-0`, expectedRevision: 0n, events: [] },
          { stream: `${category}-c`, events: [{ type: 'Made', data: { n: 5 } }] },
        ]);
        const notifies = () => purposes.filter((purpose) => purpose === 'notify').length;
        await waitUntil(() => notifies() >= 1 && heard >= 5, 10_000, 'the NOTIFY sent alone');
        expect(notifies()).toBe(1);
        expect(heard).toBeGreaterThanOrEqual(5);

        // In a transaction of the caller's, its append statement carries the NOTIFY, delivered at the caller's commit.
        const inTransaction = await test.database.db.transaction().execute(async (trx) => {
          await carrying.announceAppender(trx);
          const before = purposes.length;
          await carrying.appendInTransaction(trx, [{ stream: `${category}-d`, events: [{ type: 'Made', data: { n: 6 } }] }], { announced: true });
          return purposes.slice(before);
        });
        expect(inTransaction).toEqual(['append']);
        await waitUntil(() => heard >= 6, 10_000, 'the append in a transaction heard');
        expect(heard).toBeGreaterThanOrEqual(6);
      } finally {
        await listener.end();
        await carrying.close();
      }
    });

    it("appends in a caller's transaction in one statement: a replay answers as the first append did, a failed expectation leaves the transaction usable", async () => {
      const category = `intrx${Date.now().toString(36)}`;
      const start = (await store.head())?.position ?? null;
      const appends = [
        { stream: `${category}-a`, expectedRevision: 'no_stream' as const, events: [{ id: randomUUID(), type: 'Made', data: { n: 1 } }] },
        {
          stream: `${category}-b`,
          events: [
            { id: randomUUID(), type: 'Made', data: { n: 2 } },
            { id: randomUUID(), type: 'Made', data: { n: 3 } },
          ],
        },
      ];
      let statements = 0;
      test.database.observeStatements((purpose) => {
        if (purpose === 'append') statements++;
      });
      const outcome = await test.database.db.transaction().execute(async (trx) => {
        await store.announceAppender(trx);
        const before = statements;
        const first = await store.appendInTransaction(trx, appends, { notify: false, announced: true });
        const appendStatements = statements - before;
        const replay = await store.appendInTransaction(trx, appends, { notify: false, announced: true });
        const refused = await store
          .appendInTransaction(trx, [{ stream: `${category}-a`, expectedRevision: 5n, events: [{ type: 'Made', data: { n: 4 } }] }], {
            notify: false,
            announced: true,
          })
          .catch((error: unknown) => error);
        return { first, appendStatements, replay, refused };
      });
      expect(outcome.appendStatements).toBe(1);
      expect(outcome.first.map((result) => [result.stream, result.nextExpectedRevision])).toEqual([
        [`${category}-a`, 0n],
        [`${category}-b`, 1n],
      ]);
      expect(outcome.replay).toEqual(outcome.first);
      expect(outcome.refused).toBeInstanceOf(WrongExpectedRevisionError);
      // The transaction committed what it appended once, and nothing of the refused append.
      const stored = await store.readAll({ after: start, filter: { categories: [category] }, limit: 100 });
      expect(stored.events.map((event) => [event.stream, event.revision, event.data])).toEqual([
        [`${category}-a`, 0n, { n: 1 }],
        [`${category}-b`, 0n, { n: 2 }],
        [`${category}-b`, 1n, { n: 3 }],
      ]);
    });

    it('gives each event its time to the millisecond it fell in, whatever the session’s time zone', async () => {
      const category = `times${Date.now().toString(36)}`;
      const stream = `${category}-1`;
      await store.append(
        stream,
        [0, 1, 2, 3].map((n) => ({ type: 'Made', data: { n } })),
      );
      // A millisecond's first microsecond and one's last, each 01:30 in New York on the night its clocks go back (EDT,
      // then EST), the first minute after they went forward, a time before 1970: each read as the millisecond it is in.
      const stored = ['2026-11-01T05:30:00.123000Z', '2026-11-01T06:30:00.999999Z', '2026-03-08T07:00:00.000500Z', '1969-12-31T23:59:59.999500Z'];
      for (const [revision, at] of stored.entries()) {
        await sql`update es_events set created_at = ${at}::timestamptz where stream_name = ${stream} and stream_revision = ${revision}`.execute(
          test.database.db,
        );
      }
      for (const zone of ['UTC', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata']) {
        const events = await test.database.db.transaction().execute(async (trx) => {
          await sql`select set_config('timezone', ${zone}, true)`.execute(trx);
          return store.readStream(stream, {}, trx);
        });
        expect(events.map((event) => event.createdAt.toISOString())).toEqual([
          '2026-11-01T05:30:00.123Z',
          '2026-11-01T06:30:00.999Z',
          '2026-03-08T07:00:00.000Z',
          '1969-12-31T23:59:59.999Z',
        ]);
      }
      const page = await store.readAll({ filter: { categories: [category] } });
      expect(page.events.map((event) => event.createdAt.getTime())).toEqual([1793511000123, 1793514600999, 1772953200000, -1]);
    });
  });
});
