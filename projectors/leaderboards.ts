import { sql } from 'kysely';
import { rankRewardsOf, type LeaderboardEvent } from '../domain/leaderboard.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** Leaderboard configs as the admin API shows them, and their rank-range distributions (one row per range). */
export const leaderboardsProjection: Projection = {
  name: 'leaderboards',
  version: 1,
  tables: ['leaderboards', 'leaderboard_rank_rewards'],
  filter: { categories: ['leaderboard'] },
  migrations: {
    '0001_leaderboards': {
      async up(db) {
        await db.schema
          .createTable('leaderboards')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('description', 'text')
          .addColumn('metric_type', 'text', (c) => c.notNull())
          .addColumn('period', 'text', (c) => c.notNull())
          .addColumn('starts_at', 'timestamptz', (c) => c.notNull())
          .addColumn('expires_at', 'timestamptz')
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('conditions', 'jsonb', (c) => c.notNull())
          .addColumn('rewards_config', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .addColumn('updated_by', 'text', (c) => c.notNull())
          .execute();
        // The admin list: one organisation, newest first, id as the tie-break.
        await db.schema.createIndex('leaderboards_by_organisation').on('leaderboards').columns(['organisation_id', 'created_at desc', 'id desc']).execute();
      },
    },
    '0002_leaderboard_rank_rewards': {
      async up(db) {
        await db.schema
          .createTable('leaderboard_rank_rewards')
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('leaderboard_id', 'text', (c) => c.notNull())
          .addColumn('start_rank', 'integer', (c) => c.notNull())
          .addColumn('end_rank', 'integer', (c) => c.notNull())
          .addColumn('distribution_event_id', 'text', (c) => c.notNull())
          .addColumn('points_to_distribute', 'double precision', (c) => c.notNull())
          .addColumn('bonus_xp_to_distribute', 'double precision', (c) => c.notNull())
          .addColumn('amount_to_distribute', 'double precision', (c) => c.notNull())
          // Each allocation with its `distributed` count, which the engine raises as it pays rank rewards.
          .addColumn('allocations', 'jsonb', (c) => c.notNull())
          // Serves the distribution read (one organisation, one leaderboard, by start rank) and the replace.
          .addPrimaryKeyConstraint('leaderboard_rank_rewards_pkey', ['organisation_id', 'leaderboard_id', 'start_rank'])
          .execute();
      },
    },
  },

  async apply(db, event) {
    const { type, data } = event as unknown as LeaderboardEvent;
    switch (type) {
      case 'LeaderboardCreated':
        await db
          .insertInto('leaderboards')
          .values({
            id: data.leaderboardId,
            organisation_id: data.organisationId,
            name: data.name,
            description: data.description,
            metric_type: data.metricType,
            period: data.period,
            starts_at: data.startsAt,
            expires_at: data.expiresAt,
            status: data.status,
            conditions: JSON.stringify(data.conditions),
            rewards_config: JSON.stringify([]),
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;

      case 'LeaderboardUpdated': {
        const { name, description, expiresAt, conditions } = data.changes;
        await db
          .updateTable('leaderboards')
          .set({
            ...(name !== undefined ? { name } : {}),
            ...(description !== undefined ? { description } : {}),
            ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
            ...(conditions !== undefined ? { conditions: JSON.stringify(conditions) } : {}),
            updated_at: data.updatedAt,
            updated_by: data.updatedBy,
          })
          .where('organisation_id', '=', data.organisationId)
          .where('id', '=', data.leaderboardId)
          .execute();
        return;
      }

      case 'LeaderboardStatusChanged':
        await db
          .updateTable('leaderboards')
          .set({ status: data.to, updated_at: data.changedAt, updated_by: data.changedBy })
          .where('organisation_id', '=', data.organisationId)
          .where('id', '=', data.leaderboardId)
          .execute();
        return;

      case 'LeaderboardRewardsAssigned':
        // The event carries the whole distribution: replace the leaderboard's rows with it.
        await db
          .deleteFrom('leaderboard_rank_rewards')
          .where('organisation_id', '=', data.organisationId)
          .where('leaderboard_id', '=', data.leaderboardId)
          .execute();
        if (data.rewards.length > 0) {
          await db
            .insertInto('leaderboard_rank_rewards')
            .values(
              data.rewards.map((reward) => ({
                organisation_id: data.organisationId,
                leaderboard_id: data.leaderboardId,
                start_rank: reward.startRank,
                end_rank: reward.endRank,
                distribution_event_id: reward.distributionEventId,
                points_to_distribute: reward.pointsToDistribute,
                bonus_xp_to_distribute: reward.bonusXpToDistribute,
                amount_to_distribute: reward.rewardsConfig.amountToDistribute,
                allocations: JSON.stringify(reward.rewardsConfig.allocations.map((allocation) => ({ ...allocation, distributed: 0 }))),
              })),
            )
            .execute();
        }
        await db
          .updateTable('leaderboards')
          .set({ rewards_config: JSON.stringify(rankRewardsOf(data.rewards)), updated_at: data.assignedAt, updated_by: data.assignedBy })
          .where('organisation_id', '=', data.organisationId)
          .where('id', '=', data.leaderboardId)
          .execute();
        return;
    }
  },
};
