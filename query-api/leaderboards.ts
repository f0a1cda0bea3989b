import { Router } from 'express';
import type { LeaderboardConfig } from '../domain/leaderboard.ts';
import { tenantOf } from '../infra/auth.ts';
import { notFound } from '../infra/http/errors.ts';
import type { ApiDescription } from '../infra/http/api-description.ts';
import { pageOf } from '../infra/contract/common.ts';
import { leaderboardConfigSchema } from '../infra/contract/leaderboards.ts';
import { pagination, type Page } from '../infra/http/pagination.ts';
import { parse, readYourWrites } from '../infra/http/request-context.ts';
import type { ServiceContext } from '../command-api/context.ts';

const minPositionHeader = {
  name: 'x-min-position',
  description: 'An `x-event-position` from a write: the read waits (bounded) until the read model has caught up with it',
};

export function leaderboardQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db = ctx.database.db;
  const fresh = readYourWrites(db, ['leaderboards'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/leaderboards',
      tag: 'Leaderboards',
      summary: "List the organisation's leaderboard configs, newest first",
      query: pagination,
      headers: [minPositionHeader],
      responses: { 200: { description: 'A page of leaderboard configs', schema: pageOf(leaderboardConfigSchema) } },
    },
    fresh,
    async (req, res) => {
      const { limit, skip } = parse(pagination, req.query);
      const { organisationId } = tenantOf(res);
      const [rows, count] = await Promise.all([
        db
          .selectFrom('leaderboards')
          .selectAll()
          .where('organisation_id', '=', organisationId)
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .limit(limit)
          .offset(skip)
          .execute(),
        db
          .selectFrom('leaderboards')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('organisation_id', '=', organisationId)
          .executeTakeFirstOrThrow(),
      ]);
      const page: Page<LeaderboardConfig> = { totalCount: Number(count.count), edges: rows.map(toConfig) };
      res.json(page);
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/leaderboards/:leaderboardConfigId',
      tag: 'Leaderboards',
      summary: 'Read one leaderboard config',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The leaderboard config', schema: leaderboardConfigSchema } },
    },
    fresh,
    async (req, res) => {
      const { organisationId } = tenantOf(res);
      const row = await db
        .selectFrom('leaderboards')
        .selectAll()
        .where('organisation_id', '=', organisationId)
        .where('id', '=', String(req.params.leaderboardConfigId).toLowerCase())
        .executeTakeFirst();
      if (!row) throw notFound('Leaderboard not found');
      res.json(toConfig(row));
    },
  );

  return router;
}

function toConfig(row: Record<string, any>): LeaderboardConfig {
  return {
    id: row.id,
    organisationId: row.organisation_id,
    name: row.name,
    description: row.description,
    metricType: row.metric_type,
    period: row.period,
    startsAt: iso(row.starts_at)!,
    expiresAt: iso(row.expires_at),
    status: row.status,
    conditions: row.conditions,
    rewardsConfig: row.rewards_config,
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
    createdBy: row.created_by,
    updatedBy: row.updated_by,
  };
}

function iso(value: Date | string | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}
