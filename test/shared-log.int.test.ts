import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import type { Position, RecordedEvent } from '../infra/event-store/port.ts';
import { SharedLog, type LogReader } from '../projectors/runtime/shared-log.ts';
import { migrate } from '../service.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';
import { waitUntil } from './support/projections.ts';

describe('the shared log reads ahead for a rebuild of one read model', () => {
  let test: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    test = await freshDatabase();
    await migrate(test.database.db);
    store = new PostgresEventStore(test.database);
    // 45 events: four full pages of 10 and a last one of 5.
    for (let stream = 0; stream < 9; stream++)
      await store.append(
        `tally-${stream}`,
        Array.from({ length: 5 }, (_, n) => ({ type: 'Counted', data: { n } })),
      );
  });

  afterAll(async () => {
    await store.close();
    await test.drop();
  });

  /** Reads every page from `from` (the start) as the reader's worker does, and returns the events in order. */
  async function readAll(log: SharedLog, reader: LogReader, from: Position | null = null) {
    const events: RecordedEvent[] = [];
    let after = from;
    for (;;) {
      const page = await log.page(after, reader);
      if (page.checkpoint === after) return events;
      events.push(...page.events);
      after = page.checkpoint;
    }
  }

  /** Two building readers that have both asked for the log's first page, in a log of pages of 10. */
  async function twoBuildingReaders() {
    const log = new SharedLog(store, { pageSize: 10, metadata: false });
    const one: LogReader = { id: 'tally:2', building: true };
    const other: LogReader = { id: 'other:2', building: true };
    const first = await log.page(null, one);
    await log.page(null, other);
    return { log, one, other, first };
  }

  it('reads the next pages of the only building reader before it asks, and serves them from memory, unchanged', async () => {
    const log = new SharedLog(store, { pageSize: 10, metadata: false });
    const reader: LogReader = { id: 'tally:2', building: true };
    // A worker's first batch: the pages it asks for, in turn.
    const first = await log.page(null, reader);
    const second = await log.page(first.checkpoint, reader);
    expect(log.stats.reads).toBe(2);

    log.prefetch(second.checkpoint, 2, reader);
    await waitUntil(() => log.stats.reads === 4, 20_000, 'the two pages read ahead');
    const third = await log.page(second.checkpoint, reader);
    const fourth = await log.page(third.checkpoint, reader);
    expect(log.stats.reads).toBe(4);
    const alone = await readAll(new SharedLog(store, { pageSize: 10, metadata: false }), { id: 'other:1', building: true });
    expect([...third.events, ...fourth.events].map((event) => event.position)).toEqual(alone.slice(20, 40).map((event) => event.position));
  });

  it('leaves building readers that read together to the window: none of them reads ahead on its own', async () => {
    const { log, one, other, first } = await twoBuildingReaders();
    const second = await log.page(first.checkpoint, one);
    await log.page(first.checkpoint, other);
    log.prefetch(second.checkpoint, 2, one);
    log.prefetch(second.checkpoint, 2, other);
    // Every read the two still make is one they ask for: the log is read once, page by page, in order.
    expect(await readAll(log, one, second.checkpoint)).toHaveLength(25);
    expect(log.stats.reads).toBe(6);
    expect(log.stats.eventsRead).toBe(45);
    // The pages `other` has not passed yet are still in memory for it.
    let after = second.checkpoint;
    for (let page = 0; page < 3; page++) after = (await log.page(after, other)).checkpoint;
    expect(log.stats.reads).toBe(6);
  });

  it('drops a page from memory once every building reader has passed it, and reads it again if asked', async () => {
    const { log, one, other, first } = await twoBuildingReaders();
    const second = await log.page(first.checkpoint, one);
    // `other` has not passed the first page yet: it stays; `one` has, and `other` now passes it too.
    expect(log.cachedPage(null)).toBe(first);
    await log.page(first.checkpoint, other);
    expect(log.cachedPage(null)).toBeUndefined();
    expect(log.cachedPage(first.checkpoint)).toBe(second);
    // Once the slower reader leaves, the page the other stands on is the oldest it keeps.
    await log.page(second.checkpoint, one);
    log.leave(other);
    expect(log.cachedPage(first.checkpoint)).toBeUndefined();
    const reads = log.stats.reads;
    const again = await log.page(null, { id: 'late:2', building: true });
    expect(log.stats.reads).toBe(reads + 1);
    expect(again.events.map((event) => event.position)).toEqual(first.events.map((event) => event.position));
  });

  it('keeps pages behind for live readers while no generation builds', async () => {
    const log = new SharedLog(store, { pageSize: 10, metadata: false });
    const live: LogReader = { id: 'tally:1', building: false };
    const first = await log.page(null, live);
    await log.page(first.checkpoint, live);
    expect(log.cachedPage(null)).toBe(first);
  });

  it('reads nothing ahead for a live reader', async () => {
    const log = new SharedLog(store, { pageSize: 10, metadata: false });
    const live: LogReader = { id: 'tally:1', building: false };
    const first = await log.page(null, live);
    const second = await log.page(first.checkpoint, live);
    log.prefetch(second.checkpoint, 2, live);
    await log.page(second.checkpoint, live);
    expect(log.stats.reads).toBe(3);
  });
});
