import { Router } from 'express';
import type { Kysely } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { tenantOf } from '../infra/auth.ts';
import { teamMemberSchema } from '../api/contract/users.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { readYourWrites } from './read-your-writes.ts';
import { requireUser, signedInUserOf } from '../infra/require-user.ts';
import { userTokenKey } from '../infra/user-tokens.ts';
import { minPositionHeader } from './read-your-writes.ts';
import { findTeamMember, type TeamMemberTables } from './users.ts';
import { withTableTypes } from '../infra/database.ts';

const userTokenHeader = {
  name: 'Authorization',
  description: '`Bearer <user token>`, issued by the admin API (`POST /users/{userId}/tokens`); missing, invalid, expired or another organisation’s → 401',
  required: true,
};

/** Integration routes for the signed-in end user. */
export function meQueries(ctx: ServiceContext, integration: ApiDescription): Router {
  const router = Router();
  const db: Kysely<TeamMemberTables> = withTableTypes(ctx.database.db);
  const signedIn = requireUser(userTokenKey(ctx.config));
  const fresh = readYourWrites(db, ['users', 'user_ledgers', 'achievements'], ctx.config.readYourWritesTimeoutMs);

  integration.route(
    router,
    {
      method: 'get',
      path: '/me',
      operationId: 'getMe',
      tag: 'Me',
      summary: 'The signed-in user’s team member record',
      headers: [userTokenHeader, minPositionHeader],
      responses: { 200: { description: 'The team member record', schema: teamMemberSchema } },
    },
    signedIn,
    fresh,
    async (_req, res) => {
      const { organisationId } = tenantOf(res);
      const member = await findTeamMember(db, organisationId, signedInUserOf(res).userId);
      if (!member) throw notFound('User not found');
      res.json(member);
    },
  );

  return router;
}
