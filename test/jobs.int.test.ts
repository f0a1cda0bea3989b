import { Redis } from 'ioredis';
import { Migrator } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bullmqJobRunner, inProcessJobRunner, jobMigrations, scheduleJob, type JobHandler, type JobRunner } from '../infra/jobs.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';
import { waitUntil } from './support/projections.ts';

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function reachableRedis(): Promise<Redis | null> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: null, connectTimeout: 2000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return redis;
  } catch (error) {
    redis.disconnect();
    if (process.env.REQUIRE_SERVICES === '1') throw new Error(`Redis is required (REQUIRE_SERVICES=1) but unreachable at ${redisUrl}: ${String(error)}`);
    console.warn(`[test] Redis unreachable at ${redisUrl}; the BullMQ runner suite does not run`);
    return null;
  }
}

/** A clock the test moves; effects are counted per job id, as a handler's idempotent effect would be keyed. */
function harness() {
  let now = new Date('2026-03-01T12:00:00Z');
  const effects = new Map<string, number>();
  let failuresLeft = 0;
  const handlers: Record<string, JobHandler> = {
    'count-effect': async (payload: { key: string }) => {
      if (failuresLeft > 0) {
        failuresLeft--;
        throw new Error('transient failure');
      }
      effects.set(payload.key, (effects.get(payload.key) ?? 0) + 1);
    },
  };
  return {
    handlers,
    effects,
    clock: () => now,
    advance: (ms: number) => (now = new Date(now.getTime() + ms)),
    failNext: (count: number) => (failuresLeft = count),
  };
}

const queueName = `test-jobs-${process.pid}-${Date.now()}`;

const suites: [string, (db: TestDatabase, h: ReturnType<typeof harness>, redis: Redis | null) => JobRunner][] = [
  [
    'in-process (embedded mode)',
    (test, h) => inProcessJobRunner(test.database.db, h.handlers, logger, { now: h.clock, backoffMs: 1000, maxAttempts: 3, pollMs: 50 }),
  ],
  [
    'BullMQ on Redis (server mode)',
    (test, h, redis) => bullmqJobRunner(test.database.db, redis!, h.handlers, logger, { now: h.clock, backoffMs: 1000, maxAttempts: 3, pollMs: 50, queueName }),
  ],
];

const redis = await reachableRedis();

describe.each(suites)('jobs: %s', (name, makeRunner) => {
  const needsRedis = name.startsWith('BullMQ');
  let test: TestDatabase;
  let h: ReturnType<typeof harness>;
  let runner: JobRunner;

  beforeAll(async () => {
    if (needsRedis && !redis) return;
    test = await freshDatabase();
    const migrator = new Migrator({
      db: test.database.db,
      provider: { getMigrations: async () => jobMigrations },
      migrationTableName: 'job_migrations',
      migrationLockTableName: 'job_migrations_lock',
    });
    const { error } = await migrator.migrateToLatest();
    if (error) throw error;
    h = harness();
    runner = makeRunner(test, h, redis);
  });
  afterAll(async () => {
    if (needsRedis && !redis) return;
    await runner.stop();
    await test.drop();
  });

  it.runIf(!needsRedis || redis)('runs a job when it is due, once, however often it is scheduled', async () => {
    await scheduleJob(test.database.db, { id: 'job:1', kind: 'count-effect', payload: { key: 'a' }, dueAt: new Date(h.clock().getTime() + 60_000) });
    await scheduleJob(test.database.db, { id: 'job:1', kind: 'count-effect', payload: { key: 'a' }, dueAt: h.clock() });
    expect(await runner.runDue()).toBe(0);
    h.advance(60_000);
    expect(await runner.runDue()).toBe(1);
    expect(await runner.runDue()).toBe(0);
    expect(h.effects.get('a')).toBe(1);
    const row = await test.database.db.selectFrom('scheduled_jobs').selectAll().where('id', '=', 'job:1').executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'done', attempts: 1, last_error: null });
  });

  it.runIf(!needsRedis || redis)('retries a failing job with backoff, then marks it failed for good', async () => {
    h.failNext(1);
    await scheduleJob(test.database.db, { id: 'job-2', kind: 'count-effect', payload: { key: 'b' }, dueAt: h.clock() });
    await runner.runDue();
    expect(h.effects.get('b')).toBeUndefined();
    h.advance(1000);
    await runner.runDue();
    expect(h.effects.get('b')).toBe(1);

    h.failNext(10);
    await scheduleJob(test.database.db, { id: 'job-3', kind: 'count-effect', payload: { key: 'c' }, dueAt: h.clock() });
    for (let i = 1; i <= 3; i++) {
      await runner.runDue();
      h.advance(1000 * i);
    }
    const row = await test.database.db.selectFrom('scheduled_jobs').selectAll().where('id', '=', 'job-3').executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'failed', attempts: 3, last_error: 'transient failure' });
    h.failNext(0);
  });

  it.runIf(!needsRedis || redis)('two runners racing never run one job twice', async () => {
    const other = makeRunner(test, h, redis);
    for (let i = 0; i < 30; i++)
      await scheduleJob(test.database.db, { id: `race-${i}`, kind: 'count-effect', payload: { key: `race-${i}` }, dueAt: h.clock() });
    await Promise.all([runner.runDue(), other.runDue(), runner.runDue()]);
    await other.stop();
    for (let i = 0; i < 30; i++) expect(h.effects.get(`race-${i}`)).toBe(1);
  });

  it.runIf(!needsRedis || redis)('delivers due work on its own once started (and, with Redis, after Redis lost its data)', async () => {
    if (redis) {
      // Redis loses everything this queue had; the durable record in PostgreSQL refills it.
      const keys = await redis.keys(`bull:${queueName}:*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    await scheduleJob(test.database.db, { id: 'job-live', kind: 'count-effect', payload: { key: 'live' }, dueAt: h.clock() });
    await runner.start();
    await waitUntil(() => h.effects.get('live') === 1, 20_000, 'the started runner to run the job');
  });
});

afterAll(() => redis?.disconnect());
