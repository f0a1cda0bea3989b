import { Router } from 'express';
import { sql } from 'kysely';
import type { Redis } from 'ioredis';
import type { ServiceContext } from '../command-api/context.ts';

/** `/healthz`: the process answers. `/readyz`: every backing store answers too (503 naming the ones that do not). */
export function healthRoutes(ctx: ServiceContext, redis: Redis | null): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const checks: Record<string, () => Promise<unknown>> = {
      postgres: () => sql`select 1`.execute(ctx.database.db),
      eventStore: () => ctx.store.head(),
      ...(redis ? { redis: () => redis.ping() } : {}),
    };
    const results = await Promise.all(
      Object.entries(checks).map(
        async ([name, check]) =>
          [
            name,
            await check().then(
              () => 'ok',
              (error: Error) => `down: ${error.message}`,
            ),
          ] as const,
      ),
    );
    const ready = results.every(([, result]) => result === 'ok');
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks: Object.fromEntries(results) });
  });
  return router;
}
