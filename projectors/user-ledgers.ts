import { sql } from 'kysely';
import { ACTION_CATEGORIES } from '../domain/challenge.ts';
import type { EngagementEvent } from '../domain/engagement-events.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/**
 * Each user's ledgers per community, from the engine's facts: points, XP by category, completed challenges
 * and the daily streak. The team member record (`GET /teams`, `/me`) reads them beside the profile.
 */
export const userLedgersProjection: Projection = {
  name: 'user_ledgers',
  version: 1,
  tables: ['user_ledgers'],
  filter: { eventTypes: ['PointsEarned', 'XpEarned', 'StreakExtended', 'ChallengeCompleted'] },
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

  async apply(db, event) {
    const fact = event as unknown as EngagementEvent;
    const { organisationId, userId, communityId } = fact.data;
    const changes: Record<string, unknown> = (() => {
      switch (fact.type) {
        case 'PointsEarned':
          return { points: sql`points + ${fact.data.amount}` };
        case 'XpEarned':
          return { [`xp_${fact.data.category}`]: sql`${sql.ref(`xp_${fact.data.category}`)} + ${fact.data.amount}` };
        case 'ChallengeCompleted':
          return { challenges_completed: sql`challenges_completed + 1` };
        case 'StreakExtended':
          return { current_streak: fact.data.currentStreak, longest_streak: fact.data.longestStreak, last_extended_at: fact.data.occurredAt };
        default:
          return {};
      }
    })();
    if (Object.keys(changes).length === 0) return;
    await db
      .insertInto('user_ledgers')
      .values({ organisation_id: organisationId, user_id: userId, community_id: communityId })
      .onConflict((oc) => oc.columns(['user_id', 'community_id']).doNothing())
      .execute();
    await db.updateTable('user_ledgers').set(changes).where('user_id', '=', userId).where('community_id', '=', communityId).execute();
  },
};
