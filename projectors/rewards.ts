import { sql } from 'kysely';
import type { RewardEvent } from '../domain/reward.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/**
 * Rewards as the admin API shows them, and as the distribution engine and analytics join them: one row
 * per reward, with its kind's columns (draws_at and supply for entries; redeemable, code_count and
 * expires_at for assets) left null for the other kind. The codes themselves stay in the event log.
 */
export const rewardsProjection: Projection = {
  name: 'rewards',
  version: 1,
  tables: ['rewards'],
  filter: { categories: ['reward'], eventTypes: ['RewardCreated', 'RewardUpdated'] },
  migrations: {
    '0001_rewards': {
      async up(db) {
        await db.schema
          .createTable('rewards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('details', 'jsonb', (c) => c.notNull())
          .addColumn('tags', 'jsonb', (c) => c.notNull())
          .addColumn('campaigns', 'jsonb', (c) => c.notNull())
          .addColumn('additional_community_ids', 'jsonb', (c) => c.notNull())
          .addColumn('metadata', 'jsonb', (c) => c.notNull())
          .addColumn('draws_at', 'timestamptz')
          .addColumn('supply', 'integer')
          .addColumn('redeemable', 'jsonb')
          .addColumn('code_count', 'integer')
          .addColumn('expires_at', 'timestamptz')
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_by', 'text', (c) => c.notNull())
          .execute();
        // The admin list, newest first with id as the tie-break: unfiltered, by kind, by community (and kind).
        await db.schema.createIndex('rewards_by_organisation').on('rewards').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
        await db.schema.createIndex('rewards_by_kind').on('rewards').columns(['organisation_id', 'kind', 'created_at desc', 'id desc']).execute();
        await db.schema
          .createIndex('rewards_by_community')
          .on('rewards')
          .columns(['organisation_id', 'community_id', 'kind', 'created_at desc', 'id desc'])
          .execute();
        // Giveaways by draw date: the draws coming due (engine) and per organisation (analytics).
        await db.schema.createIndex('rewards_by_draw').on('rewards').columns(['organisation_id', 'kind', 'draws_at']).execute();
        await db.schema.createIndex('rewards_draws_due').on('rewards').column('draws_at').where(sql.ref('kind'), '=', 'entries').execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as RewardEvent;
    switch (type) {
      case 'RewardCreated':
        await db
          .insertInto('rewards')
          .values({
            id: data.rewardId,
            organisation_id: data.organisationId,
            community_id: data.communityId,
            kind: data.kind,
            details: JSON.stringify(data.details),
            tags: JSON.stringify(data.tags),
            campaigns: JSON.stringify(data.campaigns),
            additional_community_ids: JSON.stringify(data.additionalCommunityIds),
            metadata: JSON.stringify(data.metadata),
            draws_at: data.kind === 'entries' ? data.drawsAt : null,
            supply: data.kind === 'entries' ? data.supply : null,
            redeemable: data.kind === 'asset' ? JSON.stringify(data.redeemable) : null,
            code_count: data.kind === 'asset' && data.codes !== null ? data.codes.length : null,
            expires_at: data.kind === 'asset' ? data.expiresAt : null,
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      case 'RewardUpdated': {
        const { changes } = data;
        await db
          .updateTable('rewards')
          .set({
            ...(changes.details !== undefined ? { details: JSON.stringify(changes.details) } : {}),
            ...(changes.tags !== undefined ? { tags: JSON.stringify(changes.tags) } : {}),
            ...(changes.drawsAt !== undefined ? { draws_at: changes.drawsAt } : {}),
            ...(changes.expiresAt !== undefined ? { expires_at: changes.expiresAt } : {}),
            updated_at: data.updatedAt,
            updated_by: data.updatedBy,
          })
          .where('id', '=', data.rewardId)
          .execute();
        return;
      }
    }
  },
};
