import { sql } from 'kysely';
import type { LocalisedDetails } from '../domain/localised-details.ts';
import type { Redeemable, RewardEvent, RewardKind } from '../domain/reward.ts';
import type { Held, Json, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface RewardRow {
  id: string;
  organisation_id: string;
  community_id: string;
  kind: RewardKind;
  details: Json<LocalisedDetails>;
  tags: Json<string[]>;
  campaigns: Json<string[]>;
  additional_community_ids: Json<string[]>;
  metadata: Json<Record<string, unknown>>;
  /** Entries only. */
  draws_at: NullableTimestamp;
  supply: number | null;
  /** Assets only. */
  redeemable: Json<Redeemable | null>;
  code_count: number | null;
  expires_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  created_by: string;
  updated_by: string;
}

export interface RewardTables {
  rewards: RewardRow;
}

/**
 * Rewards as the admin API shows them, and as the distribution engine and analytics join them: one row
 * per reward, with its kind's columns (draws_at and supply for entries; redeemable, code_count and
 * expires_at for assets) left null for the other kind. The codes themselves stay in the event log.
 */
export const rewardsProjection = defineProjection<RewardTables, Extract<RewardEvent, { type: 'RewardCreated' | 'RewardUpdated' }>>({
  name: 'rewards',
  version: 1,
  tables: ['rewards'],
  canHandle: ['RewardCreated', 'RewardUpdated'],
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

  /** One read of the rewards the batch names, its events folded in log order, one upsert. */
  async apply(db, events) {
    const rewards = new RowBatch<Held<RewardRow>>('rewards', ['id']);
    await rewards.load(
      db,
      events.map((event) => ({ id: event.data.rewardId })),
    );
    for (const event of events) {
      switch (event.type) {
        case 'RewardCreated': {
          const { data } = event;
          if (rewards.get({ id: data.rewardId })) break;
          rewards.set({
            id: data.rewardId,
            organisation_id: data.organisationId,
            community_id: data.communityId,
            kind: data.kind,
            details: data.details,
            tags: data.tags,
            campaigns: data.campaigns,
            additional_community_ids: data.additionalCommunityIds,
            metadata: data.metadata,
            draws_at: data.kind === 'entries' ? data.drawsAt : null,
            supply: data.kind === 'entries' ? data.supply : null,
            redeemable: data.kind === 'asset' ? data.redeemable : null,
            code_count: data.kind === 'asset' && data.codes !== null ? data.codes.length : null,
            expires_at: data.kind === 'asset' ? data.expiresAt : null,
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          });
          break;
        }
        case 'RewardUpdated': {
          const { changes } = event.data;
          const row = rewards.get({ id: event.data.rewardId });
          if (!row) break;
          rewards.set({
            ...row,
            ...(changes.details !== undefined ? { details: changes.details } : {}),
            ...(changes.tags !== undefined ? { tags: changes.tags } : {}),
            ...(changes.drawsAt !== undefined ? { draws_at: changes.drawsAt } : {}),
            ...(changes.expiresAt !== undefined ? { expires_at: changes.expiresAt } : {}),
            updated_at: event.data.updatedAt,
            updated_by: event.data.updatedBy,
          });
          break;
        }
      }
    }
    await rewards.save(db);
  },
});
