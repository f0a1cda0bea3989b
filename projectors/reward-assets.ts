import type { RewardAssetEvent } from '../domain/engagement-events.ts';
import { assetFromGrant } from '../domain/reward-asset.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/**
 * Reward assets: one row per asset granted (`rewardasset-<assetId>`), every field of the contract's reward
 * asset, with `details` by language as the grant copied them from the reward and `redeemable.content` the
 * unit's code when the reward has codes. Claim and redemption move `claimed_at`, `redeemed_at` and
 * `updated_at`; what the user supplied when redeeming is kept in `redemption_information`.
 */
export const rewardAssetsProjection: Projection = {
  name: 'reward_assets',
  version: 1,
  tables: ['reward_assets'],
  filter: { categories: ['rewardasset'], eventTypes: ['RewardAssetGranted', 'RewardAssetClaimed', 'RewardAssetRedeemed'] },
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

  async apply(db, event) {
    const { type, data } = event as unknown as RewardAssetEvent;
    switch (type) {
      case 'RewardAssetGranted': {
        const asset = assetFromGrant(data);
        await db
          .insertInto('reward_assets')
          .values({
            id: asset.id,
            organisation_id: asset.organisationId,
            community_id: asset.communityId,
            reward_id: asset.rewardId,
            allocation_id: asset.allocationId,
            user_id: asset.userId,
            event_source_id: asset.eventSourceId,
            details: JSON.stringify(asset.details),
            tags: JSON.stringify(asset.tags),
            campaigns: JSON.stringify(asset.campaigns),
            additional_community_ids: JSON.stringify(asset.additionalCommunityIds),
            metadata: JSON.stringify(asset.metadata),
            redeemable: JSON.stringify(asset.redeemable),
            created_at: asset.createdAt,
            updated_at: asset.updatedAt,
            expires_at: asset.expiresAt,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      }
      case 'RewardAssetClaimed':
        await db.updateTable('reward_assets').set({ claimed_at: data.claimedAt, updated_at: data.claimedAt }).where('id', '=', data.assetId).execute();
        return;
      case 'RewardAssetRedeemed':
        await db
          .updateTable('reward_assets')
          .set({ redeemed_at: data.redeemedAt, updated_at: data.redeemedAt, redemption_information: JSON.stringify(data.information) })
          .where('id', '=', data.assetId)
          .execute();
        return;
    }
  },
};
