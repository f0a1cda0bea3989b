import { sql, type Kysely } from 'kysely';
import { isStreakMilestone, leaderboardCommunity, placings, type Achievement } from '../domain/achievements.ts';
import type { CustomEventLoggedData } from '../domain/custom-event.ts';
import type { EngagementEvent, LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import type { LeaderboardEvent, RankReward } from '../domain/leaderboard.ts';
import type { RecordedEvent } from '../infra/event-store/port.ts';
import { idFrom } from '../infra/ids.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

export const ACHIEVEMENTS_PROJECTION = 'achievements';

/** Events whose effect does not depend on what the projection holds: a run of them is applied in bulk. */
const BULK_TYPES = new Set(['CustomEventLogged', 'ChallengeCompleted', 'StreakExtended']);

type Range = Pick<RankReward, 'startRank' | 'endRank'>;

/**
 * The achievements users earned (see `domain/achievements.ts`), one row each, newest first per user, and
 * their number per (user, community) for the team member record. To place leaderboard ranks it keeps its
 * own copy of what it needs: each leaderboard's name, community condition and rank-reward ranges, and
 * each user's last activity per community (from custom events, as the engine picks a pay-out community).
 */
export const achievementsProjection: Projection = {
  name: ACHIEVEMENTS_PROJECTION,
  version: 1,
  tables: ['achievements', 'achievement_counts'],
  filter: {
    eventTypes: [
      'CustomEventLogged',
      'ChallengeCompleted',
      'StreakExtended',
      'LeaderboardCreated',
      'LeaderboardUpdated',
      'LeaderboardRewardsAssigned',
      'LeaderboardWindowClosed',
    ],
  },
  migrations: {
    '0001_achievements': {
      async up(db) {
        await db.schema
          .createTable('achievements')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('type', 'text', (c) => c.notNull())
          // When it was earned (`earnedAt`): named like every listed read model's order column.
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('challenge_id', 'text')
          .addColumn('run', 'integer')
          .addColumn('streak_days', 'integer')
          .addColumn('leaderboard_id', 'text')
          .addColumn('leaderboard_name', 'text')
          .addColumn('window_start', 'timestamptz')
          .addColumn('window_end', 'timestamptz')
          .addColumn('rank', 'integer')
          .addColumn('score', 'double precision')
          .execute();
        // One user's achievements newest first, optionally of one type or in one community.
        await db.schema.createIndex('achievements_by_user').on('achievements').columns(['organisation_id', 'user_id', 'created_at desc', 'id desc']).execute();
        await db.schema
          .createIndex('achievements_by_user_type')
          .on('achievements')
          .columns(['organisation_id', 'user_id', 'type', 'created_at desc', 'id desc'])
          .execute();
        await db.schema
          .createIndex('achievements_by_user_community')
          .on('achievements')
          .columns(['organisation_id', 'user_id', 'community_id', 'created_at desc', 'id desc'])
          .execute();
        await db.schema
          .createTable('achievement_counts')
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('count', 'integer', (c) => c.notNull())
          .addPrimaryKeyConstraint('achievement_counts_pk', ['user_id', 'community_id'])
          .execute();
        await db.schema
          .createTable('achievement_leaderboards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text')
          .addColumn('ranges', 'jsonb', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('achievement_activity')
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('last_active_at', 'timestamptz', (c) => c.notNull())
          .addPrimaryKeyConstraint('achievement_activity_pk', ['user_id', 'community_id'])
          .execute();
      },
    },
  },

  async applyBatch(db, events) {
    let run: RecordedEvent[] = [];
    for (const event of events) {
      if (BULK_TYPES.has(event.type)) {
        run.push(event);
        continue;
      }
      await applyInBulk(db, run);
      run = [];
      await applyOne(db, event);
    }
    await applyInBulk(db, run);
  },

  async apply(db, event) {
    if (BULK_TYPES.has(event.type)) return applyInBulk(db, [event]);
    return applyOne(db, event);
  },
};

/** The leaderboard events, which read what the projection holds: one at a time, in log order. */
function applyOne(db: Kysely<any>, event: RecordedEvent): Promise<void> {
  if (event.type === 'LeaderboardWindowClosed') return placeRanks(db, event as RecordedEvent<'LeaderboardWindowClosed', LeaderboardWindowEvent['data']>);
  return foldLeaderboard(db, event as unknown as LeaderboardEvent);
}

/** Activity and achievements of a run of events, in one statement per table. */
async function applyInBulk(db: Kysely<any>, events: RecordedEvent[]): Promise<void> {
  if (events.length === 0) return;
  const activity = new Map<string, { user_id: string; community_id: string; last_active_at: string }>();
  const earned: Achievement[] = [];
  for (const event of events) {
    if (event.type === 'CustomEventLogged') {
      const { userId, communityId, occurredAt } = event.data as CustomEventLoggedData;
      const key = `${userId} ${communityId}`;
      const known = activity.get(key);
      if (!known || Date.parse(known.last_active_at) < Date.parse(occurredAt))
        activity.set(key, { user_id: userId, community_id: communityId, last_active_at: occurredAt });
      continue;
    }
    const fact = event as unknown as EngagementEvent;
    const who = {
      id: idFrom(`achievement:${event.id}`),
      organisationId: fact.data.organisationId,
      userId: fact.data.userId,
      communityId: fact.data.communityId,
    };
    if (fact.type === 'ChallengeCompleted') {
      earned.push({ ...who, earnedAt: fact.data.occurredAt, type: 'challenge-completed', challengeId: fact.data.challengeId, run: fact.data.run });
    } else if (fact.type === 'StreakExtended' && isStreakMilestone(fact.data.currentStreak)) {
      earned.push({ ...who, earnedAt: fact.data.occurredAt, type: 'streak-milestone', streakDays: fact.data.currentStreak });
    }
  }
  if (activity.size > 0) {
    await db
      .insertInto('achievement_activity')
      .values([...activity.values()])
      .onConflict((oc) =>
        oc.columns(['user_id', 'community_id']).doUpdateSet({ last_active_at: sql`greatest(achievement_activity.last_active_at, excluded.last_active_at)` }),
      )
      .execute();
  }
  await record(db, earned);
}

/** Inserts the achievements not recorded yet and counts those per (user, community). */
async function record(db: Kysely<any>, achievements: Achievement[]): Promise<void> {
  if (achievements.length === 0) return;
  const inserted = await db
    .insertInto('achievements')
    .values(achievements.map(rowOf))
    .onConflict((oc) => oc.column('id').doNothing())
    .returning(['organisation_id', 'user_id', 'community_id'])
    .execute();
  const counts = new Map<string, { organisation_id: string; user_id: string; community_id: string; count: number }>();
  for (const row of inserted) {
    const key = `${row.user_id} ${row.community_id}`;
    const count = counts.get(key) ?? { organisation_id: row.organisation_id, user_id: row.user_id, community_id: row.community_id, count: 0 };
    count.count += 1;
    counts.set(key, count);
  }
  if (counts.size === 0) return;
  await db
    .insertInto('achievement_counts')
    .values([...counts.values()])
    .onConflict((oc) => oc.columns(['user_id', 'community_id']).doUpdateSet({ count: sql`achievement_counts.count + excluded.count` }))
    .execute();
}

function rowOf(achievement: Achievement): Record<string, unknown> {
  const common = {
    id: achievement.id,
    organisation_id: achievement.organisationId,
    user_id: achievement.userId,
    community_id: achievement.communityId,
    type: achievement.type,
    created_at: achievement.earnedAt,
  };
  switch (achievement.type) {
    case 'challenge-completed':
      return { ...common, challenge_id: achievement.challengeId, run: achievement.run };
    case 'streak-milestone':
      return { ...common, streak_days: achievement.streakDays };
    case 'leaderboard-placing':
      return {
        ...common,
        leaderboard_id: achievement.leaderboardId,
        leaderboard_name: achievement.leaderboardName,
        window_start: achievement.windowStart,
        window_end: achievement.windowEnd,
        rank: achievement.rank,
        score: achievement.score,
      };
  }
}

async function foldLeaderboard(db: Kysely<any>, event: LeaderboardEvent): Promise<void> {
  const { leaderboardId } = event.data;
  if (event.type === 'LeaderboardCreated') {
    await db
      .insertInto('achievement_leaderboards')
      .values({ id: leaderboardId, name: event.data.name, community_id: leaderboardCommunity(event.data.conditions), ranges: JSON.stringify([]) })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    return;
  }
  const changes: Record<string, unknown> = {};
  if (event.type === 'LeaderboardUpdated') {
    if (event.data.changes.name !== undefined) changes.name = event.data.changes.name;
    if (event.data.changes.conditions !== undefined) changes.community_id = leaderboardCommunity(event.data.changes.conditions);
  } else if (event.type === 'LeaderboardRewardsAssigned') {
    changes.ranges = JSON.stringify(event.data.rewards.map(({ startRank, endRank }): Range => ({ startRank, endRank })));
  }
  if (Object.keys(changes).length > 0) await db.updateTable('achievement_leaderboards').set(changes).where('id', '=', leaderboardId).execute();
}

/** A closed window's placings: every ranked user inside a rank-reward range, in the pay-out's community. */
async function placeRanks(db: Kysely<any>, event: RecordedEvent<'LeaderboardWindowClosed', LeaderboardWindowEvent['data']>): Promise<void> {
  const closed = event.data;
  const leaderboard = await db
    .selectFrom('achievement_leaderboards')
    .select(['name', 'community_id', 'ranges'])
    .where('id', '=', closed.leaderboardId)
    .executeTakeFirst();
  if (!leaderboard) return;
  const placed = placings(closed.standings, leaderboard.ranges as Range[]);
  if (placed.length === 0) return;
  const communities = leaderboard.community_id
    ? new Map(placed.map((standing) => [standing.userId, leaderboard.community_id as string]))
    : await lastActiveCommunities(
        db,
        placed.map((standing) => standing.userId),
      );
  await record(
    db,
    placed.flatMap((standing): Achievement[] => {
      const communityId = communities.get(standing.userId);
      if (!communityId) return [];
      return [
        {
          id: idFrom(`achievement:${event.id}:${standing.userId}`),
          organisationId: closed.organisationId,
          userId: standing.userId,
          communityId,
          earnedAt: closed.windowEnd,
          type: 'leaderboard-placing',
          leaderboardId: closed.leaderboardId,
          leaderboardName: leaderboard.name as string,
          windowStart: closed.windowStart,
          windowEnd: closed.windowEnd,
          rank: standing.rank,
          score: standing.score,
        },
      ];
    }),
  );
}

/** Where each user was last active (latest custom event; ties by community id), in one query. */
async function lastActiveCommunities(db: Kysely<any>, userIds: string[]): Promise<Map<string, string>> {
  const rows = await db
    .selectFrom('achievement_activity')
    .select(['user_id', 'community_id'])
    .distinctOn('user_id')
    .where('user_id', 'in', userIds)
    .orderBy('user_id')
    .orderBy('last_active_at', 'desc')
    .orderBy('community_id')
    .execute();
  return new Map(rows.map((row) => [row.user_id as string, row.community_id as string]));
}
