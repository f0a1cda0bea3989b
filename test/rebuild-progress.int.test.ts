import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import type { Position } from '../infra/event-store/port.ts';
import { countUpTo } from '../projectors/maintenance.ts';
import { migrate } from '../service.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';

/** The real store, noting which ranges it was asked to count. */
class CountingStore extends PostgresEventStore {
  readonly asked: [Position | null, Position][] = [];

  override countBetween(after: Position | null, until: Position): Promise<number> {
    this.asked.push([after, until]);
    return super.countBetween(after, until);
  }
}

describe("a rebuild's progress counts only what the log gained", () => {
  let test: TestDatabase;
  let store: CountingStore;

  beforeAll(async () => {
    test = await freshDatabase();
    await migrate(test.database.db);
    store = new CountingStore(test.database);
  });

  afterAll(async () => {
    await store.close();
    await test.drop();
  });

  async function appended(stream: string, count: number): Promise<Position[]> {
    await store.append(
      stream,
      Array.from({ length: count }, (_, n) => ({ type: 'Counted', data: { n } })),
    );
    return (await store.readStream(stream)).map((event) => event.position);
  }

  it('counts up to a position from the nearest one counted before, and never counts a position twice', async () => {
    const first = await appended('tally-a', 5);
    expect(await countUpTo(store, null)).toBe(0);
    expect(await countUpTo(store, first[2]!)).toBe(3);
    expect(store.asked).toEqual([[null, first[2]]]);

    const second = await appended('tally-b', 4);
    expect(await countUpTo(store, second[3]!)).toBe(9);
    // From the third event on, not from the start of the log.
    expect(store.asked.at(-1)).toEqual([first[2], second[3]]);

    // Between two counted positions: from the nearest one below.
    expect(await countUpTo(store, first[4]!)).toBe(5);
    expect(store.asked.at(-1)).toEqual([first[2], first[4]]);

    const asked = store.asked.length;
    expect(await countUpTo(store, second[3]!)).toBe(9);
    expect(await countUpTo(store, first[2]!)).toBe(3);
    expect(store.asked).toHaveLength(asked);
  });

  it('agrees with a count of the whole log, whatever was counted before', async () => {
    await appended('tally-c', 3);
    const head = (await store.head())!.position;
    const total = await store.countAfter(null);
    expect(await countUpTo(store, head)).toBe(total);
    expect(await store.countBetween(null, head)).toBe(total);
  });
});
