import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseKeeper } from '../projectors/runtime/leases.ts';
import { migrate } from '../service.ts';
import { freshDatabase } from './support/databases.ts';

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const test = await freshDatabase({ max: 2 });

describe('projection leases on PostgreSQL', () => {
  beforeAll(async () => {
    await migrate(test.database.db);
  });
  afterAll(async () => {
    await test.drop();
  });

  it('leases wanted one after the other while the first renewal runs are all taken without a pause', async () => {
    const pauses: number[] = [];
    const keeper = new LeaseKeeper(test.database, silent, 15_000, (ms) => {
      pauses.push(ms);
      return Promise.resolve();
    });
    const stopped = new AbortController();
    // As a runner starts its workers: one after the other, each wants its lease and starts waiting for it while
    // the first one's renewal is still running.
    const names = ['first', 'second', 'third'];
    const waits = names.map((name) => {
      keeper.want(name, 1);
      return keeper.waitFor(name, 1, stopped.signal);
    });
    expect(await Promise.all(waits)).toEqual([true, true, true]);
    expect(pauses).toEqual([]);
    for (const name of names) expect(keeper.holds(name, 1)).toBe(true);
    await keeper.stop();
  });

  it('a lease another runner holds is asked for again after each pause, and taken once that runner lets it go', async () => {
    const stopped = new AbortController();
    const holder = new LeaseKeeper(test.database, silent, 15_000);
    holder.want('held', 1);
    expect(await holder.waitFor('held', 1, stopped.signal)).toBe(true);

    const pauses: number[] = [];
    const waiter = new LeaseKeeper(test.database, silent, 15_000, async (ms) => {
      pauses.push(ms);
      // The holder stops (its leases go) during the second pause.
      if (pauses.length === 2) await holder.stop();
    });
    waiter.want('held', 1);
    expect(await waiter.waitFor('held', 1, stopped.signal)).toBe(true);
    expect(pauses).toEqual([1000, 1000]);
    await waiter.stop();
  });
});
