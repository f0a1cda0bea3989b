import { Router } from 'express';
import type { LeaderboardConfig } from '../domain/leaderboard.ts';
import { tenantOf } from '../infra/auth.ts';
import { notFound } from '../infra/http/errors.ts';
import { pagination, type Page } from '../infra/http/pagination.ts';
import { parse, readYourWrites } from '../infra/http/request-context.ts';
import type { ServiceContext } from '../command-api/context.ts';

export function leaderboardQueries(ctx: ServiceContext): Router {
  const router = Router();
  const db = ctx.database.db;
  const fresh = readYourWrites(db, ['leaderboards'], ctx.config.readYourWritesTimeoutMs);

  router.get('/leaderboards', fresh, async (req, res) => {
    const { limit, skip } = parse(pagination, req.query);
    const { organisationId } = tenantOf(res);
    const [rows, count] = await Promise.all([
      db.selectFrom('leaderboards').selectAll().where('organisation_id', '=', organisationId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(skip).execute(),
      db.selectFrom('leaderboards').select((eb) => eb.fn.countAll<string>().as('count')).where('organisation_id', '=', organisationId).executeTakeFirstOrThrow(),
    ]);
    const page: Page<LeaderboardConfig> = { totalCount: Number(count.count), edges: rows.map(toConfig) };
    res.json(page);
  });

  router.get('/leaderboards/:leaderboardConfigId', fresh, async (req, res) => {
    const { organisationId } = tenantOf(res);
    const row = await db
      .selectFrom('leaderboards')
      .selectAll()
      .where('organisation_id', '=', organisationId)
      .where('id', '=', String(req.params.leaderboardConfigId).toLowerCase())
      .executeTakeFirst();
    if (!row) throw notFound('Leaderboard not found');
    res.json(toConfig(row));
  });

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
