import { Router } from 'express';
import type { Kysely } from 'kysely';
import { tenantOf } from '../infra/auth.ts';
import { gameConfigSchema, gameView } from '../api/contract/games.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { readYourWrites } from './read-your-writes.ts';
import { ID_PATTERN } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import type { GameTables } from '../projectors/games.ts';
import { allocationFigures, allocationIdsOf, withFigures } from './rewards.ts';
import { minPositionHeader } from './read-your-writes.ts';
import { withTableTypes } from '../infra/database.ts';

export function gameQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<GameTables> = withTableTypes(ctx.database.db);

  admin.route(
    router,
    {
      method: 'get',
      path: '/games/:gameConfigId',
      operationId: 'getGame',
      tag: 'Games',
      summary: 'Read one game config with its prizes',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The game config', schema: gameConfigSchema } },
    },
    readYourWrites(db, ['games', 'reward_allocations'], ctx.config.readYourWritesTimeoutMs),
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const id = String(req.params.gameConfigId);
      if (!ID_PATTERN.test(id)) throw notFound('Game not found');
      const row = await db
        .selectFrom('games')
        .select('document')
        .where('organisation_id', '=', organisationId)
        .where('id', '=', id.toLowerCase())
        .executeTakeFirst();
      if (!row) throw notFound('Game not found');
      const view = gameView(row.document);
      const figures = await allocationFigures(withTableTypes(ctx.database.db), organisationId, allocationIdsOf(view.distributions));
      res.json({ ...view, distributions: view.distributions.map((distribution) => withFigures(distribution, figures)) });
    },
  );

  return router;
}
