import { Router } from 'express';
import type { Kysely, Selectable } from 'kysely';
import { z } from 'zod';
import type { ServiceContext } from '../api/context.ts';
import { pickDetails, type LocalisedDetails } from '../domain/localised-details.ts';
import { rewardAssetView, type RewardAsset, type RewardAssetView } from '../domain/reward-asset.ts';
import { tenantOf } from '../infra/auth.ts';
import { pageOf } from '../api/contract/common.ts';
import { languageHeader } from '../api/contract/localised-details.ts';
import { requestedLanguage, rewardAssetSchema, rewardEntrySchema, userTokenHeader } from '../api/contract/reward-assets.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { newestFirst, pagination, type Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { requireUser, signedInUserOf } from '../infra/require-user.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import type { RewardAssetTables, RewardAssetsTable } from '../projectors/reward-assets.ts';
import type { RewardEntriesTable, RewardEntryTables } from '../projectors/reward-entries.ts';
import { withTableTypes } from '../infra/database.ts';

export type RewardEntryView = z.infer<typeof rewardEntrySchema>;

/** The read models a reward entry or asset is assembled from. */
const READ_MODELS = ['reward_entries', 'reward_assets', 'rewards', 'organisations'] as const;

/**
 * The columns of `rewards` and `organisations` read here. These tables belong to the rewards and
 * organisations read models (projectors/rewards.ts, projectors/organisations.ts); only what is read here is
 * declared.
 */
interface RewardFactsTables {
  rewards: {
    id: string;
    organisation_id: string;
    details: LocalisedDetails;
    tags: string[];
    campaigns: string[];
    additional_community_ids: string[];
    draws_at: Date | null;
  };
  organisations: { id: string; default_language: string };
}

type Tables = RewardEntryTables & RewardAssetTables & RewardFactsTables;

/** The signed-in user's giveaway entries and reward assets (integration family). */
export function rewardEntryQueries(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const db: Kysely<Tables> = withTableTypes(ctx.database.db);
  const signedIn = requireUser(userTokenKey(ctx.config));
  const fresh = readYourWrites(db, READ_MODELS, ctx.config.readYourWritesTimeoutMs);

  integration.route(
    router,
    {
      method: 'get',
      path: '/me/reward-entries',
      operationId: 'listMyRewardEntries',
      tag: 'Rewards',
      summary: 'The signed-in user’s entries into reward draws (giveaways), newest first',
      description: [
        'One record per giveaway the user has entries in: `totalEntries`, and `entries` per hand-out (oldest first). `checkByDate` is the draw date; `drawnAt` and `checkedAt` are set once the draw has happened, and `rewardAssetIds` / `rewardAssets` hold what the user won.',
        "`details` is in the language of `x-language`, else its primary subtag, else the organisation's default language, else the reward's first language. Tags, campaigns and additional communities are the reward's.",
      ].join('\n\n'),
      query: pagination,
      headers: [userTokenHeader, languageHeader, minPositionHeader],
      responses: { 200: { description: 'A page of reward entries', schema: pageOf(rewardEntrySchema) } },
    },
    signedIn,
    fresh,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const wanted = requestedLanguage(req);
      const { organisationId } = tenantOf(res);
      const { userId } = signedInUserOf(res);
      const mine = db.selectFrom('reward_entries').where('organisation_id', '=', organisationId).where('user_id', '=', userId);
      const [{ rows, totalCount }, organisationDefault] = await Promise.all([newestFirst(mine, { limit, skip }), defaultLanguageOf(db, organisationId)]);
      const entries: Selectable<RewardEntriesTable>[] = rows;
      const rewardIds = [...new Set(entries.map((row) => row.reward_id))];
      const [rewards, assets] = await Promise.all([rewardsById(db, organisationId, rewardIds), assetsOf(db, organisationId, userId, rewardIds)]);
      const page: Page<RewardEntryView> = {
        totalCount,
        edges: entries.map((row) => {
          const reward = rewards.get(row.reward_id);
          const language = { wanted, organisationDefault, rewardLanguages: reward?.languages ?? [] };
          return {
            id: row.id,
            organisationId: row.organisation_id,
            communityId: row.community_id,
            rewardId: row.reward_id,
            userId: row.user_id,
            details: pickDetails(reward?.details ?? [], wanted, organisationDefault),
            totalEntries: Number(row.total_entries),
            entries: row.entries,
            tags: reward?.tags ?? [],
            campaigns: reward?.campaigns ?? [],
            additionalCommunityIds: reward?.additionalCommunityIds ?? [],
            rewardAssetIds: row.reward_asset_ids,
            createdAt: iso(row.created_at)!,
            updatedAt: iso(row.updated_at)!,
            checkByDate: reward?.drawsAt ?? null,
            checkedAt: iso(row.checked_at),
            drawnAt: iso(row.drawn_at),
            rewardAssets: assets.filter((asset) => asset.rewardId === row.reward_id).map((asset) => rewardAssetView(asset, language)),
          };
        }),
      };
      res.json(page);
    },
  );

  integration.route(
    router,
    {
      method: 'get',
      path: '/me/reward-assets',
      operationId: 'listMyRewardAssets',
      tag: 'Rewards',
      summary: 'The signed-in user’s reward assets, newest first',
      description:
        "Every asset the user got (from allocations, leaderboard ranks and giveaway draws), claimed or not. `details` is chosen like on `/me/reward-entries`; `redeemable.content` is the asset's own code when its reward has codes.",
      query: pagination,
      headers: [userTokenHeader, languageHeader, minPositionHeader],
      responses: { 200: { description: 'A page of reward assets', schema: pageOf(rewardAssetSchema) } },
    },
    signedIn,
    fresh,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const wanted = requestedLanguage(req);
      const { organisationId } = tenantOf(res);
      const { userId } = signedInUserOf(res);
      const mine = db.selectFrom('reward_assets').where('organisation_id', '=', organisationId).where('user_id', '=', userId);
      const [{ rows, totalCount }, organisationDefault] = await Promise.all([newestFirst(mine, { limit, skip }), defaultLanguageOf(db, organisationId)]);
      const assetRows: Selectable<RewardAssetsTable>[] = rows;
      const assets = assetRows.map(rewardAssetOf);
      const rewards = await rewardsById(db, organisationId, [...new Set(assets.map((asset) => asset.rewardId))]);
      const page: Page<RewardAssetView> = {
        totalCount,
        edges: assets.map((asset) => rewardAssetView(asset, { wanted, organisationDefault, rewardLanguages: rewards.get(asset.rewardId)?.languages ?? [] })),
      };
      res.json(page);
    },
  );

  return router;
}

export async function defaultLanguageOf(db: Kysely<Tables>, organisationId: string): Promise<string | undefined> {
  const row = await db.selectFrom('organisations').select('default_language').where('id', '=', organisationId).executeTakeFirst();
  return row?.default_language;
}

interface RewardFacts {
  details: LocalisedDetails;
  /** The reward's languages in the order the admin gave them: the last fallback of a localised read. */
  languages: string[];
  tags: string[];
  campaigns: string[];
  additionalCommunityIds: string[];
  drawsAt: string | null;
}

/** What the records take from their rewards, for a whole page in one query. */
export async function rewardsById(db: Kysely<Tables>, organisationId: string, rewardIds: string[]): Promise<Map<string, RewardFacts>> {
  if (rewardIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('rewards')
    .select(['id', 'details', 'tags', 'campaigns', 'additional_community_ids', 'draws_at'])
    .where('organisation_id', '=', organisationId)
    .where('id', 'in', rewardIds)
    .execute();
  return new Map(
    rows.map((row) => {
      return [
        row.id,
        {
          details: row.details,
          languages: row.details.map((block) => block.language),
          tags: row.tags,
          campaigns: row.campaigns,
          additionalCommunityIds: row.additional_community_ids,
          drawsAt: iso(row.draws_at),
        },
      ];
    }),
  );
}

/** The user's assets from these rewards, newest first: every nested `rewardAssets` of a page in one query. */
async function assetsOf(db: Kysely<Tables>, organisationId: string, userId: string, rewardIds: string[]): Promise<RewardAsset[]> {
  if (rewardIds.length === 0) return [];
  const rows = await db
    .selectFrom('reward_assets')
    .selectAll()
    .where('organisation_id', '=', organisationId)
    .where('user_id', '=', userId)
    .where('reward_id', 'in', rewardIds)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map(rewardAssetOf);
}

export function rewardAssetOf(row: Selectable<RewardAssetsTable>): RewardAsset {
  return {
    id: row.id,
    organisationId: row.organisation_id,
    communityId: row.community_id,
    rewardId: row.reward_id,
    allocationId: row.allocation_id,
    userId: row.user_id,
    eventSourceId: row.event_source_id,
    details: row.details,
    tags: row.tags,
    campaigns: row.campaigns,
    additionalCommunityIds: row.additional_community_ids,
    metadata: row.metadata,
    redeemable: row.redeemable,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
    claimedAt: iso(row.claimed_at),
    redeemedAt: iso(row.redeemed_at),
    expiresAt: iso(row.expires_at),
  };
}

function iso(value: Date | string | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}
