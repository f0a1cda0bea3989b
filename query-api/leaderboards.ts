import { Router } from 'express';
import type { Kysely, Selectable } from 'kysely';
import type { LeaderboardConfig } from '../domain/leaderboard.ts';
import { tenantOf } from '../infra/auth.ts';
import { notFound } from '../infra/http/errors.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { pageOf } from '../api/contract/common.ts';
import { leaderboardConfigSchema, leaderboardDistributionSchema } from '../api/contract/leaderboards.ts';
import { newestFirst, pagination, type Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import type { ServiceContext } from '../api/context.ts';
import type { LeaderboardRankRewardRow, LeaderboardRow, LeaderboardTables } from '../projectors/leaderboards.ts';
import { allocationFigures, allocationIdsOf, withFigures } from './rewards.ts';
import { withTableTypes } from '../infra/database.ts';

export function leaderboardQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<LeaderboardTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, ['leaderboards'], ctx.config.readYourWritesTimeoutMs);
  const freshDistribution = readYourWrites(db, ['leaderboards', 'reward_allocations'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/leaderboards',
      operationId: 'listLeaderboards',
      tag: 'Leaderboards',
      summary: "List the organisation's leaderboard configs, newest first",
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of leaderboard configs', schema: pageOf(leaderboardConfigSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const { rows, totalCount } = await newestFirst(db.selectFrom('leaderboards').where('organisation_id', '=', organisationId), { limit, skip });
      const page: Page<LeaderboardConfig> = { totalCount, edges: rows.map(toConfig) };
      res.json(page);
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/leaderboards/:leaderboardConfigId',
      operationId: 'getLeaderboard',
      tag: 'Leaderboards',
      summary: 'Read one leaderboard config',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The leaderboard config', schema: leaderboardConfigSchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const row = await db
        .selectFrom('leaderboards')
        .selectAll()
        .where('organisation_id', '=', organisationId)
        .where('id', '=', String(req.params.leaderboardConfigId).toLowerCase())
        .executeTakeFirst();
      if (!row) throw notFound('Leaderboard not found');
      res.json(toConfig(row));
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/leaderboards/:leaderboardConfigId/distribution',
      operationId: 'getLeaderboardDistribution',
      tag: 'Leaderboards',
      summary: 'Read the rewards a leaderboard gives per rank range',
      description: 'The same shape as the answer of the POST: rank ranges by startRank, each allocation with `distributed` and `isLive`.',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The leaderboard’s distribution (empty when none was assigned)', schema: leaderboardDistributionSchema } },
    },
    freshDistribution,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const leaderboardId = String(req.params.leaderboardConfigId).toLowerCase();
      const [leaderboard, ranges] = await Promise.all([
        db.selectFrom('leaderboards').select('id').where('organisation_id', '=', organisationId).where('id', '=', leaderboardId).executeTakeFirst(),
        db
          .selectFrom('leaderboard_rank_rewards')
          .selectAll()
          .where('organisation_id', '=', organisationId)
          .where('leaderboard_id', '=', leaderboardId)
          .orderBy('start_rank')
          .execute(),
      ]);
      if (!leaderboard) throw notFound('Leaderboard not found');
      const rewards = ranges.map(toRankReward);
      const figures = await allocationFigures(withTableTypes(ctx.database.db), organisationId, allocationIdsOf(rewards));
      res.json({ leaderboardConfigId: leaderboard.id, rewards: rewards.map((reward) => withFigures(reward, figures)) });
    },
  );

  return router;
}

function toRankReward(row: Selectable<LeaderboardRankRewardRow>) {
  return {
    startRank: row.start_rank,
    endRank: row.end_rank,
    distributionEventId: row.distribution_event_id,
    pointsToDistribute: Number(row.points_to_distribute),
    bonusXpToDistribute: Number(row.bonus_xp_to_distribute),
    rewardsConfig: {
      amountToDistribute: Number(row.amount_to_distribute),
      allocations: row.allocations.map((allocation) => ({
        id: allocation.id,
        rewardId: allocation.rewardId,
        supply: allocation.supply,
        amountToDistribute: allocation.amountToDistribute,
        distributed: allocation.distributed,
        isLive: allocation.distributed < allocation.supply,
      })),
    },
  };
}

function toConfig(row: Selectable<LeaderboardRow>): LeaderboardConfig {
  return {
    id: row.id,
    organisationId: row.organisation_id,
    name: row.name,
    description: row.description,
    metricType: row.metric_type,
    period: row.period,
    startsAt: iso(row.starts_at)!,
    expiresAt: iso(row.expires_at),
    status: row.status,
    conditions: row.conditions,
    rewardsConfig: row.rewards_config,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
    createdBy: row.created_by,
    updatedBy: row.updated_by,
  };
}

function iso(value: Date | string | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}
