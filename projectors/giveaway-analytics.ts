import { sql, type Kysely } from 'kysely';
import type { AllocationDistributedEvent, GiveawayDrawnEvent } from '../domain/engagement-events.ts';
import type { RewardEvent } from '../domain/reward.ts';
import { localDate } from '../domain/windows.ts';
import { addTo } from './counters.ts';
import { TIME_ZONE_EVENTS, createTimeZoneTable, recordTimeZone, timeZoneOf } from './organisation-time-zones.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const GIVEAWAY_ANALYTICS_PROJECTION = 'giveaway_analytics';

const TIME_ZONES = 'analytics_giveaway_organisations';

/**
 * Giveaway analytics (`GET /analytics/rewards/stats/giveaways/overview`): each entries reward with its draw,
 * and the entries handed out into it (`AllocationDistributed` of an entries reward), rolled up per user, per
 * local day and per payout source. Days are local dates (`YYYY-MM-DD`) in the organisation's time zone at
 * the time of the fact, as leaderboards count them.
 *
 * - `analytics_giveaways`: one row per entries reward: title by language, drawsAt, supply, and once drawn
 *   drawnAt, its local day, the number of entrants and of winners;
 * - `analytics_giveaway_participants`: per (reward, user): entries, the first entry's time and day, won;
 * - `analytics_giveaway_days`: per (reward, local day): entries handed out, participants whose first entry
 *   it was, drawings (1 on the day of the draw);
 * - `analytics_giveaway_user_days`: per (reward, local day, user): entries (participants within a range);
 * - `analytics_giveaway_source_days`: per (reward, local day, payout source kind): entries.
 */
export const giveawayAnalyticsProjection: Projection = {
  name: GIVEAWAY_ANALYTICS_PROJECTION,
  version: 1,
  tables: [
    'analytics_giveaways',
    'analytics_giveaway_participants',
    'analytics_giveaway_days',
    'analytics_giveaway_user_days',
    'analytics_giveaway_source_days',
  ],
  filter: { eventTypes: [...TIME_ZONE_EVENTS, 'RewardCreated', 'RewardUpdated', 'AllocationDistributed', 'GiveawayDrawn'] },
  migrations: {
    '0001_giveaway_analytics': {
      async up(db) {
        await createTimeZoneTable(db, TIME_ZONES);
        await db.schema
          .createTable('analytics_giveaways')
          .addColumn('reward_id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('details', 'jsonb', (c) => c.notNull())
          .addColumn('draws_at', 'timestamptz', (c) => c.notNull())
          .addColumn('supply', 'integer', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('drawn_at', 'timestamptz')
          .addColumn('drawn_day', 'text')
          .addColumn('entrants', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('winners', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
        // The overview selects an organisation's giveaways by draw date, with or without a status.
        await db.schema.createIndex('analytics_giveaways_by_draw').on('analytics_giveaways').columns(['organisation_id', 'draws_at']).execute();
        await db.schema.createIndex('analytics_giveaways_by_status').on('analytics_giveaways').columns(['organisation_id', 'status', 'draws_at']).execute();
        await db.schema
          .createTable('analytics_giveaway_participants')
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('entries', 'integer', (c) => c.notNull())
          .addColumn('first_entry_at', 'timestamptz', (c) => c.notNull())
          .addColumn('first_entry_day', 'text', (c) => c.notNull())
          .addColumn('won', 'boolean', (c) => c.notNull().defaultTo(false))
          .addPrimaryKeyConstraint('analytics_giveaway_participants_pk', ['reward_id', 'user_id'])
          .execute();
        await db.schema
          .createIndex('analytics_giveaway_winners')
          .on('analytics_giveaway_participants')
          .columns(['reward_id', 'user_id'])
          .where(sql.ref('won'), '=', true)
          .execute();
        // Per (reward, day) first, so a range of days of the selected giveaways is an index range.
        await db.schema
          .createTable('analytics_giveaway_days')
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('day', 'text', (c) => c.notNull())
          .addColumn('new_entries', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('new_participants', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('drawings', 'integer', (c) => c.notNull().defaultTo(0))
          .addPrimaryKeyConstraint('analytics_giveaway_days_pk', ['reward_id', 'day'])
          .execute();
        await createEntriesByDay(db, 'analytics_giveaway_user_days', 'user_id');
        await createEntriesByDay(db, 'analytics_giveaway_source_days', 'source');
      },
    },
  },

  async apply(db, event) {
    switch (event.type) {
      case 'OrganisationCreated':
      case 'OrganisationSettingsChanged':
        return recordTimeZone(db, TIME_ZONES, event);
      case 'RewardCreated':
      case 'RewardUpdated':
        return foldReward(db, event as unknown as RewardEvent);
      case 'AllocationDistributed':
        return countEntries(db, (event as unknown as AllocationDistributedEvent).data);
      case 'GiveawayDrawn':
        return recordDraw(db, (event as unknown as GiveawayDrawnEvent).data);
    }
  },
};

/** Entries per (reward, local day, `by`): the primary key orders a giveaway's days first, so a range is an index range. */
async function createEntriesByDay(db: Kysely<any>, table: string, by: string): Promise<void> {
  await db.schema
    .createTable(table)
    .addColumn('reward_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn(by, 'text', (c) => c.notNull())
    .addColumn('entries', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint(`${table}_pk`, ['reward_id', 'day', by])
    .execute();
}

async function foldReward(db: Kysely<any>, event: RewardEvent): Promise<void> {
  if (event.type === 'RewardCreated') {
    const data = event.data;
    if (data.kind !== 'entries') return;
    await db
      .insertInto('analytics_giveaways')
      .values({
        reward_id: data.rewardId,
        organisation_id: data.organisationId,
        details: JSON.stringify(data.details),
        draws_at: data.drawsAt,
        supply: data.supply,
        status: 'pending',
      })
      .onConflict((oc) => oc.column('reward_id').doNothing())
      .execute();
    return;
  }
  if (event.type !== 'RewardUpdated') return;
  const { details, drawsAt } = event.data.changes;
  if (details === undefined && drawsAt === undefined) return;
  await db
    .updateTable('analytics_giveaways')
    .set({ ...(details !== undefined ? { details: JSON.stringify(details) } : {}), ...(drawsAt !== undefined ? { draws_at: drawsAt } : {}) })
    .where('reward_id', '=', event.data.rewardId)
    .execute();
}

/** Entries into a giveaway: the user's total and first entry, and the day's, user-day's and source-day's rows. */
async function countEntries(db: Kysely<any>, handOut: AllocationDistributedEvent['data']): Promise<void> {
  if (handOut.rewardKind !== 'entries') return;
  const { rewardId, userId, amount, occurredAt } = handOut;
  const day = localDate(occurredAt, await timeZoneOf(db, TIME_ZONES, handOut.organisationId));
  const participant = db.selectFrom('analytics_giveaway_participants').where('reward_id', '=', rewardId).where('user_id', '=', userId);
  const before = await participant.select(['first_entry_at', 'first_entry_day']).executeTakeFirst();
  let newParticipants = 0;
  if (!before) {
    await db
      .insertInto('analytics_giveaway_participants')
      .values({ reward_id: rewardId, user_id: userId, entries: amount, first_entry_at: occurredAt, first_entry_day: day })
      .execute();
    newParticipants = 1;
  } else {
    // A fact stamped earlier than the first entry seen so far (a late event) becomes the first entry.
    const earlier = Date.parse(occurredAt) < new Date(before.first_entry_at as Date).getTime();
    await db
      .updateTable('analytics_giveaway_participants')
      .set((eb) => ({ entries: eb('entries', '+', amount), ...(earlier ? { first_entry_at: occurredAt, first_entry_day: day } : {}) }))
      .where('reward_id', '=', rewardId)
      .where('user_id', '=', userId)
      .execute();
    if (earlier && before.first_entry_day !== day) {
      await addTo(db, 'analytics_giveaway_days', { reward_id: rewardId, day: before.first_entry_day }, { new_participants: -1 });
      newParticipants = 1;
    }
  }
  await addTo(db, 'analytics_giveaway_days', { reward_id: rewardId, day }, { new_entries: amount, new_participants: newParticipants });
  await addTo(db, 'analytics_giveaway_user_days', { reward_id: rewardId, day, user_id: userId }, { entries: amount });
  await addTo(db, 'analytics_giveaway_source_days', { reward_id: rewardId, day, source: handOut.source.kind }, { entries: amount });
}

async function recordDraw(db: Kysely<any>, draw: GiveawayDrawnEvent['data']): Promise<void> {
  const day = localDate(draw.drawnAt, await timeZoneOf(db, TIME_ZONES, draw.organisationId));
  await db
    .updateTable('analytics_giveaways')
    .set({ status: 'drawn', drawn_at: draw.drawnAt, drawn_day: day, entrants: draw.entrants.length, winners: draw.winners.length })
    .where('reward_id', '=', draw.rewardId)
    .execute();
  if (draw.winners.length > 0) {
    await db
      .updateTable('analytics_giveaway_participants')
      .set({ won: true })
      .where('reward_id', '=', draw.rewardId)
      .where(
        'user_id',
        'in',
        draw.winners.map((winner) => winner.userId),
      )
      .execute();
  }
  await db
    .insertInto('analytics_giveaway_days')
    .values({ reward_id: draw.rewardId, day, drawings: 1 })
    .onConflict((oc) => oc.columns(['reward_id', 'day']).doUpdateSet({ drawings: 1 }))
    .execute();
}
