import { sql } from 'kysely';
import type { CustomEventEvent, CustomEventPayload } from '../domain/custom-event.ts';
import type { Int8, Json, Timestamp } from './columns.ts';
import { CounterBatch } from './counters.ts';
import { defineProjection } from './projection.ts';

/** The lists `custom_event_counts` counts per organisation: all its events, or one user's, community's or name's (`value`). */
export type EventCountDimension = 'all' | 'user' | 'community' | 'name';

export interface CustomEventRow {
  id: string;
  organisation_id: string;
  community_id: string;
  user_id: string;
  external_user_id: string;
  name: string;
  payload: Json<CustomEventPayload>;
  nonce: string | null;
  /** The API token or the link that logged it. */
  event_source_id: string;
  source_type: 'api' | 'link';
  tags: Json<string[]>;
  created_at: Timestamp;
}

export interface CustomEventCountRow {
  organisation_id: string;
  dimension: EventCountDimension;
  /** '' for `all`. */
  value: string;
  count: Int8;
}

export interface CustomEventTables {
  custom_events: CustomEventRow;
  custom_event_counts: CustomEventCountRow;
}

/**
 * Logged custom events as the integration API's event records: `payload` is the client's payload (the
 * record adds `name` to it), `event_source_id` the API token or the link that logged it, `tags` how it
 * was logged (`custom`, plus `link` for a link redemption). `custom_event_counts` keeps the size of each list
 * `GET /integration/events` serves without a time range, so its `totalCount` costs no scan of a long log.
 */
export const customEventsProjection = defineProjection<CustomEventTables, CustomEventEvent>({
  name: 'custom_events',
  version: 2,
  tables: ['custom_events', 'custom_event_counts'],
  canHandle: ['CustomEventLogged'],
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

  /**
   * The events not recorded yet, in one statement (arrays unnested: a dozen parameters whatever the batch's
   * size), then the counts of the lists they joined, summed in memory, in one more.
   */
  async apply(db, events) {
    // An event id recorded twice keeps its first record, as `on conflict do nothing` would one by one.
    const logged = new Map<string, CustomEventEvent['data']>();
    for (const { data } of events) if (!logged.has(data.eventId)) logged.set(data.eventId, data);
    const rows = [...logged.values()];
    const column = <T>(value: (data: CustomEventEvent['data']) => T) => rows.map(value);
    const inserted = await db
      .insertInto('custom_events')
      .columns([
        'id',
        'organisation_id',
        'community_id',
        'user_id',
        'external_user_id',
        'name',
        'payload',
        'nonce',
        'event_source_id',
        'source_type',
        'tags',
        'created_at',
      ])
      .expression(
        sql`select * from unnest(
          ${column((data) => data.eventId)}::text[],
          ${column((data) => data.organisationId)}::text[],
          ${column((data) => data.communityId)}::text[],
          ${column((data) => data.userId)}::text[],
          ${column((data) => data.externalUserId)}::text[],
          ${column((data) => data.name)}::text[],
          ${column((data) => JSON.stringify(data.payload))}::jsonb[],
          ${column((data) => data.nonce)}::text[],
          ${column((data) => (data.source.type === 'link' ? data.source.linkId : data.source.tokenId))}::text[],
          ${column((data) => data.source.type)}::text[],
          ${column((data) => JSON.stringify(data.source.type === 'link' ? ['custom', 'link'] : ['custom']))}::jsonb[],
          ${column((data) => data.occurredAt)}::timestamptz[]
        )`,
      )
      .onConflict((oc) => oc.column('id').doNothing())
      .returning(['organisation_id', 'user_id', 'community_id', 'name'])
      .execute();
    const counts = new CounterBatch('custom_event_counts', ['organisation_id', 'dimension', 'value'], ['count']);
    for (const row of inserted) {
      const lists: [EventCountDimension, string][] = [
        ['all', ''],
        ['user', row.user_id],
        ['community', row.community_id],
        ['name', row.name],
      ];
      for (const [dimension, value] of lists) counts.add({ organisation_id: row.organisation_id, dimension, value }, { count: 1 });
    }
    await counts.write(db);
  },
});
