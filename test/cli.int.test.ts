import { spawnSync } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runConsoleOperation } from '../cli/console-operations.ts';
import {
  driveIn,
  jobsStatus,
  parkedList,
  parkedSkip,
  projectionsRebuild,
  projectionsStatus,
  streamsList,
  streamsRead,
  type CliContext,
} from '../cli/operations.ts';
import { scheduleJob } from '../infra/jobs.ts';
import { organisationsProjection } from '../projectors/organisations.ts';
import { projections } from '../projectors/index.ts';
import { countUpTo } from '../projectors/maintenance.ts';
import { ProjectionRunner, liveGeneration } from '../projectors/runtime/index.ts';
import { runningPostmaster, temporaryDirectories } from './support/embedded.ts';
import { startTestService, type TestService } from './support/service.ts';
import { waitUntil } from './support/projections.ts';

/**
 * The `engage` operator and analyst commands, called as the CLI calls them (console operations, in this
 * process) against a service on the real PostgreSQL; one spawned smoke test runs the real binary.
 */
let t: TestService;
let acme: { organisationId: string };

function cli(extra: Partial<CliContext> = {}) {
  const out = new PassThrough();
  let text = '';
  out.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const err = new PassThrough();
  err.resume();
  const ctx: CliContext = {
    run: (name, input) => runConsoleOperation(t.service, name, input, 'test'),
    out,
    err,
    ...extra,
  };
  return { ctx, text: () => text, lines: () => text.split('\n').filter(Boolean) };
}

beforeAll(async () => {
  t = await startTestService({ jobs: false });
  acme = await t.createOrganisation('acme');
  await t.createOrganisation('beta');
  await t.createOrganisation('gamma');
  await t.settle();
});
afterAll(() => t.close());

describe('engage streams', () => {
  it('lists streams with their size and last event, by category, page after page', async () => {
    const table = cli();
    expect(await streamsList(table.ctx, { category: 'organisation' })).toBe(3);
    const [header, rule, ...rows] = table.lines();
    expect(header!.split(/\s+/)).toEqual(['stream', 'events', 'lastRevision', 'lastEventAt']);
    expect(rule).toMatch(/^-+( +-+){3}$/);
    expect(rows).toHaveLength(3);
    const stored = await t.service.store.readStream(`organisation-${acme.organisationId}`);
    expect(rows.find((row) => row.startsWith(`organisation-${acme.organisationId}`))).toMatch(
      new RegExp(`^organisation-\\w+\\s+${stored.length}\\s+${stored.length - 1}\\s+${stored.at(-1)!.createdAt.toISOString()}$`),
    );

    const json = cli();
    expect(await streamsList(json.ctx, { json: true, limit: 0 })).toBeGreaterThanOrEqual(6);
    const all = json.lines().map((line) => JSON.parse(line));
    expect(all.map((row) => row.stream)).toEqual([...all.map((row) => row.stream)].sort());
    expect(all.filter((row) => row.stream.startsWith('domain-'))).toHaveLength(3);
    expect(all[0]).toEqual({
      stream: expect.any(String),
      events: expect.any(Number),
      lastRevision: expect.any(Number),
      lastEventAt: expect.any(String),
      lastPosition: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    const limited = cli();
    expect(await streamsList(limited.ctx, { json: true, limit: 2 })).toBe(2);
    expect(limited.lines().map((line) => JSON.parse(line).stream)).toEqual(all.slice(0, 2).map((row) => row.stream));
  });

  it("reads a stream's events as a table or NDJSON", async () => {
    const stream = `organisation-${acme.organisationId}`;
    const table = cli();
    const stored = await t.service.store.readStream(stream);
    expect(await streamsRead(table.ctx, stream)).toBe(stored.length);
    expect(table.lines()[0]!.split(/\s+/)).toEqual(['revision', 'type', 'createdAt', 'position', 'data']);
    expect(table.lines()[2]).toMatch(/^0\s+OrganisationCreated\s+/);

    const ndjson = cli();
    await streamsRead(ndjson.ctx, stream, { ndjson: true });
    const events = ndjson.lines().map((line) => JSON.parse(line));
    expect(events.map((event) => event.id)).toEqual(stored.map((event) => event.id));
    expect(events[0]).toMatchObject({ stream, revision: 0, type: 'OrganisationCreated', organisationId: acme.organisationId, data: { slug: 'acme' } });
    const nothing = cli();
    expect(await streamsRead(nothing.ctx, 'organisation-000000000000000000000000')).toBe(0);
    expect(nothing.text()).toBe('(none)\n');
  });
});

describe('engage projections', () => {
  it('reports every projection with checkpoint, lag and parked events', async () => {
    const status = cli();
    const rows = await projectionsStatus(status.ctx, { json: true });
    expect(rows.map((row) => row.name).sort()).toEqual(projections.map((p) => p.name).sort());
    expect(rows.every((row) => row.status === 'live' && row.eventsBehind === 0 && row.parked === 0)).toBe(true);
    expect(status.lines().map((line) => JSON.parse(line).name)).toEqual(rows.map((row) => row.name));
    // The table says how far behind in time as a person reads it (the NDJSON keeps the seconds).
    const table = cli();
    await projectionsStatus(table.ctx);
    expect(table.lines()[0]!.split(/\s+/)).toEqual(['name', 'generation', 'status', 'checkpoint', 'eventsBehind', 'behind', 'parked', 'lastError']);
    expect(
      table
        .lines()
        .slice(2)
        .every((line) => /\s+live\s+\S+\s+0\s+0\s+0\s+-$/.test(line)),
    ).toBe(true);
  });

  it('lists and skips parked events', async () => {
    const db = t.service.database.db;
    const live = await liveGeneration(db, 'organisations');
    const [parked] = await db
      .insertInto('projection_parked')
      .values({
        name: 'organisations',
        generation: live!.generation,
        event_id: '00000000-0000-4000-8000-000000000000',
        event_position: '0'.repeat(32),
        stream: 'organisation-000000000000000000000000',
        event_type: 'OrganisationCreated',
        error: 'a handler that failed three times',
        attempts: 3,
      })
      .returning('id')
      .execute();
    const id = Number(parked!.id);
    const list = cli();
    expect(await parkedList(list.ctx)).toMatchObject([{ id, name: 'organisations', status: 'live', eventType: 'OrganisationCreated', attempts: 3 }]);
    expect(list.lines()[2]).toMatch(new RegExp(`^${id}\\s+organisations\\s+${live!.generation}\\s+organisation-0+\\s+OrganisationCreated`));
    expect((await projectionsStatus(cli().ctx)).find((row) => row.name === 'organisations')?.parked).toBe(1);

    const skip = cli();
    await parkedSkip(skip.ctx, id);
    expect(skip.text()).toBe(`Parked event ${id} (OrganisationCreated in organisation-000000000000000000000000) skipped: organisations stays past it.\n`);
    expect(await parkedList(cli().ctx)).toEqual([]);
    await expect(parkedSkip(cli().ctx, id)).rejects.toThrow(`No parked event ${id}`);
  });

  it('rebuilds blue/green and, after an interruption, resumes the same generation to an equal read model', async () => {
    const db = t.service.database.db;
    const tables = async () =>
      Promise.all(
        organisationsProjection.tables.map((table) =>
          db
            .selectFrom(table)
            .selectAll()
            .orderBy(sql`1`)
            .execute(),
        ),
      );
    const before = await tables();
    // No server drives the projections from here on: the command drives them itself (as with no server running).
    await t.service.runner.stop();
    const live = (await liveGeneration(db, 'organisations'))!.generation;

    const detached = cli();
    const started = await projectionsRebuild(detached.ctx, { names: ['organisations'], detach: true });
    expect(started.started).toEqual([{ name: 'organisations', generation: live + 1, resumed: false, checkpoint: null }]);
    expect(detached.lines()[0]).toBe(`organisations: building generation ${live + 1} from the start of the log`);

    // The rebuild gets one batch done, then is interrupted.
    let stopping: Promise<void> | undefined;
    const partial: ProjectionRunner = new ProjectionRunner(t.service.database, t.service.store, [organisationsProjection], pino({ level: 'silent' }), {
      batchSize: 2,
      onBatchApplied: (_name, generation) => {
        if (generation === live + 1) stopping ??= partial.stop();
      },
    });
    await partial.start();
    await waitUntil(() => stopping !== undefined, 20_000, 'the first batch');
    await stopping;
    const checkpoint = await db
      .selectFrom('projection_generations')
      .select('checkpoint')
      .where('name', '=', 'organisations')
      .where('generation', '=', live + 1)
      .executeTakeFirstOrThrow();
    expect(checkpoint.checkpoint).toMatch(/^[0-9a-f]{32}$/);

    const resumed = cli({ drive: driveIn(t.service), progress: true });
    const result = await projectionsRebuild(resumed.ctx, { names: ['organisations'], pollMs: 50 });
    expect(result).toMatchObject({ complete: true, interrupted: false, started: [{ generation: live + 1, resumed: true, checkpoint: checkpoint.checkpoint }] });
    expect(resumed.lines()[0]).toBe(`organisations: resuming generation ${live + 1} from ${checkpoint.checkpoint}`);
    expect(resumed.lines()[1]!.split(/\s+/)).toEqual(['name', 'generation', 'status', 'events', 'seconds', 'checkpoint', 'lastError']);
    expect(resumed.lines()[3]).toMatch(new RegExp(`^organisations\\s+${live + 1}\\s+live\\s+\\d+`));
    expect((await liveGeneration(db, 'organisations'))!.generation).toBe(live + 1);
    expect(await tables()).toEqual(before);
  });

  it('rebuilds every projection with --all', async () => {
    const all = cli({ drive: driveIn(t.service) });
    const result = await projectionsRebuild(all.ctx, { all: true, json: true, pollMs: 50 });
    expect(result.complete).toBe(true);
    // Every read model; the process managers (no read model) are rebuilt only when named.
    expect(result.started.map((row) => row.name).sort()).toEqual(
      projections
        .filter((p) => p.kind === 'projection')
        .map((p) => p.name)
        .sort(),
    );
    const summary = all.lines().map((line) => JSON.parse(line) as { status: string; events: number });
    expect(summary.every((row) => row.status === 'live')).toBe(true);
    // Without progress bars the log is counted for the summary only: each new generation went through all of it.
    const logged = await countUpTo(t.service.store, (await t.service.store.head())!.position);
    expect(logged).toBeGreaterThan(0);
    expect(summary.map((row) => row.events)).toEqual(summary.map(() => logged));
    const status = await projectionsStatus(cli().ctx);
    expect(
      status.every((row) => row.status === 'live' && row.generation === (result.started.find((s) => s.name === row.name)?.generation ?? row.generation)),
    ).toBe(true);
  });
  it('asks once for a read model named twice, and builds one generation of it', async () => {
    const db = t.service.database.db;
    const live = (await liveGeneration(db, 'communities'))!.generation;
    const twice = cli({ drive: driveIn(t.service) });
    const result = await projectionsRebuild(twice.ctx, { names: ['communities', 'communities'], json: true, pollMs: 50 });
    expect(result.complete).toBe(true);
    expect(result.started).toEqual([{ name: 'communities', generation: live + 1, resumed: false, checkpoint: null }]);
    expect((await liveGeneration(db, 'communities'))!.generation).toBe(live + 1);
    const generations = await db.selectFrom('projection_generations').select(['generation', 'status']).where('name', '=', 'communities').execute();
    expect(generations.filter((row) => row.status !== 'retired')).toEqual([{ generation: live + 1, status: 'live' }]);
  });
});

describe('engage jobs', () => {
  it('counts jobs by kind and state, names the oldest due one and the recent failures', async () => {
    const db = t.service.database.db;
    const now = Date.now();
    await scheduleJob(db, { id: 'cli-test:due', kind: 'cli-test', payload: {}, dueAt: new Date(now - 120_000) });
    await scheduleJob(db, { id: 'cli-test:later', kind: 'cli-test', payload: {}, dueAt: new Date(now + 3_600_000) });
    await scheduleJob(db, { id: 'cli-test:failed', kind: 'cli-test', payload: {}, dueAt: new Date(now - 60_000) });
    await db.updateTable('scheduled_jobs').set({ status: 'failed', attempts: 5, last_error: 'SMTP said no' }).where('id', '=', 'cli-test:failed').execute();

    const table = cli();
    const status = await jobsStatus(table.ctx);
    expect(status.byKind.find((row) => row.kind === 'cli-test')).toEqual({
      kind: 'cli-test',
      scheduled: 1,
      due: 1,
      running: 0,
      done: 0,
      failed: 1,
      retrying: 0,
    });
    expect(status.oldestDue).toMatchObject({ id: 'cli-test:due', kind: 'cli-test', attempts: 0 });
    expect(status.oldestDue!.secondsLate).toBeGreaterThanOrEqual(120);
    expect(status.recentFailures[0]).toMatchObject({ id: 'cli-test:failed', status: 'failed', attempts: 5, lastError: 'SMTP said no' });
    expect(table.text()).toMatch(/^cli-test\s+1\s+1\s+0\s+0\s+1\s+0$/m);
    expect(table.text()).toContain('Oldest due: cli-test cli-test:due');
    expect(table.text()).toMatch(/^cli-test:failed\s+cli-test\s+failed\s+5\s+\S+\s+SMTP said no$/m);
  });
});

describe('the engage binary', () => {
  const directories = temporaryDirectories('engage-cli-');
  afterAll(() => directories.removeAll());

  function engage(args: string[], env: Record<string, string>) {
    // The bin as npx runs it: compiled by its launcher when the sources changed.
    return spawnSync(process.execPath, ['bin/engage.mjs', ...args], {
      env: { ...process.env, LOG_LEVEL: 'warn', REDIS_URL: '', ...env },
      encoding: 'utf8',
      timeout: 60_000,
    });
  }

  it('answers --help without opening any database', () => {
    const result = engage(['--help'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/nothing' });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('Usage: engage');
    for (const command of ['org', 'token', 'migrate', 'projections', 'streams', 'replay', 'jobs']) expect(result.stdout).toContain(command);
  });

  it('lists streams as NDJSON against DATABASE_URL', async () => {
    const result = engage(['streams', 'list', '--category', 'organisation', '--json'], { DATABASE_URL: t.service.config.databaseUrl! });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const streams = result.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line).stream);
    expect(streams).toHaveLength(3);
    expect(streams).toContain(`organisation-${acme.organisationId}`);
  });

  it('answers an operator read with Redis unreachable: such a command reads PostgreSQL only', () => {
    // Port 1: nothing listens. The service would refuse to start on it; a read of the log does not need it.
    const result = engage(['streams', 'list', '--category', 'organisation', '--json'], {
      DATABASE_URL: t.service.config.databaseUrl!,
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout.split('\n').filter(Boolean)).toHaveLength(3);
  });

  it('in embedded mode with no service running, starts the PostgreSQL of DATA_DIR for each command and stops it after', () => {
    const dir = directories.make();
    const env = { DATA_DIR: dir, DATABASE_URL: '' };
    const running = () => runningPostmaster(dir) !== null;

    const created = engage(['org', 'create', '--name', 'Beta', '--slug', 'beta', '--json'], env);
    expect(created.status, created.stderr).toBe(0);
    const organisation = JSON.parse(created.stdout);
    expect(running()).toBe(false);

    const issued = engage(['token', 'issue', '--org', organisation.organisationId, '--name', 'reports', '--families', 'analytics', '--json'], env);
    expect(issued.status, issued.stderr).toBe(0);
    expect(JSON.parse(issued.stdout)).toMatchObject({ domain: 'beta.localhost', families: ['analytics'] });
    expect(running()).toBe(false);

    const listed = engage(['streams', 'list', '--category', 'organisation', '--json'], env);
    expect(listed.status, listed.stderr).toBe(0);
    expect(
      listed.stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line).stream),
    ).toEqual([`organisation-${organisation.organisationId}`]);
    expect(running()).toBe(false);
  });
});
