import type { ColumnType } from 'kysely';
import type { RewardAssetEvent } from '../domain/engagement-events.ts';
import type { DetailsBlock } from '../domain/localised-details.ts';
import { assetFromGrant, type RedemptionInformation } from '../domain/reward-asset.ts';
import type { Redeemable } from '../domain/reward.ts';
import { defineProjection, type Recorded } from './projection.ts';
import { RowBatch } from './row-batch.ts';
import type { Json, Timestamp, NullableTimestamp } from './columns.ts';

/** A JSON column: read back parsed, written as JSON text. */
/** A timestamptz column: read back as a Date, written as an ISO string or a Date. */

export interface RewardAssetsTable {
  id: string;
  organisation_id: string;
  community_id: string;
  reward_id: string;
  allocation_id: string | null;
  user_id: string;
  event_source_id: string;
  details: Json<Record<string, DetailsBlock>>;
  tags: Json<string[]>;
  campaigns: Json<string[]>;
  additional_community_ids: Json<string[]>;
  metadata: Json<Record<string, unknown>>;
  redeemable: Json<Redeemable>;
  redemption_information: ColumnType<RedemptionInformation[] | null, string | null, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
  claimed_at: NullableTimestamp;
  redeemed_at: NullableTimestamp;
  expires_at: NullableTimestamp;
}

export interface RewardAssetTables {
  reward_assets: RewardAssetsTable;
}

/** A row as the batch holds it: JSON columns parsed, timestamps as loaded (Date) or as the event gave them (ISO string). */
interface AssetRow {
  id: string;
  organisation_id: string;
  community_id: string;
  reward_id: string;
  allocation_id: string | null;
  user_id: string;
  event_source_id: string;
  details: Record<string, DetailsBlock>;
  tags: string[];
  campaigns: string[];
  additional_community_ids: string[];
  metadata: Record<string, unknown>;
  redeemable: Redeemable;
  redemption_information: RedemptionInformation[] | null;
  created_at: Date | string;
  updated_at: Date | string;
  claimed_at: Date | string | null;
  redeemed_at: Date | string | null;
  expires_at: Date | string | null;
}

/**
 * Reward assets: one row per asset granted (`rewardasset-<assetId>`), every field of the contract's reward
 * asset, with `details` by language as the grant copied them from the reward and `redeemable.content` the
 * unit's code when the reward has codes. Claim and redemption move `claimed_at`, `redeemed_at` and
 * `updated_at`; what the user supplied when redeeming is kept in `redemption_information`.
 *
 * A batch loads the assets it names (one read), folds grants, claims and redemptions into them in log order
 * and writes the changed rows back (one upsert). A second grant of an asset changes nothing; a claim or a
 * redemption of an asset not granted (yet) changes nothing either, as the one-event updates did.
 */
export const rewardAssetsProjection = defineProjection<RewardAssetTables, RewardAssetEvent>({
  name: 'reward_assets',
  version: 1,
  tables: ['reward_assets'],
  // These events are only ever recorded on `rewardasset-<assetId>` streams (the old category filter).
  canHandle: ['RewardAssetGranted', 'RewardAssetClaimed', 'RewardAssetRedeemed'],
  migrations: {
    '0001_reward_assets': {
      async up(db) {
        await db.schema
          .createTable('reward_assets')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('allocation_id', 'text')
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('event_source_id', 'text', (c) => c.notNull())
          .addColumn('details', 'jsonb', (c) => c.notNull())
          .addColumn('tags', 'jsonb', (c) => c.notNull())
          .addColumn('campaigns', 'jsonb', (c) => c.notNull())
          .addColumn('additional_community_ids', 'jsonb', (c) => c.notNull())
          .addColumn('metadata', 'jsonb', (c) => c.notNull())
          .addColumn('redeemable', 'jsonb', (c) => c.notNull())
          .addColumn('redemption_information', 'jsonb')
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('claimed_at', 'timestamptz')
          .addColumn('redeemed_at', 'timestamptz')
          .addColumn('expires_at', 'timestamptz')
          .execute();
        // A user's assets, newest first with id as the tie-break (`/me/reward-assets`, and nested in `/me/reward-entries`).
        await db.schema
          .createIndex('reward_assets_by_user')
          .on('reward_assets')
          .columns(['organisation_id', 'user_id', 'created_at desc', 'id desc'])
          .execute();
        // A reward's assets (what a reward handed out: admin and analytics).
        await db.schema.createIndex('reward_assets_by_reward').on('reward_assets').columns(['organisation_id', 'reward_id']).execute();
      },
    },
  },

  async apply(db, events) {
    const assets = new RowBatch<AssetRow>('reward_assets', ['id']);
    await assets.load(
      db,
      events.map((event) => ({ id: event.data.assetId })),
    );
    for (const event of events) foldAsset(assets, event);
    await assets.save(db);
  },
});

function foldAsset(assets: RowBatch<AssetRow>, event: Recorded<RewardAssetEvent>): void {
  switch (event.type) {
    case 'RewardAssetGranted': {
      if (assets.get({ id: event.data.assetId })) return;
      const asset = assetFromGrant(event.data);
      assets.set({
        id: asset.id,
        organisation_id: asset.organisationId,
        community_id: asset.communityId,
        reward_id: asset.rewardId,
        allocation_id: asset.allocationId,
        user_id: asset.userId,
        event_source_id: asset.eventSourceId,
        details: asset.details,
        tags: asset.tags,
        campaigns: asset.campaigns,
        additional_community_ids: asset.additionalCommunityIds,
        metadata: asset.metadata,
        redeemable: asset.redeemable,
        redemption_information: null,
        created_at: asset.createdAt,
        updated_at: asset.updatedAt,
        claimed_at: null,
        redeemed_at: null,
        expires_at: asset.expiresAt,
      });
      return;
    }
    case 'RewardAssetClaimed': {
      const row = assets.get({ id: event.data.assetId });
      if (row) assets.set({ ...row, claimed_at: event.data.claimedAt, updated_at: event.data.claimedAt });
      return;
    }
    case 'RewardAssetRedeemed': {
      const row = assets.get({ id: event.data.assetId });
      if (row) assets.set({ ...row, redeemed_at: event.data.redeemedAt, updated_at: event.data.redeemedAt, redemption_information: event.data.information });
      return;
    }
  }
}
