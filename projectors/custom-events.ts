import type { CustomEventEvent } from '../domain/custom-event.ts';
import type { Projection } from './projection.ts';

/**
 * Logged custom events as the integration API's event records: `payload` is the client's payload (the
 * record adds `name` to it), `event_source_id` the API token or the link that logged it, `tags` how it
 * was logged (`custom`, plus `link` for a link redemption).
 */
export const customEventsProjection: Projection = {
  name: 'custom_events',
  version: 1,
  tables: ['custom_events'],
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
  },

  async apply(db, event) {
    const { type, data } = event as unknown as CustomEventEvent;
    switch (type) {
      case 'CustomEventLogged':
        await db
          .insertInto('custom_events')
          .values({
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
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
    }
  },
};
