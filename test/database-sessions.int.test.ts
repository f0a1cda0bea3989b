import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../infra/database.ts';
import { freshDatabase } from './support/databases.ts';

/**
 * The pool's sessions when the server ends them while they are checked out: the work that holds one fails
 * with the server's error, the process goes on, and the pool hands out working sessions afterwards.
 */
const test = await freshDatabase();
afterAll(() => test.drop());

describe('a pool session the server ends while it is checked out', () => {
  it('fails the transaction that idled past its limit, without ending the process, and the pool goes on', async () => {
    const database = await openPostgres(test.url, { max: 2, timeouts: { idleInTransactionMs: 200 } });
    try {
      const outcome = await database.db
        .transaction()
        .execute(async (trx) => {
          await sql`select 1`.execute(trx);
          // Idle in the transaction long past its limit: the server ends the session between two statements.
          await new Promise((resolve) => setTimeout(resolve, 1500));
          await sql`select 2`.execute(trx);
          return 'committed';
        })
        .catch((error: unknown) => error);
      expect(outcome).toBeInstanceOf(Error);
      // Every session of the pool answers afterwards.
      const answers = await Promise.all([1, 2, 3, 4].map(async (n) => (await sql<{ n: number }>`select ${n}::int as n`.execute(database.db)).rows[0]!.n));
      expect(answers).toEqual([1, 2, 3, 4]);
    } finally {
      await database.close();
    }
  });
});
