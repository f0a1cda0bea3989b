import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../infra/event-store/port.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { migrate } from '../service.ts';
import { eventStoreContract } from './event-store.contract.ts';
import { freshDatabase } from './support/databases.ts';

const test = await freshDatabase();

describe('PostgreSQL event store on a pg pool', () => {
  eventStoreContract('PostgreSQL (pg pool)', async () => {
    await migrate(test.database.db);
    const store = new PostgresEventStore(test.database);
    return { store, close: () => store.close() };
  });

  describe('a transaction that took an earlier sequence number but commits after a later one', () => {
    let store: PostgresEventStore;
    beforeAll(async () => {
      await migrate(test.database.db);
      store = new PostgresEventStore(test.database);
    });
    afterAll(async () => {
      await store.close();
      await test.drop();
    });

    it('still reaches a subscriber, exactly once, in checkpoint order', async () => {
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
  });
});
