import { gameDecider, type GameEvent, type GameRecord, type GameState } from '../domain/game.ts';
import type { Held, Json, Timestamp } from './columns.ts';
import { defineProjection } from './projection.ts';
import { RowBatch } from './row-batch.ts';

export interface GameRow {
  id: string;
  organisation_id: string;
  created_at: Timestamp;
  /** The whole record, as the domain's `evolve` folds it. */
  document: Json<GameRecord>;
}

export interface GameTables {
  games: GameRow;
}

/** Game configs with their prizes, the whole record in `document`, folded by the domain's own `evolve`. */
export const gamesProjection = defineProjection<GameTables, GameEvent>({
  name: 'games',
  version: 1,
  tables: ['games'],
  canHandle: ['GameCreated', 'GameDistributionsAssigned'],
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

  /** One read of the games the batch names, its events folded in log order by the domain's `evolve`, one upsert. */
  async apply(db, events) {
    const games = new RowBatch<Held<GameRow>>('games', ['id']);
    await games.load(
      db,
      events.map((event) => ({ id: event.data.gameId })),
    );
    for (const event of events) {
      const { gameId } = event.data;
      if (event.type === 'GameCreated') {
        if (games.get({ id: gameId })) continue;
        const record = recordOf(gameDecider.evolve(gameDecider.initialState, event));
        games.set({ id: record.gameId, organisation_id: record.organisationId, created_at: record.createdAt, document: record });
        continue;
      }
      const row = games.get({ id: gameId });
      if (!row) throw new Error(`${event.type} for game ${gameId}, which the read model does not hold`);
      games.set({ ...row, document: recordOf(gameDecider.evolve({ exists: true, ...row.document }, event)) });
    }
    await games.save(db);
  },
});

function recordOf(state: GameState): GameRecord {
  if (!state.exists) throw new Error('a game event left no game');
  const { exists: _exists, ...record } = state;
  return record;
}
