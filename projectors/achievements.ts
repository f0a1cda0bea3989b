import { sql, type ColumnType, type Kysely, type QueryCreator, type Selectable } from 'kysely';
import { achievementId, isStreakMilestone, leaderboardCommunity, placings, type Achievement, type AchievementType } from '../domain/achievements.ts';
import type { CustomEventEvent } from '../domain/custom-event.ts';
import type { EngagementEvent, FrozenStanding, LeaderboardWindowEvent } from '../domain/engagement-events.ts';
import type { LeaderboardEvent, RankReward } from '../domain/leaderboard.ts';
import { defineProjection, type Recorded } from './projection.ts';
import { unnestRows } from './unnest.ts';
import type { Timestamp } from './columns.ts';

export const ACHIEVEMENTS_PROJECTION = 'achievements';

type Range = Pick<RankReward, 'startRank' | 'endRank'>;

/** A timestamptz: read back as a Date, written as an ISO string (or a Date). */

/** One achievement; the columns of the other types are null (`created_at` is when it was earned). */
export interface AchievementRow {
  id: string;
  organisation_id: string;
  user_id: string;
  community_id: string;
  type: AchievementType;
  created_at: Timestamp;
  challenge_id: string | null;
  run: number | null;
  streak_days: number | null;
  leaderboard_id: string | null;
  leaderboard_name: string | null;
  window_start: ColumnType<Date | null, string | null, string | null>;
  window_end: ColumnType<Date | null, string | null, string | null>;
  rank: number | null;
  score: number | null;
}

/**
 * The tables of the achievements read model. Readers see `achievements` and `achievement_counts`; the
 * leaderboards and the users' activity are the projection's own copy of what it places ranks by.
 */
export interface AchievementTables {
  achievements: AchievementRow;
  achievement_counts: { organisation_id: string; user_id: string; community_id: string; count: number };
  achievement_leaderboards: { id: string; name: string; community_id: string | null; ranges: ColumnType<Range[], string, string> };
  achievement_activity: { user_id: string; community_id: string; last_active_at: Timestamp };
}

type Db = Kysely<AchievementTables>;

type LeaderboardChange = Extract<LeaderboardEvent, { type: 'LeaderboardCreated' | 'LeaderboardUpdated' | 'LeaderboardRewardsAssigned' }>;

type AchievementEvent =
  CustomEventEvent | Extract<EngagementEvent, { type: 'ChallengeCompleted' | 'StreakExtended' }> | LeaderboardChange | LeaderboardWindowEvent;

type AchievementLeaderboard = Selectable<AchievementTables['achievement_leaderboards']>;

/** A closed window's placings as the leaderboard stood when it closed; the community is found later if it has none. */
interface PendingPlacings {
  leaderboardName: string;
  communityId: string | null;
  placed: FrozenStanding[];
}

/**
 * The achievements users earned (see `domain/achievements.ts`), one row each, newest first per user, and
 * their number per (user, community) for the team member record. To place leaderboard ranks it keeps its
 * own copy of what it needs: each leaderboard's name, community condition and rank-reward ranges, and
 * each user's last activity per community (from custom events, as the engine picks a pay-out community).
 *
 * A batch reads the leaderboards it names (one query), finds the closed windows' placings as those stood in
 * log order, reads the activity of the placed users who need a community (one query), then walks the batch
 * again to place them where they were last active at that point. It writes the activity (one upsert that
 * keeps the latest), its leaderboards (one upsert), the achievements (one insert, returning those that were
 * new) and their counts (one upsert that adds).
 */
export const achievementsProjection = defineProjection<AchievementTables, AchievementEvent>({
  name: ACHIEVEMENTS_PROJECTION,
  version: 1,
  tables: ['achievements', 'achievement_counts'],
  loggedWhileBuilding: ['achievements'],
  canHandle: [
    'CustomEventLogged',
    'ChallengeCompleted',
    'StreakExtended',
    'LeaderboardCreated',
    'LeaderboardUpdated',
    'LeaderboardRewardsAssigned',
    'LeaderboardWindowClosed',
  ],
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
    '0002_completions_by_challenge': {
      async up(db) {
        // A challenge's completions and the users who completed it (the challenge templates' counters).
        await db.schema
          .createIndex('achievements_completions_by_challenge')
          .on('achievements')
          .columns(['challenge_id', 'user_id'])
          .where(sql.ref('type'), '=', 'challenge-completed')
          .execute();
      },
    },
  },

  async apply(db, events) {
    const leaderboards = await loadLeaderboards(db, events);
    const changedLeaderboards = new Set<string>();
    const pending = new Map<Recorded<LeaderboardWindowEvent>, PendingPlacings>();
    const needActivity = new Set<string>();
    for (const event of events) {
      if (event.type === 'LeaderboardWindowClosed') {
        const leaderboard = leaderboards.get(event.data.leaderboardId);
        if (!leaderboard) continue;
        const placed = placings(event.data.standings, leaderboard.ranges);
        if (placed.length === 0) continue;
        pending.set(event, { leaderboardName: leaderboard.name, communityId: leaderboard.community_id, placed });
        if (leaderboard.community_id === null) for (const standing of placed) needActivity.add(standing.userId);
      } else if (event.type === 'LeaderboardCreated' || event.type === 'LeaderboardUpdated' || event.type === 'LeaderboardRewardsAssigned') {
        const next = foldLeaderboard(leaderboards.get(event.data.leaderboardId), event);
        if (next) {
          leaderboards.set(next.id, next);
          changedLeaderboards.add(next.id);
        }
      }
    }

    const activity = await loadActivity(db, needActivity);
    const activityWrites = new Map<string, { user_id: string; community_id: string; last_active_at: string }>();
    const earned: Achievement[] = [];
    for (const event of events) {
      switch (event.type) {
        case 'CustomEventLogged': {
          const { userId, communityId, occurredAt } = event.data;
          const key = `${userId} ${communityId}`;
          const known = activityWrites.get(key);
          if (!known || Date.parse(known.last_active_at) < Date.parse(occurredAt))
            activityWrites.set(key, { user_id: userId, community_id: communityId, last_active_at: occurredAt });
          if (needActivity.has(userId)) {
            const communities = activity.get(userId) ?? new Map<string, number>();
            communities.set(communityId, Math.max(communities.get(communityId) ?? -Infinity, Date.parse(occurredAt)));
            activity.set(userId, communities);
          }
          break;
        }
        case 'ChallengeCompleted':
        case 'StreakExtended': {
          const fact = event.data;
          const who = { id: achievementId(event.id), organisationId: fact.organisationId, userId: fact.userId, communityId: fact.communityId };
          if (event.type === 'ChallengeCompleted') {
            earned.push({ ...who, earnedAt: fact.occurredAt, type: 'challenge-completed', challengeId: event.data.challengeId, run: event.data.run });
          } else if (isStreakMilestone(event.data.currentStreak)) {
            earned.push({ ...who, earnedAt: fact.occurredAt, type: 'streak-milestone', streakDays: event.data.currentStreak });
          }
          break;
        }
        case 'LeaderboardWindowClosed': {
          const placing = pending.get(event);
          if (placing) earned.push(...placed(event, placing, activity));
          break;
        }
      }
    }

    if (changedLeaderboards.size > 0) {
      await db
        .insertInto('achievement_leaderboards')
        .values([...changedLeaderboards].map((id) => ({ ...leaderboards.get(id)!, ranges: JSON.stringify(leaderboards.get(id)!.ranges) })))
        .onConflict((oc) =>
          oc.column('id').doUpdateSet((eb) => ({
            name: eb.ref('excluded.name'),
            community_id: eb.ref('excluded.community_id'),
            ranges: eb.ref('excluded.ranges'),
          })),
        )
        .execute();
    }
    await record(db, earned, [...activityWrites.values()]);
  },
});

/** The leaderboards the batch's leaderboard events and closed windows name, in one query. */
async function loadLeaderboards(db: Db, events: readonly Recorded<AchievementEvent>[]): Promise<Map<string, AchievementLeaderboard>> {
  const ids = new Set<string>();
  for (const event of events) {
    if (event.type !== 'CustomEventLogged' && event.type !== 'ChallengeCompleted' && event.type !== 'StreakExtended') ids.add(event.data.leaderboardId);
  }
  if (ids.size === 0) return new Map();
  const rows = await db
    .selectFrom('achievement_leaderboards')
    .selectAll()
    .where('id', 'in', [...ids])
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

/** A leaderboard after one of its events, or undefined when the event changes nothing (or names an unknown one). */
function foldLeaderboard(known: AchievementLeaderboard | undefined, event: Recorded<LeaderboardChange>): AchievementLeaderboard | undefined {
  if (event.type === 'LeaderboardCreated') {
    return known ? undefined : { id: event.data.leaderboardId, name: event.data.name, community_id: leaderboardCommunity(event.data.conditions), ranges: [] };
  }
  if (!known) return undefined;
  if (event.type === 'LeaderboardUpdated') {
    const { name, conditions } = event.data.changes;
    if (name === undefined && conditions === undefined) return undefined;
    return {
      ...known,
      ...(name !== undefined ? { name } : {}),
      ...(conditions !== undefined ? { community_id: leaderboardCommunity(conditions) } : {}),
    };
  }
  return { ...known, ranges: event.data.rewards.map(({ startRank, endRank }): Range => ({ startRank, endRank })) };
}

/** Each user's last activity per community (user id → community id → epoch milliseconds), in one query. */
async function loadActivity(db: Db, userIds: ReadonlySet<string>): Promise<Map<string, Map<string, number>>> {
  const byUser = new Map<string, Map<string, number>>();
  if (userIds.size === 0) return byUser;
  const rows = await db
    .selectFrom('achievement_activity')
    .select(['user_id', 'community_id', 'last_active_at'])
    .where(sql<boolean>`user_id = any(${[...userIds]}::text[])`)
    .execute();
  for (const row of rows) {
    const communities = byUser.get(row.user_id) ?? new Map<string, number>();
    communities.set(row.community_id, row.last_active_at.getTime());
    byUser.set(row.user_id, communities);
  }
  return byUser;
}

/** Where a user was last active (latest custom event; ties by community id). */
function lastActiveCommunity(communities: Map<string, number> | undefined): string | undefined {
  let last: { communityId: string; at: number } | undefined;
  for (const [communityId, at] of communities ?? []) {
    if (!last || at > last.at || (at === last.at && communityId < last.communityId)) last = { communityId, at };
  }
  return last?.communityId;
}

/** A closed window's placings: every ranked user inside a rank-reward range, in the pay-out's community. */
function placed(event: Recorded<LeaderboardWindowEvent>, placing: PendingPlacings, activity: Map<string, Map<string, number>>): Achievement[] {
  const closed = event.data;
  return placing.placed.flatMap((standing): Achievement[] => {
    const communityId = placing.communityId ?? lastActiveCommunity(activity.get(standing.userId));
    if (!communityId) return [];
    return [
      {
        id: achievementId(event.id, standing.userId),
        organisationId: closed.organisationId,
        userId: standing.userId,
        communityId,
        earnedAt: closed.windowEnd,
        type: 'leaderboard-placing',
        leaderboardId: closed.leaderboardId,
        leaderboardName: placing.leaderboardName,
        windowStart: closed.windowStart,
        windowEnd: closed.windowEnd,
        rank: standing.rank,
        score: standing.score,
      },
    ];
  });
}

type NewAchievement = {
  [Column in keyof AchievementRow]: Column extends 'created_at' | 'window_start' | 'window_end' ? string | null : Selectable<AchievementRow>[Column];
};

type ActivityRow = { user_id: string; community_id: string; last_active_at: string };

/**
 * Writes the users' last activity, inserts the achievements not recorded yet and counts those per (user,
 * community), in one statement (the activity alone when the batch earned nothing).
 */
async function record(db: Db, achievements: Achievement[], activity: ActivityRow[]): Promise<void> {
  if (achievements.length === 0 && activity.length === 0) return;
  const active = unnestRows(activity, { user_id: 'text', community_id: 'text', last_active_at: 'timestamptz' });
  if (achievements.length === 0) {
    // Most live batches (custom events) earn nothing: the activity alone, a short statement.
    await writeActivity(db, active).execute();
    return;
  }
  // An id is recorded once: the first in log order, as the insert that ignores conflicts keeps it.
  const rows = new Map<string, NewAchievement>();
  for (const achievement of achievements) if (!rows.has(achievement.id)) rows.set(achievement.id, rowOf(achievement));
  const insert = unnestRows([...rows.values()], {
    id: 'text',
    organisation_id: 'text',
    user_id: 'text',
    community_id: 'text',
    type: 'text',
    created_at: 'timestamptz',
    challenge_id: 'text',
    run: 'integer',
    streak_days: 'integer',
    leaderboard_id: 'text',
    leaderboard_name: 'text',
    window_start: 'timestamptz',
    window_end: 'timestamptz',
    rank: 'integer',
    score: 'double precision',
  });
  // The users' activity (an empty set where the batch has none), the achievements and the counts from what the
  // insert returns, in one statement: one round trip, nothing comes back.
  await db
    .with('activity_written', (qc) => writeActivity(qc, active))
    .with('inserted', (qc) =>
      qc
        .insertInto('achievements')
        .columns(insert.columns)
        .expression(insert.select)
        .onConflict((oc) => oc.column('id').doNothing())
        .returning(['organisation_id', 'user_id', 'community_id']),
    )
    .insertInto('achievement_counts')
    .columns(['organisation_id', 'user_id', 'community_id', 'count'])
    .expression(sql`select min(organisation_id), user_id, community_id, count(*)::integer from inserted group by user_id, community_id`)
    .onConflict((oc) => oc.columns(['user_id', 'community_id']).doUpdateSet({ count: sql`achievement_counts.count + excluded.count` }))
    .execute();
}

/** Each user's last activity per community: the later of what is recorded and what the batch saw. */
function writeActivity(creator: QueryCreator<AchievementTables>, rows: ReturnType<typeof unnestRows<ActivityRow>>) {
  return creator
    .insertInto('achievement_activity')
    .columns(rows.columns)
    .expression(rows.select)
    .onConflict((oc) =>
      oc.columns(['user_id', 'community_id']).doUpdateSet({ last_active_at: sql`greatest(achievement_activity.last_active_at, excluded.last_active_at)` }),
    );
}

function rowOf(achievement: Achievement): NewAchievement {
  const row: NewAchievement = {
    id: achievement.id,
    organisation_id: achievement.organisationId,
    user_id: achievement.userId,
    community_id: achievement.communityId,
    type: achievement.type,
    created_at: achievement.earnedAt,
    challenge_id: null,
    run: null,
    streak_days: null,
    leaderboard_id: null,
    leaderboard_name: null,
    window_start: null,
    window_end: null,
    rank: null,
    score: null,
  };
  switch (achievement.type) {
    case 'challenge-completed':
      return { ...row, challenge_id: achievement.challengeId, run: achievement.run };
    case 'streak-milestone':
      return { ...row, streak_days: achievement.streakDays };
    case 'leaderboard-placing':
      return {
        ...row,
        leaderboard_id: achievement.leaderboardId,
        leaderboard_name: achievement.leaderboardName,
        window_start: achievement.windowStart,
        window_end: achievement.windowEnd,
        rank: achievement.rank,
        score: achievement.score,
      };
  }
}
