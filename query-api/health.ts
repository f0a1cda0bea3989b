import { Router, type Express } from 'express';
import { sql, type Kysely } from 'kysely';
import type { Redis } from 'ioredis';
import type { ServiceContext } from '../api/context.ts';
import type { EventStore } from '../infra/event-store/port.ts';
import { errorHandler, unknownRoute } from '../infra/http/errors.ts';
import { createHttpApp } from '../infra/http/plumbing.ts';
import { JOB_STATES, jobCounts } from '../infra/job-status.ts';
import type { Logger } from '../infra/logging.ts';
import type { Metrics } from '../infra/metrics.ts';
import { liveLag } from '../projectors/maintenance.ts';
import { projectionStatus } from '../projectors/runtime/index.ts';
import { settleWithin, withTableTypes, type UntypedDb } from '../infra/database.ts';

/** Every path `healthRoutes` answers, as the router matches them (any case, a trailing slash or not). */
export const HEALTH_PATHS = /^\/(?:healthz|readyz|metrics)\/?$/i;

/**
 * `/healthz`: the process answers. `/readyz`: every backing store answers too, and no live projection is
 * further behind than READY_MAX_LAG_SECONDS (503 naming what is not ready); each check answers within
 * READY_CHECK_TIMEOUT_MS or counts as down, so a hung store makes it a 503, never a hang. `redis` is a
 * connection that fails fast (`openRedisProbe`), not the job queue's. `/metrics`: Prometheus.
 */
export function healthRoutes(ctx: ServiceContext, redis: Redis | null, metrics?: Metrics): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const results = await readiness(ctx, redis);
    const ready = results.every(([, result]) => result === 'ok');
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks: Object.fromEntries(results) });
  });
  if (metrics) {
    router.get('/metrics', async (_req, res) => {
      await Promise.all([
        collectGauges(metrics, ctx.database.db, ctx.store, ctx.clock.now(), ctx.logger),
        // The same checks as /readyz, so an alert can tell a process that is up but not ready.
        readiness(ctx, redis).then((results) => {
          metrics.ready.reset();
          for (const [check, result] of results) metrics.ready.set({ check }, result === 'ok' ? 1 : 0);
        }),
      ]);
      res.set('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
    });
  }
  return router;
}

/** Each readiness check by name: `ok`, or `down: <why>`; each answers within READY_CHECK_TIMEOUT_MS or counts as down. */
async function readiness(ctx: ServiceContext, redis: Redis | null): Promise<(readonly [string, string])[]> {
  const checks: Record<string, () => Promise<unknown>> = {
    postgres: () => sql`select 1`.execute(ctx.database.db),
    eventStore: () => ctx.store.head(),
    ...(redis ? { redis: () => (redis.status === 'ready' ? redis.ping() : Promise.reject(new Error(`not connected (${redis.status})`))) } : {}),
    ...(ctx.config.readyMaxLagSeconds > 0 ? { projections: () => projectionsWithinLag(ctx.database.db, ctx.store, ctx.config.readyMaxLagSeconds) } : {}),
  };
  return Promise.all(
    Object.entries(checks).map(
      async ([name, check]) =>
        [
          name,
          await settleWithin(check(), ctx.config.readyCheckTimeoutMs, () => new Error(`no answer within ${ctx.config.readyCheckTimeoutMs} ms`)).then(
            () => 'ok',
            (error: Error) => `down: ${error.message}`,
          ),
        ] as const,
    ),
  );
}

/** The HTTP app of the roles that serve no API (projectors, worker): health, readiness and metrics only. */
export function operationsApp(ctx: ServiceContext, redis: Redis | null, metrics: Metrics): Express {
  const app = createHttpApp(ctx.logger, ctx.config.bodyLimit, metrics, ctx.config.logRequests);
  app.use(healthRoutes(ctx, redis, metrics));
  app.use(unknownRoute);
  app.use(errorHandler);
  return app;
}

async function projectionsWithinLag(db: UntypedDb, store: EventStore, maxSeconds: number): Promise<void> {
  const late = (await liveLag(db, store)).filter((row) => row.secondsBehind > maxSeconds);
  if (late.length > 0) {
    throw new Error(`behind by more than ${maxSeconds}s: ${late.map((row) => `${row.name} (${Math.round(row.secondsBehind)}s)`).join(', ')}`);
  }
}

/** Reads the projection and job gauges from the database; a source that fails leaves its gauges empty. */
async function collectGauges(metrics: Metrics, db: UntypedDb, store: EventStore, now: Date, logger?: Logger): Promise<void> {
  await Promise.all([
    projectionStatus(db, store).then(
      (rows) => {
        for (const gauge of [metrics.projectionEventsBehind, metrics.projectionSecondsBehind, metrics.projectionParked]) gauge.reset();
        for (const row of rows) {
          const labels = { projection: row.name, status: row.status };
          metrics.projectionEventsBehind.set(labels, row.eventsBehind);
          metrics.projectionSecondsBehind.set(labels, row.secondsBehind);
          metrics.projectionParked.set(labels, row.parked);
        }
      },
      (error) => {
        for (const gauge of [metrics.projectionEventsBehind, metrics.projectionSecondsBehind, metrics.projectionParked]) gauge.reset();
        metrics.scrapeErrors.inc({ source: 'projections' });
        logger?.warn({ err: error }, 'metrics: projection status unavailable');
      },
    ),
    Promise.all([jobCounts(withTableTypes(db), now), oldestDueSeconds(withTableTypes(db), now)]).then(
      ([counts, oldest]) => {
        metrics.jobs.reset();
        metrics.jobsRetrying.reset();
        for (const row of counts) {
          for (const state of JOB_STATES) metrics.jobs.set({ kind: row.kind, state }, row[state]);
          metrics.jobsRetrying.set({ kind: row.kind }, row.retrying);
        }
        metrics.jobOldestDueSeconds.set(oldest);
      },
      (error) => {
        metrics.jobs.reset();
        metrics.jobsRetrying.reset();
        metrics.scrapeErrors.inc({ source: 'jobs' });
        logger?.warn({ err: error }, 'metrics: job counts unavailable');
      },
    ),
  ]);
}

/** The columns of the jobs' durable record (infra/jobs.ts) read here. */
interface DueWorkTables {
  scheduled_jobs: { status: string; due_at: Date };
}

async function oldestDueSeconds(db: Kysely<DueWorkTables>, now: Date): Promise<number> {
  const row = await db
    .selectFrom('scheduled_jobs')
    .select((eb) => eb.fn.min('due_at').as('due_at'))
    .where('status', '=', 'pending')
    .where('due_at', '<=', now)
    .executeTakeFirst();
  return row?.due_at ? Math.max(0, (now.getTime() - new Date(row.due_at).getTime()) / 1000) : 0;
}
