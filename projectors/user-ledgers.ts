import { sql, type ColumnType } from 'kysely';
import { ACTION_CATEGORIES, type ActionCategory } from '../domain/challenge.ts';
import type { EngagementEvent } from '../domain/engagement-events.ts';
import { defineProjection } from './projection.ts';
import { unnestRows, type ArrayElement } from './unnest.ts';

type XpColumn = `xp_${ActionCategory}`;

/** One user's ledgers in one community. */
export type UserLedgerRow = {
  organisation_id: string;
  user_id: string;
  community_id: string;
  points: number;
  challenges_completed: number;
  current_streak: number;
  longest_streak: number;
  last_extended_at: ColumnType<Date | null, string | null, string | null>;
} & Record<XpColumn, number>;

export interface UserLedgerTables {
  user_ledgers: UserLedgerRow;
}

type LedgerEvent = Extract<EngagementEvent, { type: 'PointsEarned' | 'XpEarned' | 'StreakExtended' | 'ChallengeCompleted' }>;

/** What a batch does to one ledger: amounts it adds, and the streak of its last `StreakExtended` (which sets). */
type LedgerDelta = {
  organisation_id: string;
  user_id: string;
  community_id: string;
  points: number;
  challenges_completed: number;
  current_streak: number;
  longest_streak: number;
  last_extended_at: string | null;
} & Record<XpColumn, number>;

const XP_COLUMNS = ACTION_CATEGORIES.map((category): XpColumn => `xp_${category}`);

const DELTA_TYPES: Record<keyof LedgerDelta, ArrayElement> = {
  organisation_id: 'text',
  user_id: 'text',
  community_id: 'text',
  points: 'double precision',
  ...(Object.fromEntries(XP_COLUMNS.map((column) => [column, 'double precision'])) as Record<XpColumn, ArrayElement>),
  challenges_completed: 'integer',
  current_streak: 'integer',
  longest_streak: 'integer',
  last_extended_at: 'timestamptz',
};

/**
 * Each user's ledgers per community, from the engine's facts: points, XP by category, completed challenges
 * and the daily streak. The team member record (`GET /teams`, `/me`) reads them beside the profile.
 *
 * A batch folds into one delta per (user, community) and one upsert: points, XP and completions add up;
 * the streak is set by the batch's last `StreakExtended` for the ledger (in log order), and a delta without
 * one leaves the streak as it is (its `last_extended_at` is null, which a streak never leaves behind).
 */
export const userLedgersProjection = defineProjection<UserLedgerTables, LedgerEvent>({
  name: 'user_ledgers',
  version: 1,
  tables: ['user_ledgers'],
  canHandle: ['PointsEarned', 'XpEarned', 'StreakExtended', 'ChallengeCompleted'],
  migrations: {
    '0001_user_ledgers': {
      async up(db) {
        let table = db.schema
          .createTable('user_ledgers')
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('points', 'double precision', (c) => c.notNull().defaultTo(0));
        for (const category of ACTION_CATEGORIES) table = table.addColumn(`xp_${category}`, 'double precision', (c) => c.notNull().defaultTo(0));
        await table
          .addColumn('challenges_completed', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('current_streak', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('longest_streak', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('last_extended_at', 'timestamptz')
          .addPrimaryKeyConstraint('user_ledgers_pk', ['user_id', 'community_id'])
          .execute();
      },
    },
  },

  async apply(db, events) {
    const deltas = new Map<string, LedgerDelta>();
    for (const event of events) {
      const { organisationId, userId, communityId } = event.data;
      const key = `${userId} ${communityId}`;
      let delta = deltas.get(key);
      if (!delta) {
        // The ledger's organisation is the one of its first fact (an existing ledger keeps its own).
        delta = {
          organisation_id: organisationId,
          user_id: userId,
          community_id: communityId,
          points: 0,
          ...(Object.fromEntries(XP_COLUMNS.map((column) => [column, 0])) as Record<XpColumn, number>),
          challenges_completed: 0,
          current_streak: 0,
          longest_streak: 0,
          last_extended_at: null,
        };
        deltas.set(key, delta);
      }
      switch (event.type) {
        case 'PointsEarned':
          delta.points += event.data.amount;
          break;
        case 'XpEarned':
          delta[`xp_${event.data.category}`] += event.data.amount;
          break;
        case 'ChallengeCompleted':
          delta.challenges_completed += 1;
          break;
        case 'StreakExtended':
          delta.current_streak = event.data.currentStreak;
          delta.longest_streak = event.data.longestStreak;
          delta.last_extended_at = event.data.occurredAt;
          break;
      }
    }

    const rows = unnestRows([...deltas.values()], DELTA_TYPES);
    const streakSet = sql`excluded.last_extended_at is not null`;
    await db
      .insertInto('user_ledgers')
      .columns(rows.columns)
      .expression(rows.select)
      .onConflict((oc) =>
        oc.columns(['user_id', 'community_id']).doUpdateSet({
          points: sql`user_ledgers.points + excluded.points`,
          ...Object.fromEntries(XP_COLUMNS.map((column) => [column, sql`${sql.id('user_ledgers', column)} + ${sql.id('excluded', column)}`])),
          challenges_completed: sql`user_ledgers.challenges_completed + excluded.challenges_completed`,
          current_streak: sql`case when ${streakSet} then excluded.current_streak else user_ledgers.current_streak end`,
          longest_streak: sql`case when ${streakSet} then excluded.longest_streak else user_ledgers.longest_streak end`,
          last_extended_at: sql`coalesce(excluded.last_extended_at, user_ledgers.last_extended_at)`,
        }),
      )
      .execute();
  },
});
