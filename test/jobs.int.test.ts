import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { Migrator } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
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

async function migratedDatabase(): Promise<TestDatabase> {
  const test = await freshDatabase();
  const migrator = new Migrator({
    db: test.database.db,
    provider: { getMigrations: async () => jobMigrations },
    migrationTableName: 'job_migrations',
    migrationLockTableName: 'job_migrations_lock',
  });
  const { error } = await migrator.migrateToLatest();
  if (error) throw error;
  return test;
}

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
    test = await migratedDatabase();
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

/**
 * A worker whose claim lapsed while its handler ran is not the job's holder any more: whoever took the job
 * over records its outcome, and the late one's failure undoes nothing (embedded and server mode share this).
 */
describe('jobs: a claim that lapsed while its handler ran', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await migratedDatabase();
  });
  afterAll(async () => {
    await test.drop();
  });

  it('keeps the outcome of the worker that took the job over when the late one fails', async () => {
    let now = new Date('2026-03-01T12:00:00Z');
    let calls = 0;
    let failLate: (error: Error) => void = () => undefined;
    const handlers: Record<string, JobHandler> = {
      // The first run hangs until the test fails it; the second, the take-over, succeeds at once.
      'slow-first': async () => {
        if (++calls === 1) await new Promise<void>((_resolve, reject) => (failLate = reject));
      },
    };
    const options = { now: () => now, claimMs: 1000, maxAttempts: 1 };
    const late = inProcessJobRunner(test.database.db, handlers, logger, options);
    const other = inProcessJobRunner(test.database.db, handlers, logger, options);
    await scheduleJob(test.database.db, { id: 'lapsing', kind: 'slow-first', payload: {}, dueAt: now });

    const lateRun = late.runDue();
    await waitUntil(() => calls === 1, 20_000, 'the first run to start');
    now = new Date(now.getTime() + 2000);
    expect(await other.runDue()).toBe(1);
    failLate(new Error('late failure'));
    await lateRun;

    const row = await test.database.db.selectFrom('scheduled_jobs').selectAll().where('id', '=', 'lapsing').executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'done', attempts: 1, last_error: null });
    expect(calls).toBe(2);
  });
});

/**
 * Server mode: a BullMQ copy of a row can be spent without the row ever being claimed (the worker that took
 * it died before claiming, or its claim failed). The durable row is handed over again once it has waited a
 * claim's length, instead of waiting on BullMQ's stalled checks (a locked copy) or forever (a failed one).
 */
describe.runIf(redis)('jobs: a BullMQ copy spent before its row was claimed', () => {
  const handOverQueue = `test-jobs-handover-${process.pid}-${Date.now()}`;
  const claimMs = 60_000;
  let test: TestDatabase;
  let h: ReturnType<typeof harness>;
  let deadWorker: Worker;

  beforeAll(async () => {
    test = await migratedDatabase();
    h = harness();
    // Takes copies by hand and never finishes them, as a worker killed right after taking one; its lock
    // outlasts the test, so BullMQ's own stalled checks never hand them on meanwhile.
    deadWorker = new Worker(handOverQueue, null, { connection: redis!.duplicate(), lockDuration: 10 * 60_000, autorun: false });
  });
  afterAll(async () => {
    await deadWorker.close(true);
    await deadWorker.disconnect();
    const keys = await redis!.keys(`bull:${handOverQueue}:*`);
    if (keys.length > 0) await redis!.del(...keys);
    await test.drop();
  });

  it.each([
    ['the worker that took it died before claiming its row', async () => undefined],
    ['the claim of the worker that took it failed', async (job: Job, token: string) => void (await job.moveToFailed(new Error('claim failed'), token))],
  ])('runs the row when %s', async (name, spend) => {
    const key = name.includes('died') ? 'died' : 'failed';
    const runner = bullmqJobRunner(test.database.db, redis!, h.handlers, logger, { now: h.clock, pollMs: 50, claimMs, queueName: handOverQueue });
    onTestFinished(() => runner.stop());
    // Due a moment after the test's clock: runDue feeds its copy to BullMQ, and cannot run the row itself yet.
    await scheduleJob(test.database.db, { id: `spent-${key}`, kind: 'count-effect', payload: { key }, dueAt: new Date(h.clock().getTime() + 1) });
    await runner.runDue();
    expect(h.effects.get(key)).toBeUndefined();
    const token = `dead-${key}`;
    let taken: Job | undefined;
    await waitUntil(async () => (taken = await deadWorker.getNextJob(token, { block: false })) !== undefined, 20_000, 'the dead worker to take the copy');
    expect(taken!.data).toEqual({ id: `spent-${key}` });
    await spend(taken!, token);

    // The row has now waited a claim's length for a claim.
    h.advance(1 + claimMs);
    await runner.start();
    // The handler's effect comes before the row is marked done: wait for the row, then check the effect ran once.
    const finished = async () =>
      (await test.database.db.selectFrom('scheduled_jobs').select('status').where('id', '=', `spent-${key}`).executeTakeFirstOrThrow()).status === 'done';
    await waitUntil(finished, 20_000, 'the row to be handed over again and run');
    const row = await test.database.db.selectFrom('scheduled_jobs').selectAll().where('id', '=', `spent-${key}`).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'done', attempts: 1 });
    expect(h.effects.get(key)).toBe(1);
  });
});

afterAll(() => redis?.disconnect());
