import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../infra/config.ts';
import { planFor, type Role } from '../infra/roles.ts';
import { openService } from '../service.ts';
import { asTenant, startTestService, type Tenant, type TestService } from './support/service.ts';
import { adminUrl } from './support/databases.ts';

/**
 * The service as a deployment sees it: a transaction left open anywhere else on the server does not stall
 * read-your-writes; processes start and stop while clients write and read, without a 5xx or a failed start;
 * a process holds at most its pool plus two connections, whatever the number of projections.
 */

const leaderboard = (name: string) => ({
  name,
  description: 'Most XP this week',
  metricType: 'total-xp',
  startsAt: '2026-01-05T00:00:00Z',
  status: 'draft',
  period: 'weekly',
  conditions: [],
});

describe('the service under load', () => {
  let t: TestService;
  let acme: Tenant;
  const databaseName = () => new URL(t.service.config.databaseUrl!).pathname.slice(1);

  beforeAll(async () => {
    t = await startTestService({ jobs: false, env: { DATABASE_POOL_SIZE: '6', READ_YOUR_WRITES_TIMEOUT_MS: '30000' } });
    acme = await t.createOrganisation('acme');
  });
  afterAll(async () => {
    await t.close();
  });

  it('answers read-your-writes while unrelated transactions stay open: in another database, and in this one outside the event store', async () => {
    const other = `engage_test_${randomBytes(5).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl() });
    await admin.connect();
    await admin.query(`create database ${other}`);
    const elsewhere = new pg.Client({ connectionString: Object.assign(new URL(adminUrl()), { pathname: `/${other}` }).toString() });
    const here = new pg.Client({ connectionString: t.service.config.databaseUrl! });
    try {
      await elsewhere.connect();
      await here.connect();
      // Two writing transactions, left open: the server-wide oldest transaction is now theirs.
      await elsewhere.query('begin');
      await elsewhere.query('create table held (id int)');
      await elsewhere.query('insert into held values (1)');
      await here.query('begin');
      await here.query('create table held_here (id int)');
      await here.query('insert into held_here values (1)');

      for (let n = 0; n < 3; n++) {
        const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...asTenant(acme), body: leaderboard(`Held ${n}`) });
        expect(created.status).toBe(200);
        const position = created.headers['x-event-position'] as string;
        const read = await t.request('GET', `/api/v2/admin/leaderboards/${created.body.id}`, asTenant(acme, { 'x-min-position': position }));
        expect(read.status).toBe(200);
        expect(read.body.name).toBe(`Held ${n}`);
      }
    } finally {
      await elsewhere.query('rollback').catch(() => undefined);
      await here.query('rollback').catch(() => undefined);
      await elsewhere.end();
      await here.end();
      await admin.query(`drop database if exists ${other} with (force)`);
      await admin.end();
    }
  });

  it('starts and stops every role 15 times while 8 clients write and read: no 5xx, no failed start, and the processes keep within their connection budget', async () => {
    const roles: Role[] = ['all', 'projectors', 'query-api', 'command-api', 'worker'];
    const statuses = new Map<number, number>();
    const failures: unknown[] = [];
    let running = true;
    const clients = Array.from({ length: 8 }, async (_, client) => {
      for (let n = 0; running; n++) {
        const created = await t.request('POST', '/api/v2/admin/leaderboards', { ...asTenant(acme), body: leaderboard(`Load ${client}-${n}`) });
        statuses.set(created.status, (statuses.get(created.status) ?? 0) + 1);
        const position = created.headers['x-event-position'] as string | undefined;
        const listed = await t.request('GET', '/api/v2/admin/leaderboards?limit=5', asTenant(acme, position ? { 'x-min-position': position } : {}));
        statuses.set(listed.status, (statuses.get(listed.status) ?? 0) + 1);
      }
    });

    // Connections per process, watched from outside while everything runs.
    const watcher = new pg.Client({ connectionString: adminUrl() });
    await watcher.connect();
    let mostPerProcess = 0;
    const watching = (async () => {
      while (running) {
        const rows = await watcher.query<{ count: string }>(
          `select count(*) as count from pg_stat_activity where datname = $1 and application_name like 'engage-start-%' group by split_part(application_name, ':', 1)`,
          [databaseName()],
        );
        for (const row of rows.rows) mostPerProcess = Math.max(mostPerProcess, Number(row.count));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();

    for (let start = 0; start < 15; start++) {
      const role = roles[start % roles.length]!;
      const config = loadConfig({
        DATABASE_URL: t.service.config.databaseUrl!,
        ROLE: role,
        LOG_LEVEL: 'silent',
        DATABASE_POOL_SIZE: '4',
        APPLICATION_NAME: `engage-start-${start}`,
      });
      try {
        const service = await openService(config, pino({ level: 'silent' }), { ...planFor(role), jobs: false, runtime: { scanIntervalMs: 100 } });
        await new Promise((resolve) => setTimeout(resolve, 150));
        await service.close();
      } catch (error) {
        failures.push(error);
      }
    }
    running = false;
    await Promise.all(clients);
    await watching;
    await watcher.end();

    expect(failures).toEqual([]);
    const serverErrors = [...statuses].filter(([status]) => status >= 500);
    expect(serverErrors).toEqual([]);
    expect(statuses.get(200)).toBeGreaterThan(0);
    // Pool (4) + LISTEN + control, whatever the number of projections.
    expect(mostPerProcess).toBeGreaterThan(0);
    expect(mostPerProcess).toBeLessThanOrEqual(4 + 2);
  });
});
