import { sql } from 'kysely';
import {
  rankRewardsOf,
  type Allocation,
  type Condition,
  type LeaderboardEvent,
  type LeaderboardStatus,
  type MetricType,
  type Period,
  type RankReward,
} from '../domain/leaderboard.ts';
import type { Held, Json, NullableTimestamp, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface LeaderboardRow {
  id: string;
  organisation_id: string;
  name: string;
  description: string | null;
  metric_type: MetricType;
  period: Period;
  starts_at: Timestamp;
  expires_at: NullableTimestamp;
  status: LeaderboardStatus;
  conditions: Json<Condition[]>;
  rewards_config: Json<RankReward[]>;
  created_at: Timestamp;
  updated_at: Timestamp;
  created_by: string;
  updated_by: string;
}

/** An allocation of a rank range, with how much of it has been handed out. */
export interface RankAllocation extends Allocation {
  distributed: number;
}

export interface LeaderboardRankRewardRow {
  organisation_id: string;
  leaderboard_id: string;
  start_rank: number;
  end_rank: number;
  distribution_event_id: string;
  points_to_distribute: number;
  bonus_xp_to_distribute: number;
  amount_to_distribute: number;
  allocations: Json<RankAllocation[]>;
}

export interface LeaderboardTables {
  leaderboards: LeaderboardRow;
  leaderboard_rank_rewards: LeaderboardRankRewardRow;
}

/** Leaderboard configs as the admin API shows them, and their rank-range distributions (one row per range). */
export const leaderboardsProjection = defineProjection<LeaderboardTables, LeaderboardEvent>({
  name: 'leaderboards',
  version: 1,
  tables: ['leaderboards', 'leaderboard_rank_rewards'],
  canHandle: ['LeaderboardCreated', 'LeaderboardUpdated', 'LeaderboardStatusChanged', 'LeaderboardRewardsAssigned'],
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

  /**
   * The configs: one read of the leaderboards the batch names, folded in log order, one upsert. The
   * distributions: an assignment replaces a leaderboard's ranges whole, so the last one of the batch is
   * what remains: one delete of the leaderboards assigned to, one insert of their last ranges.
   */
  async apply(db, events) {
    const leaderboards = new RowBatch<Held<LeaderboardRow>>('leaderboards', ['id']);
    await leaderboards.load(
      db,
      events.map((event) => ({ id: event.data.leaderboardId })),
    );
    const distributions = new Map<string, Held<LeaderboardRankRewardRow>[]>();

    for (const event of events) {
      // Changes apply to the leaderboard of this organisation only.
      const current = () => {
        const row = leaderboards.get({ id: event.data.leaderboardId });
        return row?.organisation_id === event.data.organisationId ? row : undefined;
      };
      switch (event.type) {
        case 'LeaderboardCreated': {
          const { data } = event;
          if (leaderboards.get({ id: data.leaderboardId })) break;
          leaderboards.set({
            id: data.leaderboardId,
            organisation_id: data.organisationId,
            name: data.name,
            description: data.description,
            metric_type: data.metricType,
            period: data.period,
            starts_at: data.startsAt,
            expires_at: data.expiresAt,
            status: data.status,
            conditions: data.conditions,
            rewards_config: [],
            created_at: data.createdAt,
            updated_at: data.createdAt,
            created_by: data.createdBy,
            updated_by: data.createdBy,
          });
          break;
        }
        case 'LeaderboardUpdated': {
          const row = current();
          if (!row) break;
          const { name, description, expiresAt, conditions } = event.data.changes;
          leaderboards.set({
            ...row,
            ...(name !== undefined ? { name } : {}),
            ...(description !== undefined ? { description } : {}),
            ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
            ...(conditions !== undefined ? { conditions } : {}),
            updated_at: event.data.updatedAt,
            updated_by: event.data.updatedBy,
          });
          break;
        }
        case 'LeaderboardStatusChanged': {
          const row = current();
          if (row) leaderboards.set({ ...row, status: event.data.to, updated_at: event.data.changedAt, updated_by: event.data.changedBy });
          break;
        }
        case 'LeaderboardRewardsAssigned': {
          const { data } = event;
          const ranges = data.rewards.map((reward) => ({
            organisation_id: data.organisationId,
            leaderboard_id: data.leaderboardId,
            start_rank: reward.startRank,
            end_rank: reward.endRank,
            distribution_event_id: reward.distributionEventId,
            points_to_distribute: reward.pointsToDistribute,
            bonus_xp_to_distribute: reward.bonusXpToDistribute,
            amount_to_distribute: reward.rewardsConfig.amountToDistribute,
            allocations: reward.rewardsConfig.allocations.map((allocation) => ({ ...allocation, distributed: 0 })),
          }));
          // Two ranges starting at one rank break the table's key: the event fails, as its insert would.
          if (new Set(ranges.map((range) => range.start_rank)).size !== ranges.length) {
            throw new Error(`LeaderboardRewardsAssigned for leaderboard ${data.leaderboardId} has two ranges starting at the same rank`);
          }
          distributions.set(JSON.stringify([data.organisationId, data.leaderboardId]), ranges);
          const row = current();
          if (row) leaderboards.set({ ...row, rewards_config: rankRewardsOf(data.rewards), updated_at: data.assignedAt, updated_by: data.assignedBy });
          break;
        }
      }
    }

    await leaderboards.save(db);
    if (distributions.size === 0) return;
    const assigned = [...distributions.keys()].map((key) => JSON.parse(key) as [string, string]);
    await db
      .deleteFrom('leaderboard_rank_rewards')
      .where((eb) =>
        eb(
          eb.refTuple('organisation_id', 'leaderboard_id'),
          'in',
          assigned.map(([organisationId, leaderboardId]) => eb.tuple(organisationId, leaderboardId)),
        ),
      )
      .execute();
    const ranges = [...distributions.values()].flat();
    for (let start = 0; start < ranges.length; start += 2000) {
      await db
        .insertInto('leaderboard_rank_rewards')
        .values(ranges.slice(start, start + 2000).map((range) => ({ ...range, allocations: JSON.stringify(range.allocations) })))
        .execute();
    }
  },
});
