import { sql } from 'kysely';
import type { AllocationDistributedEvent, GiveawayDrawnEvent } from '../domain/engagement-events.ts';
import { idFrom } from '../infra/ids.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** One entry record per (reward, user): the same id however often it is rebuilt. */
export function rewardEntryId(rewardId: string, userId: string): string {
  return idFrom(`rewardentry:${rewardId}:${userId}`);
}

/**
 * Reward entries: a user's entries into one giveaway (an entries reward), one row per (organisation, reward,
 * user), from the engine's hand-outs (`AllocationDistributed` with `rewardKind: 'entries'`: `total_entries`
 * grows and `entries` gets `{allocationId, amount, createdAt}` per hand-out) and the draw (`GiveawayDrawn`
 * stamps `drawn_at` and `checked_at` on every entrant's row and adds each winner's asset id to
 * `reward_asset_ids`). `community_id` is where the user first earned entries; `created_at` is that first
 * hand-out. What belongs to the reward (details, tags, campaigns, the draw date the contract calls
 * `checkByDate`) is read from `rewards` at query time, so it is always the reward as it is now.
 */
export const rewardEntriesProjection: Projection = {
  name: 'reward_entries',
  version: 1,
  tables: ['reward_entries'],
  filter: { eventTypes: ['AllocationDistributed', 'GiveawayDrawn'] },
  migrations: {
    '0001_reward_entries': {
      async up(db) {
        await db.schema
          .createTable('reward_entries')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('community_id', 'text', (c) => c.notNull())
          .addColumn('reward_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('total_entries', 'bigint', (c) => c.notNull())
          .addColumn('entries', 'jsonb', (c) => c.notNull())
          .addColumn('reward_asset_ids', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
          .addColumn('checked_at', 'timestamptz')
          .addColumn('drawn_at', 'timestamptz')
          .execute();
        // A user's entries, newest first with id as the tie-break (`/me/reward-entries`).
        await db.schema
          .createIndex('reward_entries_by_user')
          .on('reward_entries')
          .columns(['organisation_id', 'user_id', 'created_at desc', 'id desc'])
          .execute();
        // A reward's entrants (the draw stamps them all; analytics counts them).
        await db.schema.createIndex('reward_entries_by_reward').on('reward_entries').columns(['reward_id', 'user_id']).unique().execute();
      },
    },
  },

  async apply(db, event) {
    const typed = event as unknown as AllocationDistributedEvent | GiveawayDrawnEvent;
    if (typed.type === 'AllocationDistributed') {
      const { data } = typed;
      if (data.rewardKind !== 'entries') return;
      const entry = { allocationId: data.allocationId, amount: data.amount, createdAt: data.occurredAt };
      await db
        .insertInto('reward_entries')
        .values({
          id: rewardEntryId(data.rewardId, data.userId),
          organisation_id: data.organisationId,
          community_id: data.communityId,
          reward_id: data.rewardId,
          user_id: data.userId,
          total_entries: data.amount,
          entries: JSON.stringify([entry]),
          reward_asset_ids: JSON.stringify([]),
          created_at: data.occurredAt,
          updated_at: data.occurredAt,
        })
        .onConflict((oc) =>
          oc.column('id').doUpdateSet({
            total_entries: sql`reward_entries.total_entries + excluded.total_entries`,
            entries: sql`reward_entries.entries || excluded.entries`,
            updated_at: sql`greatest(reward_entries.updated_at, excluded.updated_at)`,
          }),
        )
        .execute();
      return;
    }
    if (typed.type === 'GiveawayDrawn') {
      const { rewardId, drawnAt, winners } = typed.data;
      const won: Record<string, string[]> = {};
      for (const { userId, assetId } of winners) (won[userId] ??= []).push(assetId);
      // One statement for every entrant: the draw's time, and each winner's new asset ids.
      await db
        .updateTable('reward_entries')
        .set({
          drawn_at: drawnAt,
          checked_at: drawnAt,
          updated_at: sql`greatest(updated_at, ${drawnAt}::timestamptz)`,
          reward_asset_ids: sql`reward_asset_ids || coalesce(${JSON.stringify(won)}::jsonb -> user_id, '[]'::jsonb)`,
        })
        .where('reward_id', '=', rewardId)
        .execute();
    }
  },
};
