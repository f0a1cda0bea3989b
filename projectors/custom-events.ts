import { sql, type Kysely } from 'kysely';
import type { CustomEventEvent } from '../domain/custom-event.ts';
import type { RecordedEvent } from '../infra/event-store/port.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** The lists `custom_event_counts` counts per organisation: all its events, or one user's, community's or name's (`value`). */
export type EventCountDimension = 'all' | 'user' | 'community' | 'name';

/**
 * Logged custom events as the integration API's event records: `payload` is the client's payload (the
 * record adds `name` to it), `event_source_id` the API token or the link that logged it, `tags` how it
 * was logged (`custom`, plus `link` for a link redemption). `custom_event_counts` keeps the size of each list
 * `GET /integration/events` serves without a time range, so its `totalCount` costs no scan of a long log.
 */
export const customEventsProjection: Projection = {
  name: 'custom_events',
  version: 2,
  tables: ['custom_events', 'custom_event_counts'],
  filter: { categories: ['customevent'] },
  migrations: {
    '0001_custom_events': {
      async up(db) {
        await db.schema
          .createTable('custom_events')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('external_user_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('payload', 'jsonb', (c) => c.notNull())
          .addColumn('nonce', 'text')
          .addColumn('event_source_id', 'text', (c) => c.notNull())
          .addColumn('source_type', 'text', (c) => c.notNull())
          .addColumn('tags', 'jsonb', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .execute();
        // Every list is one organisation, newest first with the id as the tie-break, optionally narrowed
        // to one user, one community or one event name.
        await db.schema.createIndex('custom_events_by_organisation').on('custom_events').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
        await db.schema
          .createIndex('custom_events_by_user')
          .on('custom_events')
          .columns(['organisation_id', 'user_id', 'created_at desc', 'id desc'])
          .execute();
        await db.schema
          .createIndex('custom_events_by_community')
          .on('custom_events')
          .columns(['organisation_id', 'community_id', 'created_at desc', 'id desc'])
          .execute();
        await db.schema.createIndex('custom_events_by_name').on('custom_events').columns(['organisation_id', 'name', 'created_at desc', 'id desc']).execute();
      },
    },
    '0002_custom_event_counts': {
      async up(db) {
        await db.schema
          .createTable('custom_event_counts')
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('dimension', 'text', (c) => c.notNull())
          .addColumn('value', 'text', (c) => c.notNull())
          .addColumn('count', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('custom_event_counts_pk', ['organisation_id', 'dimension', 'value'])
          .execute();
      },
    },
  },

  applyBatch: (db, events) => recordEvents(db, events),

  apply: (db, event) => recordEvents(db, [event]),
};

/** The events not recorded yet, in one statement, then the counts of the lists they joined, in one more. */
async function recordEvents(db: Kysely<any>, events: RecordedEvent[]): Promise<void> {
  const logged = events.flatMap((event) => (event.type === 'CustomEventLogged' ? [(event as unknown as CustomEventEvent).data] : []));
  if (logged.length === 0) return;
  const inserted = await db
    .insertInto('custom_events')
    .values(
      logged.map((data) => ({
        id: data.eventId,
        organisation_id: data.organisationId,
        community_id: data.communityId,
        user_id: data.userId,
        external_user_id: data.externalUserId,
        name: data.name,
        payload: JSON.stringify(data.payload),
        nonce: data.nonce,
        event_source_id: data.source.type === 'link' ? data.source.linkId : data.source.tokenId,
        source_type: data.source.type,
        tags: JSON.stringify(data.source.type === 'link' ? ['custom', 'link'] : ['custom']),
        created_at: data.occurredAt,
      })),
    )
    .onConflict((oc) => oc.column('id').doNothing())
    .returning(['organisation_id', 'user_id', 'community_id', 'name'])
    .execute();
  const counts = new Map<string, { organisation_id: string; dimension: EventCountDimension; value: string; count: number }>();
  for (const row of inserted) {
    const lists: [EventCountDimension, string][] = [
      ['all', ''],
      ['user', row.user_id],
      ['community', row.community_id],
      ['name', row.name],
    ];
    for (const [dimension, value] of lists) {
      const key = JSON.stringify([row.organisation_id, dimension, value]);
      const count = counts.get(key) ?? { organisation_id: row.organisation_id, dimension, value, count: 0 };
      count.count += 1;
      counts.set(key, count);
    }
  }
  if (counts.size === 0) return;
  await db
    .insertInto('custom_event_counts')
    .values([...counts.values()])
    .onConflict((oc) => oc.columns(['organisation_id', 'dimension', 'value']).doUpdateSet({ count: sql`custom_event_counts.count + excluded.count` }))
    .execute();
}
