import type { GameEvent, GameRecord, GameState } from '../domain/game.ts';
import { gameDecider } from '../domain/game.ts';
import type { LegacyProjection as Projection } from './legacy.ts';

/** Game configs with their prizes, the whole record in `document`, folded by the domain's own `evolve`. */
export const gamesProjection: Projection = {
  name: 'games',
  version: 1,
  tables: ['games'],
  filter: { categories: ['game'] },
  migrations: {
    '0001_games': {
      async up(db) {
        // Read by id (the primary key) within one organisation; there is no list of games.
        await db.schema
          .createTable('games')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('organisation_id', 'text', (c) => c.notNull())
          .addColumn('created_at', 'timestamptz', (c) => c.notNull())
          .addColumn('document', 'jsonb', (c) => c.notNull())
          .execute();
      },
    },
  },

  async apply(db, event) {
    const typed = event as unknown as GameEvent;
    if (typed.type === 'GameCreated') {
      const record = recordOf(gameDecider.evolve(gameDecider.initialState, typed));
      await db
        .insertInto('games')
        .values({ id: record.gameId, organisation_id: record.organisationId, created_at: record.createdAt, document: JSON.stringify(record) })
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
      return;
    }
    const row = await db.selectFrom('games').select('document').where('id', '=', typed.data.gameId).executeTakeFirst();
    if (!row) throw new Error(`${typed.type} for game ${typed.data.gameId}, which the read model does not hold`);
    const record = recordOf(gameDecider.evolve({ exists: true, ...(row.document as GameRecord) }, typed));
    await db
      .updateTable('games')
      .set({ document: JSON.stringify(record) })
      .where('id', '=', record.gameId)
      .execute();
  },
};

function recordOf(state: GameState): GameRecord {
  if (!state.exists) throw new Error('a game event left no game');
  const { exists: _exists, ...record } = state;
  return record;
}
