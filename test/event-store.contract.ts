import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EventIdConflictError,
  WrongExpectedRevisionError,
  type EventStore,
  type NewEvent,
  type Position,
  type RecordedEvent,
  type SubscriptionBatch,
} from '../infra/event-store/port.ts';

/**
 * The behaviour every event store adapter must have. Each test writes to categories of its own, so the
 * suite can share one store (and one database) without tests seeing each other's events.
 */
export function eventStoreContract(adapter: string, open: () => Promise<{ store: EventStore; close(): Promise<void> }>) {
  describe(`event store contract: ${adapter}`, () => {
    let store: EventStore;
    let close: () => Promise<void>;

    beforeAll(async () => {
      ({ store, close } = await open());
    });
    afterAll(async () => {
      await close();
    });

    const category = () => `c${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const events = (count: number, type = 'Happened'): NewEvent[] =>
      Array.from({ length: count }, (_, i) => ({ type, data: { n: i }, metadata: { organisationId: 'org' } }));

    describe('expected revision', () => {
      it('no_stream: creates a stream, then refuses once it exists', async () => {
        const stream = `${category()}-1`;
        const first = await store.append(stream, events(2), { expectedRevision: 'no_stream' });
        expect(first.nextExpectedRevision).toBe(1n);
        const error = await store.append(stream, events(1), { expectedRevision: 'no_stream' }).catch((e) => e);
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error.actual).toBe(1n);
        expect(error.stream).toBe(stream);
      });

      it('a revision number: appends when it is the last revision, refuses otherwise', async () => {
        const stream = `${category()}-1`;
        await store.append(stream, events(1));
        const next = await store.append(stream, events(2), { expectedRevision: 0n });
        expect(next.nextExpectedRevision).toBe(2n);
        const stale = await store.append(stream, events(1), { expectedRevision: 0n }).catch((e) => e);
        expect(stale).toBeInstanceOf(WrongExpectedRevisionError);
        expect(stale.actual).toBe(2n);
        const missing = await store.append(`${category()}-1`, events(1), { expectedRevision: 0n }).catch((e) => e);
        expect(missing).toBeInstanceOf(WrongExpectedRevisionError);
        expect(missing.actual).toBe('no_stream');
      });

      it('stream_exists: refuses a missing stream, appends to an existing one', async () => {
        const stream = `${category()}-1`;
        const missing = await store.append(stream, events(1), { expectedRevision: 'stream_exists' }).catch((e) => e);
        expect(missing).toBeInstanceOf(WrongExpectedRevisionError);
        expect(missing.actual).toBe('no_stream');
        await store.append(stream, events(1));
        expect((await store.append(stream, events(1), { expectedRevision: 'stream_exists' })).nextExpectedRevision).toBe(1n);
      });

      it('any: appends whatever the stream holds', async () => {
        const stream = `${category()}-1`;
        expect((await store.append(stream, events(1), { expectedRevision: 'any' })).nextExpectedRevision).toBe(0n);
        expect((await store.append(stream, events(3))).nextExpectedRevision).toBe(3n);
      });

      it('concurrent appends at the same revision: exactly one wins', async () => {
        const stream = `${category()}-1`;
        await store.append(stream, events(1));
        const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => store.append(stream, events(1), { expectedRevision: 0n })));
        expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
        for (const outcome of outcomes.filter((o) => o.status === 'rejected')) {
          expect(outcome.reason).toBeInstanceOf(WrongExpectedRevisionError);
        }
        expect(await store.readStream(stream)).toHaveLength(2);
      });
    });

    describe('idempotency', () => {
      it('re-appending the same event ids returns the first result and appends nothing', async () => {
        const stream = `${category()}-1`;
        const batch = events(3).map((event) => ({ ...event, id: randomUUID() }));
        const first = await store.append(stream, batch, { expectedRevision: 'no_stream' });
        const again = await store.append(stream, batch, { expectedRevision: 'no_stream' });
        expect(again).toEqual(first);
        const anyAgain = await store.append(stream, batch);
        expect(anyAgain).toEqual(first);
        expect(await store.readStream(stream)).toHaveLength(3);
      });

      it('an append that reuses only some ids is a conflict and writes nothing', async () => {
        const stream = `${category()}-1`;
        const [a, b] = events(2).map((event) => ({ ...event, id: randomUUID() }));
        await store.append(stream, [a!]);
        await expect(store.append(stream, [a!, b!])).rejects.toBeInstanceOf(EventIdConflictError);
        expect(await store.readStream(stream)).toHaveLength(1);
      });
    });

    describe('readStream', () => {
      it('reads forwards and backwards, from a revision, with a limit', async () => {
        const stream = `${category()}-1`;
        await store.append(stream, events(5));
        const all = await store.readStream(stream);
        expect(all.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n, 4n]);
        expect(all.map((e) => (e.data as { n: number }).n)).toEqual([0, 1, 2, 3, 4]);
        expect(all[0]).toMatchObject({ stream, type: 'Happened', metadata: { organisationId: 'org' } });
        expect(all[0]!.createdAt).toBeInstanceOf(Date);
        expect((await store.readStream(stream, { from: 2n, limit: 2 })).map((e) => e.revision)).toEqual([2n, 3n]);
        expect((await store.readStream(stream, { direction: 'backwards' })).map((e) => e.revision)).toEqual([4n, 3n, 2n, 1n, 0n]);
        expect((await store.readStream(stream, { direction: 'backwards', from: 3n, limit: 2 })).map((e) => e.revision)).toEqual([3n, 2n]);
        expect(await store.readStream(`${category()}-missing`)).toEqual([]);
      });
    });

    describe('readAll', () => {
      it('returns events of all streams in append order, resumable after a position', async () => {
        const cat = category();
        const start = (await store.head())?.position ?? null;
        await store.append(`${cat}-a`, events(2));
        await store.append(`${cat}-b`, events(1));
        await store.append(`${cat}-a`, events(1));
        const page = await store.readAll({ after: start, filter: { categories: [cat] }, limit: 1000 });
        expect(page.events.map((e) => `${e.stream}@${e.revision}`)).toEqual([`${cat}-a@0`, `${cat}-a@1`, `${cat}-b@0`, `${cat}-a@2`]);
        const positions = page.events.map((e) => e.position);
        expect([...positions].sort()).toEqual(positions);
        expect(new Set(positions).size).toBe(positions.length);
        const rest = await store.readAll({ after: positions[1]!, filter: { categories: [cat] }, limit: 1000 });
        expect(rest.events.map((e) => e.position)).toEqual(positions.slice(2));
      });

      it('reads the same events without their metadata when asked to (metadata: false), or with it', async () => {
        const cat = category();
        const start = (await store.head())?.position ?? null;
        await store.append(`${cat}-m`, [{ type: 'Noted', data: { n: 1 }, metadata: { correlationId: 'c-1' } }]);
        const full = await store.readAll({ after: start, filter: { categories: [cat] }, limit: 1000 });
        const bare = await store.readAll({ after: start, filter: { categories: [cat] }, limit: 1000, metadata: false });
        expect(full.events[0]?.metadata.correlationId).toBe('c-1');
        const withoutMetadata = ({ metadata: _metadata, ...event }: RecordedEvent) => event;
        expect(bare.events.map(withoutMetadata)).toEqual(full.events.map(withoutMetadata));
        expect(bare.checkpoint).toBe(full.checkpoint);
        // A store that can leaves it unread; what comes instead is never someone else's metadata.
        expect([{}, full.events[0]?.metadata]).toContainEqual(bare.events[0]?.metadata);
      });

      it('pages with a limit and reports the end', async () => {
        const cat = category();
        const start = (await store.head())?.position ?? null;
        await store.append(`${cat}-1`, events(5));
        const seen: RecordedEvent[] = [];
        let after: Position | null = start;
        for (;;) {
          const page = await store.readAll({ after, limit: 2, filter: { categories: [cat] } });
          seen.push(...page.events);
          if (page.checkpoint) after = page.checkpoint;
          if (page.isEnd) break;
        }
        expect(seen.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n, 4n]);
      });

      it('pages through events of many transactions each once and in order (positions whose numbers change length included)', async () => {
        // 400 transactions: a freshly initialised server starts below transaction 1000, so this crosses 999 → 1000, where a
        // textual order of transaction ids would deliver pages out of order and events twice.
        const cat = category();
        const start = (await store.head())?.position ?? null;
        for (let i = 0; i < 400; i++) await store.append(`${cat}-${i % 7}`, [{ type: 'Happened', data: { n: i } }]);
        const seen: number[] = [];
        let after: Position | null = start;
        for (;;) {
          const page = await store.readAll({ after, limit: 25, filter: { categories: [cat] } });
          seen.push(...page.events.map((event) => (event.data as { n: number }).n));
          if (page.checkpoint) after = page.checkpoint;
          if (page.isEnd) break;
        }
        expect(seen).toEqual(Array.from({ length: 400 }, (_, i) => i));
      });

      it('filters by event type and by stream category, and its checkpoint moves past what it filtered out', async () => {
        const cat = category();
        const other = category();
        const start = (await store.head())?.position ?? null;
        await store.append(`${cat}-1`, [...events(1, 'Kept'), ...events(1, 'Dropped')]);
        await store.append(`${other}-1`, events(1, 'Kept'));
        await store.append(`${cat}-2`, events(1, 'Kept'));
        const byType = await store.readAll({ after: start, filter: { eventTypes: ['Kept'], categories: [cat, other] }, limit: 1000 });
        expect(byType.events.map((e) => e.stream)).toEqual([`${cat}-1`, `${other}-1`, `${cat}-2`]);
        const byCategory = await store.readAll({ after: start, filter: { categories: [cat] }, limit: 1000 });
        expect(byCategory.events.map((e) => e.type)).toEqual(['Kept', 'Dropped', 'Kept']);
        const head = await store.head();
        const filteredOut = await store.readAll({ after: start, filter: { categories: [category()] }, limit: 1000 });
        expect(filteredOut.events).toEqual([]);
        expect(filteredOut.checkpoint).toBe(head!.position);
      });
    });

    describe('subscribe', () => {
      it('catches up, says so, then delivers live appends, each once and in order', async () => {
        const cat = category();
        const start = (await store.head())?.position ?? null;
        await store.append(`${cat}-1`, events(3));
        const subscription = store.subscribe({ after: start, filter: { categories: [cat] }, batchSize: 2 });
        const received: RecordedEvent[] = [];
        const batches: SubscriptionBatch[] = [];
        let caughtUp = false;
        const consumed = (async () => {
          for await (const batch of subscription) {
            batches.push(batch);
            received.push(...batch.events);
            if (batch.caughtUp && !caughtUp && received.length >= 3) {
              caughtUp = true;
              await store.append(`${cat}-2`, events(2));
            }
            if (received.length >= 5) break;
          }
        })();
        await consumed;
        await subscription.close();
        expect(received.map((e) => `${e.stream}@${e.revision}`)).toEqual([`${cat}-1@0`, `${cat}-1@1`, `${cat}-1@2`, `${cat}-2@0`, `${cat}-2@1`]);
        expect(caughtUp).toBe(true);
        const checkpoints = batches.map((b) => b.checkpoint).filter((c): c is string => c !== null);
        expect([...checkpoints].sort()).toEqual(checkpoints);
      });
    });

    describe('multi-stream append', () => {
      it('appends to several streams atomically: all or nothing', async () => {
        const cat = category();
        await store.append(`${cat}-b`, events(1));
        const results = await store.appendMultiple([
          { stream: `${cat}-a`, events: events(2), expectedRevision: 'no_stream' },
          { stream: `${cat}-b`, events: events(1), expectedRevision: 0n },
        ]);
        expect(results.map((r) => r.nextExpectedRevision)).toEqual([1n, 1n]);
        const refused = await store
          .appendMultiple([
            { stream: `${cat}-c`, events: events(1), expectedRevision: 'no_stream' },
            { stream: `${cat}-b`, events: events(1), expectedRevision: 0n },
          ])
          .catch((e) => e);
        expect(refused).toBeInstanceOf(WrongExpectedRevisionError);
        expect(await store.readStream(`${cat}-c`)).toEqual([]);
        expect(await store.readStream(`${cat}-b`)).toHaveLength(2);
      });
    });

    describe('head and countAfter', () => {
      it('report the last position and how many events follow a checkpoint', async () => {
        const before = await store.head();
        await store.append(`${category()}-1`, events(3));
        const after = await store.head();
        expect(after!.position > (before?.position ?? '')).toBe(true);
        expect(await store.countAfter(before?.position ?? null)).toBeGreaterThanOrEqual(3);
        expect(await store.countAfter(after!.position)).toBe(0);
      });

      it('count the events between two positions, the first excluded and the last included', async () => {
        const stream = `${category()}-1`;
        await store.append(stream, events(4));
        const [first, second, , fourth] = (await store.readStream(stream)).map((event) => event.position);
        expect(await store.countBetween(first!, fourth!)).toBe(3);
        expect(await store.countBetween(first!, second!)).toBe(1);
        expect(await store.countBetween(fourth!, fourth!)).toBe(0);
        // From the start of the log: every event up to and including the position.
        const upToFourth = await store.countBetween(null, fourth!);
        expect(upToFourth - (await store.countBetween(null, first!))).toBe(3);
        expect(upToFourth + (await store.countAfter(fourth!))).toBe(await store.countBetween(null, (await store.head())!.position));
      });
    });
  });
}
