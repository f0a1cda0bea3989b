import { Router } from 'express';
import type { Kysely, Selectable } from 'kysely';
import type { Community } from '../domain/community.ts';
import type { VariableConfig } from '../domain/variable-config.ts';
import type { ServiceContext } from '../api/context.ts';
import type { CommunityRow, CommunityTables } from '../projectors/communities.ts';
import type { VariableConfigRow, VariableConfigTables } from '../projectors/variable-configs.ts';
import { tenantOf } from '../infra/auth.ts';
import { pageOf } from '../api/contract/common.ts';
import { communitySchema, variableConfigSchema } from '../api/contract/communities.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { newestFirst, pagination, type Page } from '../infra/http/pagination.ts';
import { parse } from '../api/routes.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { withTableTypes } from '../infra/database.ts';

export function communityQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<CommunityTables & VariableConfigTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, ['communities'], ctx.config.readYourWritesTimeoutMs);
  const freshConfigs = readYourWrites(db, ['variable_configs'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/communities',
      operationId: 'listCommunities',
      tag: 'Communities',
      summary: "List the organisation's communities, newest first",
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of communities', schema: pageOf(communitySchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const { rows, totalCount } = await newestFirst(db.selectFrom('communities').where('organisation_id', '=', organisationId), { limit, skip });
      const page: Page<Community> = { totalCount, edges: rows.map(toCommunity) };
      res.json(page);
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/communities/:communityId',
      operationId: 'getCommunity',
      tag: 'Communities',
      summary: 'Read one community',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The community', schema: communitySchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const row = await db
        .selectFrom('communities')
        .selectAll()
        .where('organisation_id', '=', organisationId)
        .where('id', '=', String(req.params.communityId).toLowerCase())
        .executeTakeFirst();
      if (!row) throw notFound('Community not found');
      res.json(toCommunity(row));
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/variable-configs',
      operationId: 'listVariableConfigs',
      tag: 'Variable configs',
      summary: "List the organisation's variable configs, newest first",
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of variable configs', schema: pageOf(variableConfigSchema) } },
    },
    freshConfigs,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const { rows, totalCount } = await newestFirst(db.selectFrom('variable_configs').where('organisation_id', '=', organisationId), { limit, skip });
      const page: Page<VariableConfig> = { totalCount, edges: rows.map(toVariableConfig) };
      res.json(page);
    },
  );

  return router;
}

function toCommunity(row: Selectable<CommunityRow>): Community {
  return {
    id: row.id,
    organisationId: row.organisation_id,
    name: row.name,
    description: row.description,
    details: row.details,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    createdBy: row.created_by,
    updatedBy: row.updated_by,
  };
}

function toVariableConfig(row: Selectable<VariableConfigRow>): VariableConfig {
  return {
    id: row.id,
    organisationId: row.organisation_id,
    key: row.key,
    type: row.type,
    description: row.description,
    createdAt: iso(row.created_at),
    createdBy: row.created_by,
  };
}

export function iso(value: Date | string): string {
  return new Date(value).toISOString();
}
