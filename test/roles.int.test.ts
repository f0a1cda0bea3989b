import type { Server } from 'node:http';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../infra/config.ts';
import { planFor, type Role } from '../infra/roles.ts';
import { openService, type Service } from '../service.ts';
import { freshDatabase } from './support/databases.ts';
import { httpClient } from './support/http.ts';
import { waitUntil } from './support/projections.ts';

/**
 * The process roles on one fresh PostgreSQL database, started at the same moment as a deployment starts
 * them: they take turns at the migrations, the API roles serve the API, the others only health and metrics,
 * and readiness fails while a projection lags.
 */
const test = await freshDatabase();

describe('process roles', () => {
  const roles: Role[] = ['query-api', 'projectors', 'worker'];
  const services = new Map<Role, Service>();
  const listeners: Server[] = [];
  const request = new Map<Role, ReturnType<typeof httpClient>>();

  beforeAll(async () => {
    await test.database.close();
    const opened = await Promise.all(
      roles.map((role) => {
        const config = loadConfig({ DATABASE_URL: test.url, ROLE: role, READY_MAX_LAG_SECONDS: '60', LOG_LEVEL: 'silent' });
        return openService(config, pino({ level: 'silent' }), { ...planFor(role), runtime: { scanIntervalMs: 100 } });
      }),
    );
    for (const [i, role] of roles.entries()) {
      const service = opened[i]!;
      services.set(role, service);
      const listener = service.app.listen(0, '127.0.0.1');
      await new Promise((resolve) => listener.once('listening', resolve));
      listeners.push(listener);
      request.set(role, httpClient(listener));
    }
  });
  afterAll(async () => {
    await Promise.all(listeners.map((listener) => new Promise((resolve) => listener.close(resolve))));
    await Promise.all([...services.values()].map((service) => service.close()));
    await test.drop();
  });

  it('start together on a fresh database (migrations and read-model schemas in turn)', async () => {
    expect(services.size).toBe(3);
    const db = services.get('worker')!.database.db;
    const live = await db.selectFrom('projection_generations').select(['name', 'generation']).where('status', '=', 'live').execute();
    expect(live.length).toBeGreaterThan(0);
    expect(live.every((row) => row.generation === 1)).toBe(true);
  });

  it('serve the API from the API roles, only health and metrics from the others', async () => {
    for (const role of roles) {
      const call = request.get(role)!;
      expect((await call('GET', '/healthz')).body).toEqual({ status: 'ok' });
      expect((await call('GET', '/metrics')).text).toContain('engage_http_request_duration_seconds');
      const api = await call('GET', '/api/v2/admin/leaderboards');
      if (planFor(role).http === 'api') expect(api.body).toMatchObject({ code: 'UNAUTHORIZED' });
      else expect(api.body).toEqual({ message: 'No route for GET /api/v2/admin/leaderboards', code: 'NOT_FOUND' });
    }
  });

  it('are not ready while a live projection is further behind than READY_MAX_LAG_SECONDS', async () => {
    const call = request.get('query-api')!;
    expect((await call('GET', '/readyz')).body).toMatchObject({ status: 'ready', checks: { postgres: 'ok', eventStore: 'ok', projections: 'ok' } });

    // The projector process is gone, and an event waits for it since two hours.
    await services.get('projectors')!.runner.stop();
    const store = services.get('query-api')!.store;
    const appended = await store.append('organisation-00000000000000000000abcd', [{ type: 'SomethingOld', data: {} }]);
    await sql`update es_events set created_at = now() - interval '2 hours' where stream_name = ${appended.stream}`.execute(
      services.get('query-api')!.database.db,
    );
    // Readers see it once no older transaction runs on the server (other suites share it).
    await waitUntil(async () => (await store.head())?.position === appended.position, 20_000, 'the event to be visible');
    const late = await call('GET', '/readyz');
    expect(late.status).toBe(503);
    expect(late.body.status).toBe('not ready');
    expect(late.body.checks.projections).toMatch(/^down: behind by more than 60s: .*organisations \(7\d{3}s\)/);
  });
});
