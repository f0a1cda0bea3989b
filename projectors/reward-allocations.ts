import type { AllocationEvent } from '../domain/allocation.ts';
import type { ChallengeEvent } from '../domain/challenge.ts';
import type { DistributionEntry } from '../domain/distribution-entry.ts';
import type { AllocationDistributedEvent } from '../domain/engagement-events.ts';
import type { GameEvent } from '../domain/game.ts';
import type { LeaderboardEvent } from '../domain/leaderboard.ts';
import type { Held, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface RewardAllocationRow {
  id: string;
  organisation_id: string;
  reward_id: string;
  supply: number;
  amount_to_distribute: number;
  distributed: number;
  created_at: Timestamp;
  created_by: string;
}

export interface RewardAllocationTables {
  reward_allocations: RewardAllocationRow;
}

/** The events that name allocations inline: an action's, a leaderboard rank range's or a game's distribution. */
type DistributionEvent =
  | Extract<ChallengeEvent, { type: 'ChallengeCreated' | 'ChallengeUpdated' | 'ActionDistributionAssigned' }>
  | Extract<LeaderboardEvent, { type: 'LeaderboardRewardsAssigned' }>
  | Extract<GameEvent, { type: 'GameDistributionsAssigned' }>;

type RewardAllocationEvent = AllocationEvent | AllocationDistributedEvent | DistributionEvent;

/** The distribution entries an event assigns, with who assigned them and when. */
function assigned(event: DistributionEvent): { entries: Pick<DistributionEntry, 'rewardsConfig'>[]; by: string; at: string } {
  switch (event.type) {
    case 'ChallengeCreated':
    case 'ChallengeUpdated': {
      const actions = event.type === 'ChallengeCreated' ? event.data.actions : (event.data.changes.actions ?? []);
      const [by, at] = event.type === 'ChallengeCreated' ? [event.data.createdBy, event.data.createdAt] : [event.data.updatedBy, event.data.updatedAt];
      return { entries: actions.flatMap((action) => (action.distribution ? [action.distribution] : [])), by, at };
    }
    case 'ActionDistributionAssigned':
      return { entries: [event.data.distribution], by: event.data.assignedBy, at: event.data.assignedAt };
    case 'LeaderboardRewardsAssigned':
      return { entries: event.data.rewards, by: event.data.assignedBy, at: event.data.assignedAt };
    case 'GameDistributionsAssigned':
      return { entries: event.data.distributions, by: event.data.assignedBy, at: event.data.assignedAt };
  }
}

function allocationIdsOf(event: RewardAllocationEvent): string[] {
  if (event.type === 'AllocationCreated' || event.type === 'AllocationDistributed') return [event.data.allocationId];
  return assigned(event).entries.flatMap((entry) => entry.rewardsConfig.allocations.map((allocation) => allocation.id));
}

/**
 * Reward allocations: every allocation a reward has, whether `POST /rewards/{id}/allocations` created it
 * (`AllocationCreated`) or a distribution named it inline (an action's, a leaderboard's, a game's), with its
 * supply and what the engine has handed out of it (`AllocationDistributed`), joined to `rewards` on
 * reward_id. Like the engine, the first time an allocation id is seen fixes its reward and supply; a later
 * distribution naming the same id refers to that allocation.
 */
export const rewardAllocationsProjection = defineProjection<RewardAllocationTables, RewardAllocationEvent>({
  name: 'reward_allocations',
  version: 3,
  tables: ['reward_allocations'],
  canHandle: [
    'AllocationCreated',
    'AllocationDistributed',
    'ChallengeCreated',
    'ChallengeUpdated',
    'ActionDistributionAssigned',
    'LeaderboardRewardsAssigned',
    'GameDistributionsAssigned',
  ],
  migrations: {
    '0001_reward_allocations': {
      async up(db) {
        await db.schema
          .createTable('reward_allocations')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('supply', 'integer', (c) => c.notNull())
          .addColumn('amount_to_distribute', 'integer', (c) => c.notNull())
          .addColumn('distributed', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('created_by', 'text', (c) => c.notNull())
          .execute();
        // A reward's allocations, newest first with id as the tie-break (the admin list and the joins).
        await db.schema
          .createIndex('reward_allocations_by_reward')
          .on('reward_allocations')
          .columns(['organisation_id', 'reward_id', 'created_at desc', 'id desc'])
          .execute();
      },
    },
  },

  /** One read of the allocations the batch names, hand-outs added up in memory in log order, one upsert. */
  async apply(db, events) {
    const allocations = new RowBatch<Held<RewardAllocationRow>>('reward_allocations', ['id']);
    await allocations.load(
      db,
      events.flatMap((event) => allocationIdsOf(event).map((id) => ({ id }))),
    );
    const open = (row: Held<RewardAllocationRow>) => {
      if (!allocations.get({ id: row.id })) allocations.set(row);
    };
    for (const event of events) {
      switch (event.type) {
        case 'AllocationCreated': {
          const { data } = event;
          open({
            id: data.allocationId,
            organisation_id: data.organisationId,
            reward_id: data.rewardId,
            supply: data.supply,
            amount_to_distribute: data.amountToDistribute,
            distributed: 0,
            created_at: data.createdAt,
            created_by: data.createdBy,
          });
          break;
        }
        case 'AllocationDistributed': {
          const row = allocations.get({ id: event.data.allocationId });
          if (row) allocations.set({ ...row, distributed: row.distributed + event.data.amount });
          break;
        }
        default: {
          const { entries, by, at } = assigned(event);
          for (const allocation of entries.flatMap((entry) => entry.rewardsConfig.allocations)) {
            open({
              id: allocation.id,
              organisation_id: event.data.organisationId,
              reward_id: allocation.rewardId,
              supply: allocation.supply,
              amount_to_distribute: allocation.amountToDistribute,
              distributed: 0,
              created_at: at,
              created_by: by,
            });
          }
        }
      }
    }
    await allocations.save(db);
  },
});
