/**
 * Event store benchmark: appends through the PostgreSQL adapter against a reference measured in the same
 * run, raw PostgreSQL doing the same durable work (one transaction per append, one JSONB row with an
 * id and stream revision, unique keys). Reports throughput, latency percentiles and ratios.
 *
 *   npx tsx bench/event-store.ts
 *   BENCH_APPENDS=5000 BENCH_CONCURRENCY=16 BENCH_ENGINE_EVENTS=5000 npx tsx bench/event-store.ts
 *
 * The engine part logs custom events that each complete a one-action challenge (six facts each) and times
 * the engine's catch-up against raw PostgreSQL writing the same rows in the same batches.
 */
import { randomUUID } from 'node:crypto';
import cliProgress from 'cli-progress';
import pg from 'pg';
import { openPostgres, type Database } from '../infra/database.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { projections } from '../projectors/index.ts';
import type { Consumer } from '../projectors/runtime/index.ts';
import { PROCESS_MANAGER_BATCH, ProjectionRunner, liveGeneration, prepareProjections } from '../projectors/runtime/index.ts';
import { migrate } from '../service.ts';
import { runIfMain, scratchDatabase, silentLogger } from './support.ts';

const appends = Number(process.env.BENCH_APPENDS ?? 3000);
const engaged = Number(process.env.BENCH_ENGINE_EVENTS ?? 2000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8);

/** A consumer of the service's list, by name (the list is what the service runs). */
function consumer(name: string): Consumer {
  const found = projections.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no consumer named ${name} in projectors/index.ts`);
  return found;
}

interface Result {
  name: string;
  ops: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p95: number;
  p99: number;
  /** Statements sent to PostgreSQL per operation, by purpose (engage_database_statements_total); absent for the reference. */
  statementsPerOp?: Record<string, number>;
}

/** Statements by purpose, as `Database.observeStatements` reports them. */
const statements = new Map<string, number>();

async function measure(name: string, total: number, operation: (i: number) => Promise<unknown>): Promise<Result> {
  const before = new Map(statements);
  const bar = new cliProgress.SingleBar(
    { format: `${name.padEnd(34)} {bar} {value}/{total} {eta}s left`, hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0);
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t0 = performance.now();
        await operation(i);
        latencies.push(performance.now() - t0);
        bar.increment();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  bar.stop();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;
  const statementsPerOp = Object.fromEntries(
    [...statements].map(([purpose, count]) => [purpose, Number(((count - (before.get(purpose) ?? 0)) / total).toFixed(3))]).filter(([, perOp]) => perOp !== 0),
  );
  return {
    name,
    ops: total,
    seconds,
    perSecond: total / seconds,
    p50: pct(50),
    p95: pct(95),
    p99: pct(99),
    ...(statements.size > 0 ? { statementsPerOp } : {}),
  };
}

export interface EventStoreResult {
  appends: number;
  concurrency: number;
  reference: Result;
  newStreams: Result;
  hotStreams: Result;
  /** Appends to two new streams at once (the multi-stream path). */
  multiStream: Result;
  projection: { name: string; applied: number; scanned: number; seconds: number; eventsPerSecond: number };
  engine: { engaged: number; facts: number; seconds: number; eventsPerSecond: number; referenceEventsPerSecond: number; ratio: number };
}

export async function benchEventStore(): Promise<EventStoreResult> {
  const scratch = await scratchDatabase('engage_bench_store');
  const database = await openPostgres(scratch.url(), { max: concurrency + 2, applicationName: 'engage-bench' });
  const raw = new pg.Pool({ connectionString: scratch.url('engage-bench-raw'), max: concurrency });
  // A pool emits 'error' for an idle client whose server went away (the drop below): never crash on it.
  raw.on('error', () => undefined);
  const store = new PostgresEventStore(database);
  try {
    statements.clear();
    await migrate(database.db);
    await raw.query(`create table raw_events (
      id bigint generated always as identity primary key, event_id uuid not null unique, stream text not null,
      revision bigint not null, type text not null, data jsonb not null, metadata jsonb not null,
      created_at timestamptz not null default now(), unique (stream, revision))`);
    const organisationId = 'a'.repeat(24);
    const metadata = { organisationId, actor: 'bench' };
    // A real LeaderboardCreated, so the projection does its real work on it.
    const created = (i: number) => ({
      leaderboardId: i.toString(16).padStart(24, '0'),
      organisationId,
      name: 'Weekly XP',
      description: null,
      metricType: 'total-xp',
      period: 'weekly',
      startsAt: '2026-01-05T00:00:00.000Z',
      expiresAt: null,
      status: 'live',
      conditions: [],
      createdBy: 'bench',
      createdAt: new Date().toISOString(),
    });

    const reference = await measure('raw PostgreSQL insert (reference)', appends, (i) =>
      raw.query('insert into raw_events (event_id, stream, revision, type, data, metadata) values ($1, $2, 0, $3, $4, $5)', [
        randomUUID(),
        `leaderboard-${i}`,
        'LeaderboardCreated',
        created(i),
        metadata,
      ]),
    );
    database.observeStatements((purpose) => statements.set(purpose, (statements.get(purpose) ?? 0) + 1));
    const newStreams = await measure('append, new stream (no_stream)', appends, (i) =>
      store.append(`leaderboard-${i}`, [{ type: 'LeaderboardCreated', data: created(i), metadata }], { expectedRevision: 'no_stream' }),
    );
    const hotStreams = await measure('append, existing stream (revision)', appends, async (i) => {
      const stream = `user-${i % 50}`;
      for (;;) {
        const [last] = await store.readStream(stream, { direction: 'backwards', limit: 1 });
        try {
          return await store.append(stream, [{ type: 'PointsEarned', data: { points: 1 }, metadata }], {
            expectedRevision: last ? last.revision : 'no_stream',
          });
        } catch {
          // a concurrent writer won this revision: read again, as a command handler would
        }
      }
    });
    const multiStream = await measure('append, two new streams at once', appends, (i) =>
      store.appendMultiple([
        { stream: `pair-${i}`, events: [{ type: 'PairStarted', data: { i }, metadata }], expectedRevision: 'no_stream' },
        { stream: `pairmate-${i}`, events: [{ type: 'PairJoined', data: { i }, metadata }], expectedRevision: 'no_stream' },
      ]),
    );

    const leaderboards = consumer('leaderboards');
    await prepareProjections(database.db, [leaderboards]);
    const runner = new ProjectionRunner(database, store, [leaderboards], silentLogger, { batchSize: 500 });
    const head = (await store.head())!.position;
    const started = performance.now();
    await runner.start();
    while (((await liveGeneration(database.db, leaderboards.name))?.checkpoint ?? '') < head) await new Promise((r) => setTimeout(r, 20));
    const projectionSeconds = (performance.now() - started) / 1000;
    await runner.stop();
    const projected = await store.countAfter(null);
    const parked = await database.db
      .selectFrom('projection_parked')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .executeTakeFirstOrThrow();
    if (Number(parked.count) > 0) throw new Error(`${parked.count} events were parked: the benchmark's events are not what the projection expects`);

    const engine = await benchEngine(store, database, raw, organisationId);

    const rows = [reference, newStreams, hotStreams, multiStream].map((r) => ({
      benchmark: r.name,
      'ops/s': r.perSecond.toFixed(0),
      'p50 ms': r.p50.toFixed(2),
      'p95 ms': r.p95.toFixed(2),
      'p99 ms': r.p99.toFixed(2),
      'vs reference': (r.perSecond / reference.perSecond).toFixed(2),
      'statements/op': r.statementsPerOp
        ? Object.entries(r.statementsPerOp)
            .map(([purpose, perOp]) => `${purpose} ${perOp}`)
            .join(', ')
        : '1',
    }));
    console.log(`\n${appends} operations each, concurrency ${concurrency}\n`);
    console.table(rows);
    console.log(
      `projection catch-up: ${projected} events scanned (${appends} leaderboards applied) in ${projectionSeconds.toFixed(2)} s = ${(projected / projectionSeconds).toFixed(0)} events/s\n`,
    );
    console.table([
      { benchmark: 'raw PostgreSQL, same rows and batches (reference)', 'events/s': engine.reference.toFixed(0), 'vs reference': '1.00' },
      { benchmark: 'engine: custom events engaged', 'events/s': engine.engine.toFixed(0), 'vs reference': (engine.engine / engine.reference).toFixed(2) },
    ]);
    console.log(`engine: ${engaged} custom events, ${engine.facts} facts appended in ${engine.seconds.toFixed(2)} s\n`);
    return {
      appends,
      concurrency,
      reference,
      newStreams,
      hotStreams,
      multiStream,
      projection: { name: leaderboards.name, applied: appends, scanned: projected, seconds: projectionSeconds, eventsPerSecond: projected / projectionSeconds },
      engine: {
        engaged,
        facts: engine.facts,
        seconds: engine.seconds,
        eventsPerSecond: engine.engine,
        referenceEventsPerSecond: engine.reference,
        ratio: engine.engine / engine.reference,
      },
    };
  } finally {
    await store.close();
    await raw.end().catch(() => undefined);
    await database.close();
    await scratch.drop();
  }
}

/**
 * The engine engaging custom events from the log (one runner, pages of 500, facts appended in the transaction
 * of each slice of `PROCESS_MANAGER_BATCH` events) against raw PostgreSQL doing the same durable work: per
 * event six fact rows and a progress upsert, per slice one transaction and a checkpoint update.
 */
async function benchEngine(store: PostgresEventStore, database: Database, raw: pg.Pool, organisationId: string) {
  const communityId = 'c'.repeat(24);
  const now = new Date().toISOString();
  const details = [
    {
      language: 'en',
      title: 'Visit',
      description: '',
      light: { primaryImageUrl: '', secondaryImageUrl: '' },
      dark: { primaryImageUrl: '', secondaryImageUrl: '' },
    },
  ];
  await store.append(`organisation-${organisationId}`, [
    {
      type: 'OrganisationCreated',
      data: { organisationId, name: 'Bench', slug: 'bench', domain: 'bench.localhost', defaultLanguage: 'en', timezone: 'Europe/Paris', createdAt: now },
    },
  ]);
  await store.append(`challenge-${'d'.repeat(24)}`, [
    {
      type: 'ChallengeCreated',
      data: {
        challengeId: 'd'.repeat(24),
        organisationId,
        communityId,
        details,
        actions: [{ actionId: 'e'.repeat(24), key: 'visit', category: 'participation', criteria: [], xp: 10, isSkippable: false, details, distribution: null }],
        isLinear: false,
        maxCompletionsPerPeriod: 1,
        period: 'open',
        startsAt: '2020-01-01T00:00:00.000Z',
        expiresAt: '2100-01-01T00:00:00.000Z',
        tags: [],
        campaigns: [],
        rewardDistribution: { points: 0, xp: 0, distributionEventId: 'f'.repeat(24), rewardAllocations: [], numberOfRewardsToReceive: 0 },
        isGlobalTemplate: false,
        availableAsTemplateForOrganisations: [],
        featured: false,
        unlockPrice: 0,
        videoConfig: { videoUrl: '', isVideoEnabled: false },
        createdBy: 'bench',
        createdAt: now,
      },
    },
  ]);
  for (let start = 0; start < engaged; start += 500) {
    await store.appendMultiple(
      Array.from({ length: Math.min(500, engaged - start) }, (_, k) => {
        const i = start + k;
        const eventId = (0x10000000 + i).toString(16).padStart(24, '0');
        const data = {
          eventId,
          organisationId,
          communityId,
          userId: i.toString(16).padStart(24, '0'),
          externalUserId: `u${i}`,
          name: 'visit',
          payload: {},
          nonce: null,
          source: { type: 'api', tokenId: 'bench' },
          occurredAt: now,
        };
        return {
          stream: `customevent-${eventId}`,
          events: [{ type: 'CustomEventLogged', data, metadata: { organisationId } }],
          expectedRevision: 'no_stream' as const,
        };
      }),
    );
  }

  const engine = consumer('engagement_engine');
  await prepareProjections(database.db, [engine]);
  const runner = new ProjectionRunner(database, store, [engine], silentLogger, { batchSize: 500 });
  const head = (await store.head())!.position;
  const started = performance.now();
  await runner.start();
  while (((await liveGeneration(database.db, engine.name))?.checkpoint ?? '') < head) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  const facts = Number((await raw.query(`select count(*) from es_events where stream_name like 'engagement-%'`)).rows[0].count);
  if (facts !== engaged * 6) throw new Error(`the engine appended ${facts} facts, not ${engaged * 6}`);

  await raw.query('create table raw_progress (user_id text, challenge_id text, state jsonb, primary key (user_id, challenge_id))');
  await raw.query('create table raw_checkpoint (name text primary key, position bigint)');
  await raw.query(`insert into raw_checkpoint values ('engine', 0)`);
  const referenceStarted = performance.now();
  for (let start = 0; start < engaged; start += PROCESS_MANAGER_BATCH) {
    const client = await raw.connect();
    try {
      await client.query('begin');
      await client.query('update raw_checkpoint set position = $1 where name = $2', [start, 'engine']);
      for (let i = start; i < Math.min(engaged, start + PROCESS_MANAGER_BATCH); i++) {
        const values = Array.from({ length: 6 }, (_, k) => `($${k * 3 + 1}, $${k * 3 + 2}, $${k * 3 + 3}, 'Fact', '{"userId":"u"}', '{}')`).join(', ');
        const parameters = Array.from({ length: 6 }, (_, k) => [randomUUID(), `engagement-${i}`, k]).flat();
        await client.query(`insert into raw_events (event_id, stream, revision, type, data, metadata) values ${values}`, parameters);
        await client.query('insert into raw_progress values ($1, $2, $3) on conflict (user_id, challenge_id) do update set state = excluded.state', [
          `u${i}`,
          'c',
          '{"run":1}',
        ]);
      }
      await client.query('commit');
    } finally {
      client.release();
    }
  }
  const referenceSeconds = (performance.now() - referenceStarted) / 1000;
  return { engine: engaged / seconds, reference: engaged / referenceSeconds, seconds, facts };
}

runIfMain(import.meta.url, benchEventStore);
