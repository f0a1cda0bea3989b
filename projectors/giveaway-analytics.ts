import { sql, type ColumnType, type Kysely } from 'kysely';
import type { AllocationDistributedEvent, GiveawayDrawnEvent } from '../domain/engagement-events.ts';
import type { LocalisedDetails } from '../domain/localised-details.ts';
import type { RewardEvent } from '../domain/reward.ts';
import { CounterBatch, writeCounters } from './counters.ts';
import { localDateOf } from './local-dates.ts';
import { BatchTimeZones, TIME_ZONE_EVENTS, createTimeZoneTable, isTimeZoneEvent, type TimeZoneEvent, type TimeZoneRow } from './organisation-time-zones.ts';
import { defineProjection, type Recorded } from './projection.ts';
import { RowBatch } from './row-batch.ts';
import type { Timestamp } from './columns.ts';

export const GIVEAWAY_ANALYTICS_PROJECTION = 'giveaway_analytics';

const TIME_ZONES = 'analytics_giveaway_organisations';

/** A timestamptz column: read back as a Date, written as an ISO string or a Date. */

export type GiveawayStatus = 'pending' | 'drawn';

export interface GiveawaysTable {
  reward_id: string;
  organisation_id: string;
  /** The reward's details by language (JSON). */
  details: ColumnType<LocalisedDetails, string, string>;
  draws_at: Timestamp;
  supply: number;
  status: GiveawayStatus;
  drawn_at: ColumnType<Date | null, string | Date | null, string | Date | null>;
  drawn_day: string | null;
  entrants: ColumnType<number, number | undefined, number>;
  winners: ColumnType<number, number | undefined, number>;
}

export interface GiveawayParticipantsTable {
  reward_id: string;
  user_id: string;
  entries: number;
  first_entry_at: Timestamp;
  first_entry_day: string;
  won: ColumnType<boolean, boolean | undefined, boolean>;
}

export interface GiveawayDaysTable {
  reward_id: string;
  day: string;
  new_entries: ColumnType<number, number | undefined, number>;
  new_participants: ColumnType<number, number | undefined, number>;
  drawings: ColumnType<number, number | undefined, number>;
}

export interface GiveawayUserDaysTable {
  reward_id: string;
  day: string;
  user_id: string;
  entries: number;
}

export interface GiveawaySourceDaysTable {
  reward_id: string;
  day: string;
  /** The payout source's kind (`action`, `challenge`, `leaderboard`, `giveaway`). */
  source: string;
  entries: number;
}

export interface GiveawayAnalyticsTables {
  analytics_giveaways: GiveawaysTable;
  analytics_giveaway_participants: GiveawayParticipantsTable;
  analytics_giveaway_days: GiveawayDaysTable;
  analytics_giveaway_user_days: GiveawayUserDaysTable;
  analytics_giveaway_source_days: GiveawaySourceDaysTable;
  /** The organisations' time zones, this read model's own copy (not exposed). */
  analytics_giveaway_organisations: TimeZoneRow;
}

type GiveawayAnalyticsEvent =
  TimeZoneEvent | Extract<RewardEvent, { type: 'RewardCreated' | 'RewardUpdated' }> | AllocationDistributedEvent | GiveawayDrawnEvent;

/** Rows as a batch holds them: JSON parsed, timestamps as loaded (Date) or as the event gave them (ISO string). */
interface GiveawayRow {
  reward_id: string;
  organisation_id: string;
  details: LocalisedDetails;
  draws_at: Date | string;
  supply: number;
  status: GiveawayStatus;
  drawn_at: Date | string | null;
  drawn_day: string | null;
  entrants: number;
  winners: number;
}

interface ParticipantRow {
  reward_id: string;
  user_id: string;
  entries: number;
  first_entry_at: Date | string;
  first_entry_day: string;
  won: boolean;
}

/** What one batch writes: the rows it folds in memory and the counters it adds. */
interface Fold {
  zones: BatchTimeZones;
  giveaways: RowBatch<GiveawayRow>;
  participants: RowBatch<ParticipantRow>;
  days: CounterBatch<'reward_id' | 'day', 'new_entries' | 'new_participants'>;
  /** (reward, day) of each draw: `drawings` is set to 1 there, not added to. */
  drawings: Map<string, { reward_id: string; day: string }>;
  userDays: CounterBatch<'reward_id' | 'day' | 'user_id', 'entries'>;
  sourceDays: CounterBatch<'reward_id' | 'day' | 'source', 'entries'>;
}

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
 *
 * A batch loads the giveaways and the (reward, user) participants it names (one read each), folds its
 * events into them in log order, and writes each table with one upsert (the per-day tables add counts).
 */
export const giveawayAnalyticsProjection = defineProjection<GiveawayAnalyticsTables, GiveawayAnalyticsEvent>({
  name: GIVEAWAY_ANALYTICS_PROJECTION,
  version: 1,
  tables: [
    'analytics_giveaways',
    'analytics_giveaway_participants',
    'analytics_giveaway_days',
    'analytics_giveaway_user_days',
    'analytics_giveaway_source_days',
  ],
  canHandle: [...TIME_ZONE_EVENTS, 'RewardCreated', 'RewardUpdated', 'AllocationDistributed', 'GiveawayDrawn'],
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

  async apply(db, events) {
    const giveawayKeys: { reward_id: string }[] = [];
    const participantKeys: { reward_id: string; user_id: string }[] = [];
    const organisations: string[] = [];
    for (const event of events) {
      switch (event.type) {
        case 'RewardCreated':
        case 'RewardUpdated':
          giveawayKeys.push({ reward_id: event.data.rewardId });
          break;
        case 'AllocationDistributed':
          if (event.data.rewardKind !== 'entries') break;
          participantKeys.push({ reward_id: event.data.rewardId, user_id: event.data.userId });
          organisations.push(event.data.organisationId);
          break;
        case 'GiveawayDrawn':
          giveawayKeys.push({ reward_id: event.data.rewardId });
          for (const winner of event.data.winners) participantKeys.push({ reward_id: event.data.rewardId, user_id: winner.userId });
          organisations.push(event.data.organisationId);
          break;
      }
    }

    const fold: Fold = {
      zones: await BatchTimeZones.load(db, TIME_ZONES, organisations),
      giveaways: new RowBatch<GiveawayRow>('analytics_giveaways', ['reward_id']),
      participants: new RowBatch<ParticipantRow>('analytics_giveaway_participants', ['reward_id', 'user_id']),
      days: new CounterBatch('analytics_giveaway_days', ['reward_id', 'day'], ['new_entries', 'new_participants']),
      drawings: new Map(),
      userDays: new CounterBatch('analytics_giveaway_user_days', ['reward_id', 'day', 'user_id'], ['entries']),
      sourceDays: new CounterBatch('analytics_giveaway_source_days', ['reward_id', 'day', 'source'], ['entries']),
    };
    await fold.giveaways.load(db, giveawayKeys);
    await fold.participants.load(db, participantKeys);

    for (const event of events) {
      if (isTimeZoneEvent(event)) fold.zones.record(event);
      else if (event.type === 'RewardCreated' || event.type === 'RewardUpdated') foldReward(fold, event);
      else if (event.type === 'AllocationDistributed') countEntries(fold, event.data);
      else recordDraw(fold, event.data);
    }

    await fold.giveaways.save(db);
    await fold.participants.save(db);
    await writeCounters(db, [fold.days, fold.userDays, fold.sourceDays]);
    // After the day counters: a draw marks a row they may have just created.
    await writeDrawings(db, [...fold.drawings.values()]);
    await fold.zones.save();
  },
});

/** Entries per (reward, local day, `by`): the primary key orders a giveaway's days first, so a range is an index range. */
async function createEntriesByDay(db: Kysely<unknown>, table: string, by: string): Promise<void> {
  await db.schema
    .createTable(table)
    .addColumn('reward_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn(by, 'text', (c) => c.notNull())
    .addColumn('entries', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint(`${table}_pk`, ['reward_id', 'day', by])
    .execute();
}

function foldReward(fold: Fold, event: Recorded<Extract<RewardEvent, { type: 'RewardCreated' | 'RewardUpdated' }>>): void {
  if (event.type === 'RewardCreated') {
    const data = event.data;
    // A second creation changes nothing (the first one wins).
    if (data.kind !== 'entries' || fold.giveaways.get({ reward_id: data.rewardId })) return;
    fold.giveaways.set({
      reward_id: data.rewardId,
      organisation_id: data.organisationId,
      details: data.details,
      draws_at: data.drawsAt,
      supply: data.supply,
      status: 'pending',
      drawn_at: null,
      drawn_day: null,
      entrants: 0,
      winners: 0,
    });
    return;
  }
  const { details, drawsAt } = event.data.changes;
  // An asset reward has no row: its changes change nothing here.
  const row = fold.giveaways.get({ reward_id: event.data.rewardId });
  if (!row || (details === undefined && drawsAt === undefined)) return;
  fold.giveaways.set({ ...row, ...(details !== undefined ? { details } : {}), ...(drawsAt !== undefined ? { draws_at: drawsAt } : {}) });
}

/** Entries into a giveaway: the user's total and first entry, and the day's, user-day's and source-day's rows. */
function countEntries(fold: Fold, handOut: AllocationDistributedEvent['data']): void {
  if (handOut.rewardKind !== 'entries') return;
  const { rewardId, userId, amount, occurredAt } = handOut;
  const day = localDateOf(occurredAt, fold.zones.of(handOut.organisationId));
  const before = fold.participants.get({ reward_id: rewardId, user_id: userId });
  let newParticipants = 0;
  if (!before) {
    fold.participants.set({ reward_id: rewardId, user_id: userId, entries: amount, first_entry_at: occurredAt, first_entry_day: day, won: false });
    newParticipants = 1;
  } else {
    // A fact stamped earlier than the first entry seen so far (a late event) becomes the first entry.
    const earlier = Date.parse(occurredAt) < new Date(before.first_entry_at).getTime();
    fold.participants.set({ ...before, entries: before.entries + amount, ...(earlier ? { first_entry_at: occurredAt, first_entry_day: day } : {}) });
    if (earlier && before.first_entry_day !== day) {
      fold.days.add({ reward_id: rewardId, day: before.first_entry_day }, { new_participants: -1 });
      newParticipants = 1;
    }
  }
  fold.days.add({ reward_id: rewardId, day }, { new_entries: amount, new_participants: newParticipants });
  fold.userDays.add({ reward_id: rewardId, day, user_id: userId }, { entries: amount });
  fold.sourceDays.add({ reward_id: rewardId, day, source: handOut.source.kind }, { entries: amount });
}

function recordDraw(fold: Fold, draw: GiveawayDrawnEvent['data']): void {
  const day = localDateOf(draw.drawnAt, fold.zones.of(draw.organisationId));
  const giveaway = fold.giveaways.get({ reward_id: draw.rewardId });
  if (giveaway) {
    fold.giveaways.set({ ...giveaway, status: 'drawn', drawn_at: draw.drawnAt, drawn_day: day, entrants: draw.entrants.length, winners: draw.winners.length });
  }
  // Only the participants there are: a winner without entries (none in practice) gets no row.
  for (const { userId } of draw.winners) {
    const participant = fold.participants.get({ reward_id: draw.rewardId, user_id: userId });
    if (participant) fold.participants.set({ ...participant, won: true });
  }
  fold.drawings.set(JSON.stringify([draw.rewardId, day]), { reward_id: draw.rewardId, day });
}

/** The draws' days: `drawings` is 1 there (set, not added: a day with a draw counts it once); one upsert. */
async function writeDrawings(db: Kysely<GiveawayAnalyticsTables>, drawings: { reward_id: string; day: string }[]): Promise<void> {
  if (drawings.length === 0) return;
  await db
    .insertInto('analytics_giveaway_days')
    .values(drawings.map((key) => ({ ...key, drawings: 1 })))
    .onConflict((oc) => oc.columns(['reward_id', 'day']).doUpdateSet({ drawings: 1 }))
    .execute();
}
