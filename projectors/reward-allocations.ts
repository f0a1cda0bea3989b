import { sql } from 'kysely';
import type { AllocationEvent } from '../domain/allocation.ts';
import type { AllocationDistributedEvent } from '../domain/engagement-events.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/**
 * Reward allocations: each allocation's supply and what has been distributed from it, joined to
 * `rewards` on reward_id. `distributed` moves with the engine's hand-outs (`AllocationDistributed`).
 */
export const rewardAllocationsProjection: Projection = {
  name: 'reward_allocations',
  version: 2,
  tables: ['reward_allocations'],
  filter: { categories: ['allocation'] },
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

  async apply(db, event) {
    const typed = event as unknown as AllocationEvent | AllocationDistributedEvent;
    if (typed.type === 'AllocationDistributed') {
      await db
        .updateTable('reward_allocations')
        .set({ distributed: sql`distributed + ${typed.data.amount}` })
        .where('id', '=', typed.data.allocationId)
        .execute();
      return;
    }
    const { type, data } = typed;
    switch (type) {
      case 'AllocationCreated':
        await db
          .insertInto('reward_allocations')
          .values({
            id: data.allocationId,
            organisation_id: data.organisationId,
            reward_id: data.rewardId,
            supply: data.supply,
            amount_to_distribute: data.amountToDistribute,
            distributed: 0,
            created_at: data.createdAt,
            created_by: data.createdBy,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
    }
  },
};
