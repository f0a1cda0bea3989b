import type { AllocationEvent } from '../domain/allocation.ts';
import type { AllocationDistributedEvent } from '../domain/engagement-events.ts';
import { columnsOf, type Held, type Timestamp } from './columns.ts';
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

/**
 * Reward allocations: each allocation's supply and what has been distributed from it, joined to
 * `rewards` on reward_id. `distributed` moves with the engine's hand-outs (`AllocationDistributed`).
 */
export const rewardAllocationsProjection = defineProjection<RewardAllocationTables, AllocationEvent | AllocationDistributedEvent>({
  name: 'reward_allocations',
  version: 2,
  tables: ['reward_allocations'],
  canHandle: ['AllocationCreated', 'AllocationDistributed'],
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
      events.map((event) => ({ id: event.data.allocationId })),
    );
    for (const event of events) {
      switch (event.type) {
        case 'AllocationCreated': {
          const { data } = event;
          if (allocations.get({ id: data.allocationId })) break;
          allocations.set({
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
      }
    }
    await allocations.save(db, (row) => columnsOf(row));
  },
});
