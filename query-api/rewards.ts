import { Router, type Request } from 'express';
import type { Kysely, Selectable } from 'kysely';
import { isLive, type RewardAllocation } from '../domain/allocation.ts';
import { fromLocalised } from '../domain/localised-details.ts';
import type { Reward } from '../domain/reward.ts';
import { tenantOf } from '../infra/auth.ts';
import type { ServiceContext } from '../api/context.ts';
import { pageOf } from '../api/contract/common.ts';
import { allocationOutput } from '../api/contract/distribution.ts';
import { listRewardsQuery, rewardSchema } from '../api/contract/rewards.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { newestFirst, pagination, type Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { ID_PATTERN } from '../infra/ids.ts';
import type { RewardAllocationRow, RewardAllocationTables } from '../projectors/reward-allocations.ts';
import type { RewardRow, RewardTables } from '../projectors/rewards.ts';
import { withTableTypes } from '../infra/database.ts';

export function rewardQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<RewardTables & RewardAllocationTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, ['rewards'], ctx.config.readYourWritesTimeoutMs);
  const freshAllocations = readYourWrites(db, ['rewards', 'reward_allocations'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/rewards',
      operationId: 'listRewards',
      tag: 'Rewards',
      summary: "List the organisation's rewards, newest first",
      query: listRewardsQuery,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of rewards', schema: pageOf(rewardSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip, kind, communityId } = parse(listRewardsQuery, req.query);
      const { organisationId } = tenantOf(res);
      let rewards = db.selectFrom('rewards').where('organisation_id', '=', organisationId);
      if (kind) rewards = rewards.where('kind', '=', kind);
      if (communityId) rewards = rewards.where('community_id', '=', communityId);
      const { rows, totalCount } = await newestFirst(rewards, { limit, skip });
      const page: Page<Reward> = { totalCount, edges: rows.map(toReward) };
      res.json(page);
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/rewards/:rewardId',
      operationId: 'getReward',
      tag: 'Rewards',
      summary: 'Read one reward',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The reward', schema: rewardSchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const row = await db.selectFrom('rewards').selectAll().where('organisation_id', '=', organisationId).where('id', '=', rewardIdOf(req)).executeTakeFirst();
      if (!row) throw notFound('Reward not found');
      res.json(toReward(row));
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/rewards/:rewardId/allocations',
      operationId: 'listRewardAllocations',
      tag: 'Rewards',
      summary: "List a reward's allocations, newest first",
      description:
        'Every allocation of the reward: those added here and those an action’s, a leaderboard’s or a game’s distribution created, each with what the engine has handed out of it.',
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of allocations', schema: pageOf(allocationOutput) } },
    },
    freshAllocations,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const rewardId = rewardIdOf(req);
      const allocations = db.selectFrom('reward_allocations').where('organisation_id', '=', organisationId).where('reward_id', '=', rewardId);
      const [reward, { rows, totalCount }] = await Promise.all([
        db.selectFrom('rewards').select('id').where('organisation_id', '=', organisationId).where('id', '=', rewardId).executeTakeFirst(),
        newestFirst(allocations, { limit, skip }),
      ]);
      if (!reward) throw notFound('Reward not found');
      const page: Page<RewardAllocation> = { totalCount, edges: rows.map(toAllocation) };
      res.json(page);
    },
  );

  return router;
}

function rewardIdOf(req: Request): string {
  const rewardId = String(req.params.rewardId);
  if (!ID_PATTERN.test(rewardId)) throw notFound('Reward not found');
  return rewardId.toLowerCase();
}

function toReward(row: Selectable<RewardRow>): Reward {
  const common = {
    id: row.id,
    organisationId: row.organisation_id,
    communityId: row.community_id,
    details: fromLocalised(row.details),
    tags: row.tags,
    campaigns: row.campaigns,
    additionalCommunityIds: row.additional_community_ids,
    metadata: row.metadata,
  };
  const audit = { createdAt: iso(row.created_at)!, updatedAt: iso(row.updated_at)!, createdBy: row.created_by, updatedBy: row.updated_by };
  // A row has its own kind's columns (the read model leaves only the other kind's null).
  if (row.kind === 'entries') return { ...common, kind: 'entries', drawsAt: iso(row.draws_at)!, supply: row.supply!, ...audit };
  return { ...common, kind: 'asset', redeemable: row.redeemable!, codeCount: row.code_count, expiresAt: iso(row.expires_at), ...audit };
}

function toAllocation(row: Selectable<RewardAllocationRow>): RewardAllocation {
  return {
    id: row.id,
    rewardId: row.reward_id,
    supply: row.supply,
    amountToDistribute: row.amount_to_distribute,
    distributed: row.distributed,
    isLive: isLive({ supply: row.supply, distributed: row.distributed }),
  };
}

/** What an allocation shows of its hand-outs. */
export type AllocationFigures = Pick<RewardAllocation, 'supply' | 'distributed' | 'isLive'>;

/**
 * The figures of the organisation's allocations with these ids, in one query: what the engine has handed
 * out of each, against the supply it hands out from. Distributions (an action's, a leaderboard rank
 * range's, a game's) show these for the allocations they name.
 */
export async function allocationFigures(
  db: Kysely<RewardAllocationTables>,
  organisationId: string,
  ids: readonly string[],
): Promise<Map<string, AllocationFigures>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('reward_allocations')
    .select(['id', 'supply', 'distributed'])
    .where('organisation_id', '=', organisationId)
    .where('id', 'in', [...new Set(ids)])
    .execute();
  return new Map(rows.map((row) => [row.id, { supply: row.supply, distributed: row.distributed, isLive: isLive(row) }]));
}

/** The allocation ids these distribution entries name. */
export function allocationIdsOf(entries: readonly { rewardsConfig: { allocations: readonly { id: string }[] } }[]): string[] {
  return entries.flatMap((entry) => entry.rewardsConfig.allocations.map((allocation) => allocation.id));
}

/** A distribution entry with each allocation's figures (an allocation the read model does not know yet keeps its own). */
export function withFigures<Entry extends { rewardsConfig: { allocations: readonly ({ id: string } & AllocationFigures)[] } }>(
  entry: Entry,
  figures: ReadonlyMap<string, AllocationFigures>,
): Entry {
  return {
    ...entry,
    rewardsConfig: {
      ...entry.rewardsConfig,
      allocations: entry.rewardsConfig.allocations.map((allocation) => ({ ...allocation, ...figures.get(allocation.id) })),
    },
  };
}

function iso(value: Date | string | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}
