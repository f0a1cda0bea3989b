import { sql } from 'kysely';
import type { CustomEventLinkEvent } from '../domain/custom-event-link.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** Custom event links of each organisation and who redeemed them. */
export const customEventLinksProjection: Projection = {
  name: 'custom_event_links',
  version: 2,
  tables: ['custom_event_links', 'custom_event_link_redemptions'],
  filter: { categories: ['link'] },
  migrations: {
    '0001_custom_event_links': {
      async up(db) {
        await db.schema
          .createTable('custom_event_links')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('payload', 'jsonb', (c) => c.notNull())
          .addColumn('is_single_use', 'boolean', (c) => c.notNull())
          .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
          .addColumn('redemption_count', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('custom_event_links_by_organisation')
          .on('custom_event_links')
          .columns(['organisation_id', 'created_at desc', 'id desc'])
          .execute();
        await db.schema
          .createTable('custom_event_link_redemptions')
          .addColumn('link_id', 'text', (c) => c.notNull())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('event_id', 'text', (c) => c.notNull())
          .addColumn('redeemed_at', 'timestamptz', (c) => c.notNull())
          .addPrimaryKeyConstraint('custom_event_link_redemptions_pk', ['link_id', 'user_id'])
          .execute();
        await db.schema
          .createIndex('custom_event_link_redemptions_by_user')
          .on('custom_event_link_redemptions')
          .columns(['organisation_id', 'user_id', 'redeemed_at desc'])
          .execute();
      },
    },
    '0002_link_expiry': {
      async up(db) {
        await db.schema.alterTable('custom_event_links').addColumn('expired_at', 'timestamptz').execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as CustomEventLinkEvent;
    if (type === 'CustomEventLinkExpired') {
      await db.updateTable('custom_event_links').set({ expired_at: data.expiredAt }).where('id', '=', data.linkId).execute();
      return;
    }
    switch (type) {
      case 'CustomEventLinkCreated':
        await db
          .insertInto('custom_event_links')
          .values({
            id: data.linkId,
            organisation_id: data.organisationId,
            community_id: data.communityId,
            name: data.name,
            payload: JSON.stringify(data.payload),
            is_single_use: data.isSingleUse,
            expires_at: data.expiresAt,
            created_by: data.createdBy,
            created_at: data.createdAt,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      case 'CustomEventLinkRedeemed': {
        const inserted = await db
          .insertInto('custom_event_link_redemptions')
          .values({ link_id: data.linkId, organisation_id: data.organisationId, user_id: data.userId, event_id: data.eventId, redeemed_at: data.redeemedAt })
          .onConflict((oc) => oc.columns(['link_id', 'user_id']).doNothing())
          .returning('link_id')
          .executeTakeFirst();
        // Counted only when the redemption is new, so applying an event twice cannot count it twice.
        if (inserted) {
          await db
            .updateTable('custom_event_links')
            .set({ redemption_count: sql`redemption_count + 1` })
            .where('id', '=', data.linkId)
            .execute();
        }
        return;
      }
    }
  },
};
