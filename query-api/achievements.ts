import { Router } from 'express';
import type { Kysely, Selectable } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { STREAK_MILESTONES } from '../domain/achievements.ts';
import { zeroXp, type CommunityLedger } from '../domain/user.ts';
import { tenantOf } from '../infra/auth.ts';
import { achievementSchema, achievementsQuery, type AchievementView } from '../api/contract/achievements.ts';
import { pageOf } from '../api/contract/common.ts';
import { userTokenHeader } from '../api/contract/reward-assets.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { newestFirstDeep, type DeepList } from '../infra/http/deep-pages.ts';
import type { Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { requireUser, signedInUserOf } from '../infra/require-user.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { ACHIEVEMENTS_PROJECTION, type AchievementRow, type AchievementTables } from '../projectors/achievements.ts';
import type { CommunityTables } from '../projectors/communities.ts';
import { iso } from './communities.ts';
import { requireCommunity } from './events.ts';
import { withTableTypes } from '../infra/database.ts';

/** `GET /integration/achievements`: what the signed-in user earned. */
export function achievementQueries(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const db: Kysely<AchievementTables> = withTableTypes(ctx.database.db);
  const communities: Kysely<CommunityTables> = withTableTypes(ctx.database.db);
  const signedIn = requireUser(userTokenKey(ctx.config));
  const fresh = readYourWrites(db, [ACHIEVEMENTS_PROJECTION, 'communities'], ctx.config.readYourWritesTimeoutMs);

  integration.route(
    router,
    {
      method: 'get',
      path: '/achievements',
      operationId: 'listMyAchievements',
      tag: 'Achievements',
      summary: 'The signed-in user’s achievements, newest first',
      description: [
        'What the user earned, newest first (`earnedAt`, then `id`, both descending), by `type`:',
        '- `challenge-completed`: each completion of a challenge (`challengeId`, `run`: every run of a repeatable challenge counts);',
        `- \`streak-milestone\`: the user's current daily streak in a community reaching ${STREAK_MILESTONES.join(', ')} days (\`streakDays\`; a streak that broke earns its milestones again);`,
        "- `leaderboard-placing`: a rank inside one of the leaderboard's rank-reward ranges when one of its windows closed (`leaderboardId`, `leaderboardName`, `windowStart`, `windowEnd`, `rank`, `score`), once per window, in the community its rank rewards went to (the leaderboard's community condition, else where the user was last active).",
        "Filters combine: `type`, `communityId` (404 if the organisation has no such community). A user only ever sees their own. The team member record's `communityData[].achievementsCompleted` counts them per community.",
      ].join('\n'),
      query: achievementsQuery,
      headers: [userTokenHeader, minPositionHeader],
      responses: { 200: { description: 'A page of achievements', schema: pageOf(achievementSchema) } },
    },
    signedIn,
    fresh,
    async (req, res) => {
      const { limit, skip, type, communityId } = parse(achievementsQuery, req.query);
      const { organisationId } = tenantOf(res);
      const { userId } = signedInUserOf(res);
      if (communityId !== undefined) await requireCommunity(communities, organisationId, communityId);
      const mine: DeepList<AchievementTables, 'achievements'>['filter'] = (rows) => {
        let matching = rows.where('organisation_id', '=', organisationId).where('user_id', '=', userId);
        if (type !== undefined) matching = matching.where('type', '=', type);
        if (communityId !== undefined) matching = matching.where('community_id', '=', communityId);
        return matching;
      };
      const { rows, totalCount } = await newestFirstDeep(db, { table: 'achievements', filter: mine }, { limit, skip });
      const page: Page<AchievementView> = { totalCount, edges: rows.map(achievementOf) };
      res.json(page);
    },
  );

  return router;
}

/** A column of the achievement's own type: filled whenever the row is of that type (the projection writes them together). */
function present<T>(row: Selectable<AchievementRow>, value: T | null): T {
  if (value === null) throw new Error(`achievement ${row.id} (${row.type}) lacks a column of its type`);
  return value;
}

function achievementOf(row: Selectable<AchievementRow>): AchievementView {
  const earned = {
    id: row.id,
    organisationId: row.organisation_id,
    userId: row.user_id,
    communityId: row.community_id,
    earnedAt: iso(row.created_at),
  };
  switch (row.type) {
    case 'challenge-completed':
      return { type: 'challenge-completed', ...earned, challengeId: present(row, row.challenge_id), run: present(row, row.run) };
    case 'streak-milestone':
      return { type: 'streak-milestone', ...earned, streakDays: present(row, row.streak_days) };
    case 'leaderboard-placing':
      return {
        type: 'leaderboard-placing',
        ...earned,
        leaderboardId: present(row, row.leaderboard_id),
        leaderboardName: present(row, row.leaderboard_name),
        windowStart: iso(present(row, row.window_start)),
        windowEnd: iso(present(row, row.window_end)),
        rank: present(row, row.rank),
        score: present(row, row.score),
      };
  }
}

/** The users' numbers of achievements per community (user id → community id → count), in one query. */
export async function achievementCountsOf(db: Kysely<AchievementTables>, userIds: string[]): Promise<Map<string, Map<string, number>>> {
  const byUser = new Map<string, Map<string, number>>();
  if (userIds.length === 0) return byUser;
  const rows = await db.selectFrom('achievement_counts').select(['user_id', 'community_id', 'count']).where('user_id', 'in', userIds).execute();
  for (const row of rows) {
    const counts = byUser.get(row.user_id) ?? new Map<string, number>();
    counts.set(row.community_id, row.count);
    byUser.set(row.user_id, counts);
  }
  return byUser;
}

/**
 * A community where a user earned achievements but no ledger (a leaderboard placing whose rank rewards paid
 * no points or XP there) still shows in the team member record, with its count and nothing else.
 */
export function addAchievementOnlyLedgers(byUser: Map<string, CommunityLedger[]>, counts: Map<string, Map<string, number>>): void {
  for (const [userId, communities] of counts) {
    const ledgers = byUser.get(userId) ?? [];
    for (const [communityId, count] of communities) {
      if (ledgers.some((ledger) => ledger.communityId === communityId)) continue;
      ledgers.push({
        communityId,
        points: 0,
        xp: zeroXp(),
        challengesCompleted: 0,
        achievementsCompleted: count,
        streak: { currentStreak: 0, lastExtendedAt: null, longestStreak: 0 },
      });
    }
    byUser.set(userId, ledgers);
  }
}
