import type { Kysely } from 'kysely';
import type { UntypedDb } from '../../infra/database.ts';
import { liveGeneration, schemaOf } from '../../projectors/runtime/index.ts';
import { ENGINE_PROCESS, type EngineState } from './state.ts';

/**
 * What others may read of the engine's private state, from its live generation's schema (the engine
 * exposes no tables): a giveaway's entrants, for its draw.
 */
async function liveState(db: UntypedDb): Promise<Kysely<EngineState> | null> {
  const live = await liveGeneration(db, ENGINE_PROCESS);
  return live ? db.withSchema(schemaOf(ENGINE_PROCESS, live.generation)) : null;
}

/** The users with entries into a giveaway, by user id: what `drawWinners` draws from. */
export async function readEntriesForDraw(db: UntypedDb, rewardId: string): Promise<{ userId: string; entries: number }[]> {
  const engine = await liveState(db);
  if (!engine) return [];
  const rows = await engine
    .selectFrom('engine_reward_entries')
    .select(['user_id', 'entries'])
    .where('reward_id', '=', rewardId)
    .where('entries', '>', 0)
    .orderBy('user_id')
    .execute();
  return rows.map((row) => ({ userId: row.user_id, entries: Number(row.entries) }));
}
