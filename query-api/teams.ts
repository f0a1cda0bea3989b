import { Router } from 'express';
import type { Kysely } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { tenantOf } from '../infra/auth.ts';
import { pageOf } from '../api/contract/common.ts';
import { teamMemberSchema, teamsQuery } from '../api/contract/users.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { parse } from '../api/routes.ts';
import { readYourWrites } from './read-your-writes.ts';
import { minPositionHeader } from './read-your-writes.ts';
import type { CommunityTables } from '../projectors/communities.ts';
import { listTeamMembers, type TeamMemberTables } from './users.ts';
import { withTableTypes } from '../infra/database.ts';

export function teamQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const members: Kysely<TeamMemberTables> = withTableTypes(ctx.database.db);
  const communities: Kysely<CommunityTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(ctx.database.db, ['users', 'communities', 'user_ledgers', 'achievements'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/teams',
      operationId: 'listTeamMembers',
      tag: 'Users',
      summary: "List the organisation's team members, newest first",
      description:
        'Filters combine (AND). Points, keys, XP and community streaks are 0 until the engine that earns them exists. A communityId the organisation does not have is a 404.',
      query: teamsQuery,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of team member records', schema: pageOf(teamMemberSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip, communityId, role, search } = parse(teamsQuery, req.query);
      const { organisationId } = tenantOf(res);
      const community = communityId?.toLowerCase();
      if (community !== undefined) {
        const known = await communities
          .selectFrom('communities')
          .select('id')
          .where('organisation_id', '=', organisationId)
          .where('id', '=', community)
          .executeTakeFirst();
        if (!known) throw notFound('Community not found');
      }
      res.json(await listTeamMembers(members, organisationId, { communityId: community, role, search }, { limit, skip }));
    },
  );

  return router;
}
