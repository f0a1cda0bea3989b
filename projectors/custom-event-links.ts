import type { CustomEventPayload } from '../domain/custom-event.ts';
import type { CustomEventLinkEvent } from '../domain/custom-event-link.ts';
import type { Held, Json, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface CustomEventLinkRow {
  id: string;
  organisation_id: string;
  community_id: string;
  name: string;
  payload: Json<CustomEventPayload>;
  is_single_use: boolean;
  expires_at: Timestamp;
  redemption_count: number;
  created_by: string;
  created_at: Timestamp;
  /** Set by the expiry job's event. */
  expired_at: NullableTimestamp;
}

export interface CustomEventLinkRedemptionRow {
  link_id: string;
  organisation_id: string;
  user_id: string;
  event_id: string;
  redeemed_at: Timestamp;
}

export interface CustomEventLinkTables {
  custom_event_links: CustomEventLinkRow;
  custom_event_link_redemptions: CustomEventLinkRedemptionRow;
}

/** Custom event links of each organisation and who redeemed them. */
export const customEventLinksProjection = defineProjection<CustomEventLinkTables, CustomEventLinkEvent>({
  name: 'custom_event_links',
  version: 2,
  tables: ['custom_event_links', 'custom_event_link_redemptions'],
  canHandle: ['CustomEventLinkCreated', 'CustomEventLinkRedeemed', 'CustomEventLinkExpired'],
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

  /** One read per table of the links and redemptions the batch names, its events folded in log order, one upsert each. */
  async apply(db, events) {
    const links = new RowBatch<Held<CustomEventLinkRow>>('custom_event_links', ['id']);
    const redemptions = new RowBatch<Held<CustomEventLinkRedemptionRow>>('custom_event_link_redemptions', ['link_id', 'user_id']);
    await links.load(
      db,
      events.map((event) => ({ id: event.data.linkId })),
    );
    await redemptions.load(
      db,
      events.flatMap((event) => (event.type === 'CustomEventLinkRedeemed' ? [{ link_id: event.data.linkId, user_id: event.data.userId }] : [])),
    );
    for (const event of events) {
      switch (event.type) {
        case 'CustomEventLinkCreated': {
          const { data } = event;
          if (links.get({ id: data.linkId })) break;
          links.set({
            id: data.linkId,
            organisation_id: data.organisationId,
            community_id: data.communityId,
            name: data.name,
            payload: data.payload,
            is_single_use: data.isSingleUse,
            expires_at: data.expiresAt,
            redemption_count: 0,
            created_by: data.createdBy,
            created_at: data.createdAt,
            expired_at: null,
          });
          break;
        }
        case 'CustomEventLinkRedeemed': {
          const { data } = event;
          // Counted only when the redemption is new, so applying an event twice cannot count it twice.
          if (redemptions.get({ link_id: data.linkId, user_id: data.userId })) break;
          redemptions.set({
            link_id: data.linkId,
            organisation_id: data.organisationId,
            user_id: data.userId,
            event_id: data.eventId,
            redeemed_at: data.redeemedAt,
          });
          const link = links.get({ id: data.linkId });
          if (link) links.set({ ...link, redemption_count: link.redemption_count + 1 });
          break;
        }
        case 'CustomEventLinkExpired': {
          const link = links.get({ id: event.data.linkId });
          if (link) links.set({ ...link, expired_at: event.data.expiredAt });
          break;
        }
      }
    }
    await links.save(db);
    await redemptions.save(db);
  },
});
