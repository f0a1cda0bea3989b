import { Router } from 'express';
import type { Kysely } from 'kysely';
import { tenantOf } from '../infra/auth.ts';
import type { ChallengeRecord } from '../domain/challenge.ts';
import { challengeSchema, challengeView, type ChallengeView } from '../api/contract/challenges.ts';
import { pageOf } from '../api/contract/common.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { newestFirst, pagination, type Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { ID_PATTERN } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import type { ChallengeTables } from '../projectors/challenges.ts';
import { allocationFigures, allocationIdsOf, withFigures } from './rewards.ts';
import { withTableTypes } from '../infra/database.ts';

export function challengeQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<ChallengeTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, ['challenges', 'reward_allocations'], ctx.config.readYourWritesTimeoutMs);
  /** The challenges as the API shows them, each action's allocations with what has been handed out of them. */
  const viewsOf = async (organisationId: string, records: ChallengeRecord[]): Promise<ChallengeView[]> => {
    const views = records.map(challengeView);
    const distributions = views.flatMap((view) => view.actions.flatMap((action) => (action.distribution ? [action.distribution] : [])));
    const figures = await allocationFigures(withTableTypes(ctx.database.db), organisationId, allocationIdsOf(distributions));
    return views.map((view) => ({
      ...view,
      actions: view.actions.map((action) => (action.distribution ? { ...action, distribution: withFigures(action.distribution, figures) } : action)),
    }));
  };

  admin.route(
    router,
    {
      method: 'get',
      path: '/challenges',
      operationId: 'listChallenges',
      tag: 'Challenges',
      summary: "List the organisation's challenges, newest first",
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of challenges, with every language of their details', schema: pageOf(challengeSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const { rows, totalCount } = await newestFirst(db.selectFrom('challenges').where('organisation_id', '=', organisationId), { limit, skip });
      const page: Page<ChallengeView> = {
        totalCount,
        edges: await viewsOf(
          organisationId,
          rows.map((row) => row.document),
        ),
      };
      res.json(page);
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/challenges/:challengeId',
      operationId: 'getChallenge',
      tag: 'Challenges',
      summary: 'Read one challenge, with its actions in order',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The challenge', schema: challengeSchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const id = String(req.params.challengeId);
      if (!ID_PATTERN.test(id)) throw notFound('Challenge not found');
      const row = await db
        .selectFrom('challenges')
        .select('document')
        .where('organisation_id', '=', organisationId)
        .where('id', '=', id.toLowerCase())
        .executeTakeFirst();
      if (!row) throw notFound('Challenge not found');
      const [view] = await viewsOf(organisationId, [row.document]);
      res.json(view);
    },
  );

  return router;
}
