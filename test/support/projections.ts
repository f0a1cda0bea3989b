import { sql } from 'kysely';
import type { Projection } from '../../projectors/projection.ts';

/**
 * A read model that counts how many times each event was applied: any count other than 1 is a double
 * (or lost) application. Events of type `Poison` always fail, to exercise parking.
 */
export const tallyProjection: Projection = {
  name: 'tally',
  version: 1,
  tables: ['tally'],
  filter: { categories: ['tally'] },
  migrations: {
    '0001_tally': {
      async up(db) {
        await db.schema
          .createTable('tally')
          .addColumn('event_id', 'text', (c) => c.primaryKey())
          .addColumn('stream', 'text', (c) => c.notNull())
          .addColumn('applied', 'integer', (c) => c.notNull())
          .execute();
      },
    },
  },
  async apply(db, event) {
    if (event.type === 'Poison') throw new Error(`cannot apply ${event.id}`);
    await db
      .insertInto('tally')
      .values({ event_id: event.id, stream: event.stream, applied: 1 })
      .onConflict((oc) => oc.column('event_id').doUpdateSet({ applied: sql`tally.applied + 1` }))
      .execute();
  },
};

export async function waitUntil(condition: () => Promise<boolean> | boolean, timeoutMs = 20_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
