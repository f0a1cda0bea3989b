import { sql } from 'kysely';
import { defineProjection, type Projection } from '../../projectors/projection.ts';
import type { DomainEvent } from '../../domain/decider.ts';
import type { Consumer } from '../../projectors/runtime/consumer.ts';
import { prepareProjections } from '../../projectors/runtime/index.ts';
import { migrate } from '../../service.ts';
import { freshDatabase, type TestDatabase } from './databases.ts';

export interface TallyTables {
  tally: { event_id: string; stream: string; applied: number };
}

type TallyEvent = DomainEvent<'Counted' | 'Poison', unknown>;

/**
 * A read model that counts how many times each event was applied: any count other than 1 is a double
 * (or lost) application. Events of type `Poison` always fail, to exercise parking.
 */
export const tallyProjection: Projection = defineProjection<TallyTables, TallyEvent>({
  name: 'tally',
  version: 1,
  tables: ['tally'],
  canHandle: ['Counted', 'Poison'],
  migrations: {
    '0001_tally': {
      async up(db) {
        await db.schema
          .createTable('tally')
          .addColumn('event_id', 'text', (c) => c.primaryKey())
          .addColumn('stream', 'text', (c) => c.notNull())
          .addColumn('applied', 'integer', (c) => c.notNull())
          .execute();
        // A readers' index: a rebuild defers it and builds it again before the swap.
        await db.schema.createIndex('tally_by_stream').on('tally').column('stream').execute();
      },
    },
  },
  async apply(db, events) {
    const poison = events.find((event) => event.type === 'Poison');
    if (poison) throw new Error(`cannot apply ${poison.id}`);
    // One statement for the batch; an event id twice in one batch cannot happen (ids are unique in the log).
    await db
      .insertInto('tally')
      .values(events.map((event) => ({ event_id: event.id, stream: event.stream, applied: 1 })))
      .onConflict((oc) => oc.column('event_id').doUpdateSet({ applied: sql`tally.applied + 1` }))
      .execute();
  },
});

export async function waitUntil(condition: () => Promise<boolean> | boolean, timeoutMs = 20_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A database of the test file's own, migrated, with the consumers' first generations prepared. */
export async function preparedDatabase(consumers: Consumer[]): Promise<TestDatabase> {
  const test = await freshDatabase();
  await migrate(test.database.db);
  await prepareProjections(test.database.db, consumers);
  return test;
}
