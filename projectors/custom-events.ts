import { sql } from 'kysely';
import type { CustomEventEvent, CustomEventPayload } from '../domain/custom-event.ts';
import type { Int8, Json, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { unnestRows, type ArrayElement } from './unnest.ts';

/**
 * The columns of a batch's new events, each one JSON array (`unnestRows`): PostgreSQL reads 4,000 of the
 * bench's custom events in 14 ms this way against 30-34 ms as one array of row objects (`json_populate_recordset`,
 * which builds a hash of every object's keys and parses each payload twice).
 */
const COLUMN_TYPES = {
  id: 'text',
  organisation_id: 'text',
  community_id: 'text',
  user_id: 'text',
  external_user_id: 'text',
  name: 'text',
  // Payloads are objects and tags arrays: their JSON text reads back as the value (see `unnestRows`).
  payload: 'jsonb',
  nonce: 'text',
  event_source_id: 'text',
  source_type: 'text',
  tags: 'jsonb',
  created_at: 'timestamptz',
} as const satisfies { readonly [Column in keyof CustomEventRow]: ArrayElement };
/** The lists an event joins, per row of `recorded` or `inserted` (see `apply`), grouped to their counts. */
const LISTS = sql`cross join lateral (values ('all', ''), ('user', user_id), ('community', community_id), ('name', name)) as list(dimension, value)
  group by organisation_id, list.dimension, list.value`;
const API_TAGS = ['custom'];
const LINK_TAGS = ['custom', 'link'];

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
  // 3: a rebuild counts the lists once, at its end (`staging`); a process of version 2 must not take it over.
  version: 3,
  tables: ['custom_events', 'custom_event_counts'],
  // The counts too: a rebuild writes them once, at its end, where `SET LOGGED` would write them again.
  loggedWhileBuilding: ['custom_events', 'custom_event_counts'],
  /**
   * A rebuild's batches insert the events alone, and the lists are counted once from them all when it is made
   * durable: the counts are the events' own, so nothing needs staging. Upserting them batch by batch took
   * about half of each batch's statement on the bench's store (14,800 moves of 3,600 counts in 4,000 events).
   */
  staging: {
    tables: [],
    create: () => Promise.resolve(),
    async fold(db) {
      await db.deleteFrom('custom_event_counts').execute();
      await db
        .with('recorded', (qc) => qc.selectFrom('custom_events').select(['organisation_id', 'user_id', 'community_id', 'name']))
        .insertInto('custom_event_counts')
        .columns(['organisation_id', 'dimension', 'value', 'count'])
        .expression(sql`select organisation_id, list.dimension, list.value, count(*) from recorded ${LISTS}`)
        .execute();
    },
  },
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
   * The events not recorded yet and the counts of the lists they joined, in one statement (a JSON parameter
   * per column whatever the batch's size; the lists counted from what the insert returns).
   */
  async apply(db, events, { staging }) {
    // An event id recorded twice keeps its first record, as `on conflict do nothing` would one by one.
    const logged = new Map<string, CustomEventEvent['data']>();
    for (const { data } of events) if (!logged.has(data.eventId)) logged.set(data.eventId, data);
    const rows = [...logged.values()].map((data) => ({
      id: data.eventId,
      organisation_id: data.organisationId,
      community_id: data.communityId,
      user_id: data.userId,
      external_user_id: data.externalUserId,
      name: data.name,
      payload: data.payload,
      nonce: data.nonce,
      event_source_id: data.source.type === 'link' ? data.source.linkId : data.source.tokenId,
      source_type: data.source.type,
      tags: data.source.type === 'link' ? LINK_TAGS : API_TAGS,
      created_at: data.occurredAt,
    }));
    const recorded = unnestRows(rows, COLUMN_TYPES);
    if (staging) {
      await db
        .insertInto('custom_events')
        .columns(recorded.columns)
        .expression(recorded.select)
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
      return;
    }
    // The lists each new event joins, counted in the same statement: nothing comes back to count here.
    await db
      .with('inserted', (qc) =>
        qc
          .insertInto('custom_events')
          .columns(recorded.columns)
          .expression(recorded.select)
          .onConflict((oc) => oc.column('id').doNothing())
          .returning(['organisation_id', 'user_id', 'community_id', 'name']),
      )
      .insertInto('custom_event_counts')
      .columns(['organisation_id', 'dimension', 'value', 'count'])
      .expression(sql`select organisation_id, list.dimension, list.value, count(*) from inserted ${LISTS}`)
      .onConflict((oc) => oc.columns(['organisation_id', 'dimension', 'value']).doUpdateSet({ count: sql`custom_event_counts.count + excluded.count` }))
      .execute();
  },
});
