import { sql, type ColumnType } from 'kysely';
import type { AllocationDistributedEvent, GiveawayDrawnEvent } from '../domain/engagement-events.ts';
import { idFrom } from '../infra/ids.ts';
import { defineProjection } from './projection.ts';
import type { Timestamp, NullableTimestamp } from './columns.ts';

/** One entry record per (reward, user): the same id however often it is rebuilt. */
export function rewardEntryId(rewardId: string, userId: string): string {
  return idFrom(`rewardentry:${rewardId}:${userId}`);
}

/** One hand-out of entries, as `entries` lists them (oldest first). */
export interface RewardEntryHandOut {
  allocationId: string;
  amount: number;
  createdAt: string;
}

export interface RewardEntriesTable {
  id: string;
  organisation_id: string;
  community_id: string;
  reward_id: string;
  user_id: string;
  /** bigint: read back as a string. */
  total_entries: ColumnType<string, number, string>;
  entries: ColumnType<RewardEntryHandOut[], string, string>;
  reward_asset_ids: ColumnType<string[], string | undefined, string>;
  created_at: Timestamp;
  updated_at: Timestamp;
  checked_at: NullableTimestamp;
  drawn_at: NullableTimestamp;
}

export interface RewardEntryTables {
  reward_entries: RewardEntriesTable;
}

type RewardEntryEvent = AllocationDistributedEvent | GiveawayDrawnEvent;

/** A user's hand-outs into one giveaway within a phase of the batch, summed as the one-event upserts would. */
interface HandOuts {
  id: string;
  organisation_id: string;
  community_id: string;
  reward_id: string;
  user_id: string;
  total_entries: number;
  entries: RewardEntryHandOut[];
  /** The first hand-out's: what the row gets if this phase creates it. */
  created_at: string;
  /** The latest of the hand-outs' times (`updated_at` only ever moves forwards). */
  updated_at: string;
}

/**
 * What a batch does between two draws of the same giveaway: the hand-outs before the draw, then the draw.
 * Hand-outs into different giveaways, and draws of different giveaways, touch different rows, so only the
 * order within a giveaway matters; phase n holds each giveaway's hand-outs after its n-th draw in the batch
 * (in practice a giveaway is drawn once, so a batch has one or two phases).
 */
interface Phase {
  handOuts: Map<string, HandOuts>;
  draws: GiveawayDrawnEvent['data'][];
}

/**
 * Reward entries: a user's entries into one giveaway (an entries reward), one row per (organisation, reward,
 * user), from the engine's hand-outs (`AllocationDistributed` with `rewardKind: 'entries'`: `total_entries`
 * grows and `entries` gets `{allocationId, amount, createdAt}` per hand-out) and the draw (`GiveawayDrawn`
 * stamps `drawn_at` and `checked_at` on every entrant's row and adds each winner's asset id to
 * `reward_asset_ids`). `community_id` is where the user first earned entries; `created_at` is that first
 * hand-out. What belongs to the reward (details, tags, campaigns, the draw date the contract calls
 * `checkByDate`) is read from `rewards` at query time, so it is always the reward as it is now.
 *
 * A batch reads nothing: per phase, one multi-row upsert of the hand-outs summed per row (the database adds
 * them to what it holds) and one update of every drawn giveaway's entrants.
 */
export const rewardEntriesProjection = defineProjection<RewardEntryTables, RewardEntryEvent>({
  name: 'reward_entries',
  version: 1,
  tables: ['reward_entries'],
  canHandle: ['AllocationDistributed', 'GiveawayDrawn'],
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

  async apply(db, events) {
    const phases: Phase[] = [];
    const phaseOf = (index: number) => (phases[index] ??= { handOuts: new Map(), draws: [] });
    const drawsSeen = new Map<string, number>();
    for (const event of events) {
      if (event.type === 'AllocationDistributed') {
        const { data } = event;
        if (data.rewardKind !== 'entries') continue;
        const handOuts = phaseOf(drawsSeen.get(data.rewardId) ?? 0).handOuts;
        const id = rewardEntryId(data.rewardId, data.userId);
        const entry = { allocationId: data.allocationId, amount: data.amount, createdAt: data.occurredAt };
        const row = handOuts.get(id);
        if (!row) {
          handOuts.set(id, {
            id,
            organisation_id: data.organisationId,
            community_id: data.communityId,
            reward_id: data.rewardId,
            user_id: data.userId,
            total_entries: data.amount,
            entries: [entry],
            created_at: data.occurredAt,
            updated_at: data.occurredAt,
          });
        } else {
          row.total_entries += data.amount;
          row.entries.push(entry);
          if (Date.parse(data.occurredAt) > Date.parse(row.updated_at)) row.updated_at = data.occurredAt;
        }
      } else {
        const drawn = drawsSeen.get(event.data.rewardId) ?? 0;
        phaseOf(drawn).draws.push(event.data);
        drawsSeen.set(event.data.rewardId, drawn + 1);
      }
    }
    for (const { handOuts, draws } of phases) {
      const rows = [...handOuts.values()];
      for (let start = 0; start < rows.length; start += 2000) {
        await db
          .insertInto('reward_entries')
          .values(
            rows.slice(start, start + 2000).map((row) => ({
              ...row,
              entries: JSON.stringify(row.entries),
              reward_asset_ids: JSON.stringify([]),
            })),
          )
          .onConflict((oc) =>
            oc.column('id').doUpdateSet({
              total_entries: sql<string>`reward_entries.total_entries + excluded.total_entries`,
              entries: sql<string>`reward_entries.entries || excluded.entries`,
              updated_at: sql<Date>`greatest(reward_entries.updated_at, excluded.updated_at)`,
            }),
          )
          .execute();
      }
      if (draws.length === 0) continue;
      // One statement for every entrant of every giveaway drawn in this phase: the draw's time, and each
      // winner's new asset ids (a giveaway is drawn at most once per phase).
      const won = draws.map(({ winners }) => {
        const byUser: Record<string, string[]> = {};
        for (const { userId, assetId } of winners) (byUser[userId] ??= []).push(assetId);
        return JSON.stringify(byUser);
      });
      const drawn = sql<{ reward_id: string; drawn_at: Date; won: Record<string, string[]> }>`(select
          unnest(${draws.map((draw) => draw.rewardId)}::text[]) as reward_id,
          unnest(${draws.map((draw) => draw.drawnAt)}::timestamptz[]) as drawn_at,
          unnest(${won}::jsonb[]) as won)`;
      await db
        .updateTable('reward_entries')
        .from(drawn.as('drawn'))
        .set((eb) => ({
          drawn_at: eb.ref('drawn.drawn_at'),
          checked_at: eb.ref('drawn.drawn_at'),
          updated_at: sql<Date>`greatest(reward_entries.updated_at, drawn.drawn_at)`,
          reward_asset_ids: sql<string>`reward_entries.reward_asset_ids || coalesce(drawn.won -> reward_entries.user_id, '[]'::jsonb)`,
        }))
        .whereRef('reward_entries.reward_id', '=', 'drawn.reward_id')
        .execute();
    }
  },
});
