import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { freshDatabase } from './support/databases.ts';
import { httpClientOn } from './support/http.ts';
import { startOtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.ts';
import { waitUntil } from './support/projections.ts';

const PLATFORM_DOMAIN = 'engage.test';
const SERVER_KIND = 2;

/**
 * Tracing as an operator switches it on: the real processes of a server deployment (`node --import tsx main.ts`,
 * ESM; command-api, projectors and worker) with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP receiver of
 * the test's own (JSON protocol). Each process starts the SDK before it imports express, pg and ioredis, so their
 * auto-instrumentation works under ESM; the trace context travels in the events' metadata and the jobs' rows, so
 * one trace follows a request through its append, the projector batches, the engine's appends and the jobs they
 * schedule, from process to process.
 */
const test = await freshDatabase();

describe('tracing with OpenTelemetry', () => {
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  const processes = new Map<string, { child: ChildProcess; log: () => string }>();
  let request: ReturnType<typeof httpClientOn>;
  let tenant: { organisationId: string; domain: string; token: string };
  const dataDir = mkdtempSync(join(tmpdir(), 'engage-tracing-'));
  const environment = () => ({
    ...process.env,
    DATA_DIR: dataDir,
    DATABASE_URL: test.url,
    REDIS_URL: process.env.TEST_REDIS_URL ?? '',
    PLATFORM_DOMAIN,
    USER_TOKEN_SECRET: 'a-secret-of-at-least-thirty-two-characters',
    LOG_LEVEL: 'info',
  });

  /** Starts one role's process, traced, and resolves with its port once it listens. */
  const startRole = async (role: string): Promise<number> => {
    let log = '';
    const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts', `--role=${role}`], {
      env: {
        ...environment(),
        PORT: '0',
        HOST: '127.0.0.1',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (log += chunk.toString()));
    processes.set(role, { child, log: () => log });
    await waitUntil(
      () => {
        if (child.exitCode !== null) throw new Error(`${role} exited (${child.exitCode}):\n${log}`);
        return log.includes('engage listening');
      },
      60_000,
      `${role} to start`,
    );
    return (JSON.parse(log.split('\n').find((line) => line.includes('engage listening'))!) as { port: number }).port;
  };
  const stopRole = async (role: string) => {
    const { child } = processes.get(role)!;
    processes.delete(role);
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  };

  const post = async (path: string, body: unknown) => {
    const response = await request('POST', `/api/v2/admin${path}`, { host: tenant.domain, headers: { 'x-api-token': tenant.token }, body });
    expect([200, 201], `${path}: ${response.text}`).toContain(response.status);
    return response.body;
  };
  const isUnder = (span: ReceivedSpan, ancestor: ReceivedSpan): boolean => {
    const byId = new Map(receiver.trace(span.traceId).map((s) => [s.spanId, s]));
    for (let at = byId.get(span.parentSpanId); at; at = byId.get(at.parentSpanId)) if (at.spanId === ancestor.spanId) return true;
    return false;
  };
  /** The request span of the one request of the test whose route and body match. */
  const requestSpan = async (name: string, where: (span: ReceivedSpan) => boolean = () => true) => {
    const matches = (span: ReceivedSpan) => span.name === name && span.kind === SERVER_KIND && where(span);
    await waitUntil(() => receiver.spans.some(matches), 30_000, `the span ${name}`);
    return receiver.spans.find(matches)!;
  };
  /** The first span named so in `parent`'s trace: its child, or (`anyDepth`) any descendant. */
  const waitForSpan = async (parent: ReceivedSpan, name: string, options: { anyDepth?: boolean; where?: (span: ReceivedSpan) => boolean } = {}) => {
    const matches = (span: ReceivedSpan) =>
      span.name === name && (options.anyDepth ? isUnder(span, parent) : span.parentSpanId === parent.spanId) && (options.where?.(span) ?? true);
    await waitUntil(() => receiver.trace(parent.traceId).some(matches), 30_000, `${name} under ${parent.name}`);
    return receiver.trace(parent.traceId).find(matches)!;
  };
  const appendOf = (root: ReceivedSpan, category: string) =>
    waitForSpan(root, 'engage.append', {
      anyDepth: true,
      where: (span) => (span.attributes['engage.streams'] as string[]).some((s) => s.startsWith(`${category}-`)),
    });

  let communityId: string;
  const images = { primaryImageUrl: '', secondaryImageUrl: '' };
  const details = { en: { title: 'Run', description: 'Run', light: images, dark: images } };

  beforeAll(async () => {
    await test.database.close();
    receiver = await startOtlpReceiver();
    // The CLI is not traced: its events carry no trace context.
    const cli = spawnSync(process.execPath, ['--import', 'tsx', 'cli/engage.ts', 'org', 'create', '--name', 'Traced', '--slug', 'traced', '--json'], {
      env: environment(),
      encoding: 'utf8',
    });
    expect(cli.status, cli.stderr).toBe(0);
    tenant = JSON.parse(cli.stdout);
    const [port] = await Promise.all([startRole('command-api'), startRole('projectors'), startRole('worker')]);
    request = httpClientOn(port);
    // The organisation was written by the CLI: the API knows its token once the projectors have it.
    await waitUntil(
      async () => (await request('GET', '/api/v2/admin/communities', { host: tenant.domain, headers: { 'x-api-token': tenant.token } })).status === 200,
    );
    communityId = (await post('/communities', { name: 'Runners' })).id as string;
    await post('/challenges', {
      communityId,
      details,
      isLinear: false,
      startsAt: new Date(Date.now() - 60_000).toISOString(),
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      actions: [{ key: 'ran-5k', category: 'participation', criteria: [], xp: 10, isSkippable: false, details }],
      rewardDistribution: { points: 50, xp: 5, rewardAllocations: [], numberOfRewardsToReceive: 0 },
    });
    // Every consumer has taken the set-up's events, as on a quiet system: a batch that waited for its turn takes
    // the pages read meanwhile with it and is the child of its first event's trace, so the engine's next batch
    // would otherwise belong to the set-up's requests and only link the first test's.
    const client = new pg.Client({ connectionString: test.url });
    await client.connect();
    try {
      await waitUntil(
        async () => {
          const { rows } = await client.query<{ behind: number }>(`
          select count(*)::int as behind from projection_generations
          where status = 'live' and coalesce(checkpoint, '') < (
            select lpad(to_hex(transaction_id::text::bigint), 16, '0') || lpad(to_hex(global_position), 16, '0') from es_events
            order by transaction_id desc, global_position desc limit 1)`);
          return rows[0]!.behind === 0;
        },
        60_000,
        'every consumer to take the set-up’s events',
      );
    } finally {
      await client.end();
    }
  }, 180_000); // a CLI and three real processes start on a machine that may be busy

  afterAll(async () => {
    for (const role of [...processes.keys()]) await stopRole(role);
    await receiver?.close();
    await test.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('follows a custom event that completes a challenge from the request through its append to the engine’s batch and appends', async () => {
    await post('/events/custom', { eventName: 'ran-5k', userId: 'runner-1', communityId, autoCreateUser: true, payload: { distance: 5 } });

    const root = await requestSpan('POST /api/v2/admin/events/custom');
    expect(root.attributes['http.route']).toBe('/api/v2/admin/events/custom');
    expect(root.service).toBe('engage-command-api');
    const append = await appendOf(root, 'customevent');
    // The engine's batch continues the request's trace in the projectors' process, under the append that wrote its event ...
    const batch = await waitForSpan(append, 'engage.batch engagement_engine');
    expect(batch).toMatchObject({ service: 'engage-projectors', attributes: { 'engage.consumer': 'engagement_engine', 'engage.batch.traces': 1 } });
    // ... and appends the challenge's completion there, which the read models then project in the same trace.
    const engineAppend = await waitForSpan(batch, 'engage.append');
    expect(engineAppend.attributes['engage.events']).toBeGreaterThan(0);
    await waitForSpan(engineAppend, 'engage.batch user_ledgers');

    const spans = receiver.trace(root.traceId);
    const decide = spans.find((span) => span.name === 'engage.decide');
    expect(decide && isUnder(decide, root)).toBe(true);
    // Auto-instrumentation under ESM: express, pg and ioredis spans inside the same trace.
    expect(
      spans.some((span) => span.name === 'request handler /api/v2/admin/events/custom' && span.attributes['http.route'] === '/api/v2/admin/events/custom'),
    ).toBe(true);
    // The decision itself may read nothing (stream states cached by the command side); the user's look-up reads its claim.
    expect(spans.some((span) => span.name.startsWith('pg.query') && isUnder(span, root))).toBe(true);
    expect(spans.some((span) => span.name.startsWith('pg.query') && isUnder(span, engineAppend))).toBe(true);
    if (process.env.TEST_REDIS_URL) expect(spans.some((span) => span.attributes['db.system.name'] === 'redis' && isUnder(span, root))).toBe(true);

    // The request's log line names the trace and the organisation.
    const lines = processes
      .get('command-api')!
      .log()
      .split('\n')
      .filter((text) => text.includes('"url":"/api/v2/admin/events/custom"'))
      .map((text) => JSON.parse(text));
    expect(lines).toEqual([
      expect.objectContaining({ traceId: root.traceId, organisationId: tenant.organisationId, level: 30, responseTime: expect.any(Number) }),
    ]);
  });

  it('continues the trace into the job a projection schedules and the events that job appends', async () => {
    const startsAt = new Date(Date.now() + 1500).toISOString();
    const leaderboard = await post('/leaderboards', { name: 'Sprint', metricType: 'total-xp', startsAt, status: 'scheduled', period: 'weekly' });

    const root = await requestSpan('POST /api/v2/admin/leaderboards');
    const schedule = await waitForSpan(await appendOf(root, 'leaderboard'), 'engage.batch engagement_schedule');
    // Due at startsAt, the job runs in the worker's process, a child of the batch that scheduled it.
    const job = await waitForSpan(schedule, 'engage.job leaderboard-status');
    expect(job).toMatchObject({
      service: 'engage-worker',
      traceId: root.traceId,
      attributes: { 'engage.job.kind': 'leaderboard-status', 'engage.organisation_id': tenant.organisationId },
    });
    const jobAppend = await waitForSpan(job, 'engage.append');
    expect(jobAppend.attributes['engage.streams']).toEqual([`leaderboard-${leaderboard.id}`]);
    await waitForSpan(jobAppend, 'engage.batch leaderboards');
  });

  it('one engine batch serving two requests is the child of the first and links the second; each request’s facts keep its own trace', async () => {
    // With the projectors stopped, both events wait in the log and the engine's next batch takes them together.
    await stopRole('projectors');
    const runners = new Map<string, string>();
    for (const runner of ['runner-a', 'runner-b']) {
      const logged = await post('/events/custom', { eventName: 'ran-5k', userId: runner, communityId, autoCreateUser: true, payload: { runner } });
      runners.set(`customevent-${logged.id}`, runner);
    }
    await startRole('projectors');

    const customEvents = receiver.spans.filter((span) => span.name === 'POST /api/v2/admin/events/custom' && span.kind === SERVER_KIND).slice(-2);
    expect(customEvents).toHaveLength(2);
    const appends = await Promise.all(customEvents.map((root) => appendOf(root, 'customevent')));
    const batchOf = (append: ReceivedSpan) =>
      receiver.spans.find((span) => span.name === 'engage.batch engagement_engine' && span.parentSpanId === append.spanId);
    await waitUntil(() => appends.some((append) => batchOf(append)), 30_000, 'the engine’s batch');
    // The first in the log is the parent; which request that is, is the log's business.
    const first = appends.find((append) => batchOf(append))!;
    const second = appends.find((append) => append !== first)!;
    const batch = batchOf(first)!;
    expect(batch.attributes['engage.batch.traces']).toBe(2);
    expect(batch.links).toEqual([{ traceId: second.traceId, spanId: second.spanId }]);
    expect(batchOf(second)).toBeUndefined();

    // The facts decided for the second request's event carry the second request's trace, not the batch's.
    const client = new pg.Client({ connectionString: test.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ trace_id: string | null; runner: string }>(
        `select split_part(fact.metadata->>'traceparent', '-', 2) as trace_id, cause.data->'payload'->>'runner' as runner
           from es_events fact join es_events cause on cause.event_id::text = fact.metadata->>'causationId'
          where fact.metadata->>'actor' = 'engine' and cause.data->'payload' ? 'runner'`,
      );
      const traceOf = (runner: string) => new Set(rows.filter((row) => row.runner === runner).map((row) => row.trace_id));
      const runnerOf = (append: ReceivedSpan) => (append.attributes['engage.streams'] as string[]).map((stream) => runners.get(stream)).find(Boolean)!;
      expect([runnerOf(first), runnerOf(second)].sort()).toEqual(['runner-a', 'runner-b']);
      expect(traceOf(runnerOf(first))).toEqual(new Set([first.traceId]));
      expect(traceOf(runnerOf(second))).toEqual(new Set([second.traceId]));
      // What the CLI wrote (tracing off there) carries no trace context.
      const untraced = await client.query(`select count(*)::int as n from es_events where metadata ? 'traceparent' and stream_name like 'organisation-%'`);
      expect(untraced.rows[0].n).toBe(0);
    } finally {
      await client.end();
    }
  });
});
