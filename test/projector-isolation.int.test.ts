import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { DomainEvent } from '../domain/decider.ts';
import { openPostgres, type Database } from '../infra/database.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { defineProjection } from '../projectors/projection.ts';
import { liveGeneration, prepareProjections, ProjectionRunner, runtimeDb } from '../projectors/runtime/index.ts';
import { migrate } from '../service.ts';
import { tallyProjection } from './support/projections.ts';
import { waitUntil } from './support/projections.ts';
import { adminUrl } from './support/databases.ts';

/**
 * A projection is isolated from the others and from the database's bad moments: a batch that stays open
 * holds back nobody else (nor its own lease), and refused connections, "too many clients" and terminated
 * backends make workers back off and resume, never stop, never end the process, never park an event.
 */

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A database of its own, owned by a role of its own (not a superuser, so connection limits apply to it). */
async function limitedDatabase() {
  const suffix = randomBytes(5).toString('hex');
  const role = `engage_limited_${suffix}`;
  const name = `engage_test_${suffix}`;
  await admin(async (client) => {
    await client.query(`create role ${role} login`);
    await client.query(`create database ${name} owner ${role}`);
  });
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  url.username = role;
  return {
    url: url.toString(),
    role,
    name,
    async drop() {
      await admin(async (client) => {
        await client.query(`drop database if exists ${name} with (force)`);
        await client.query(`drop role if exists ${role}`);
      });
    },
  };
}

type GateEvent = DomainEvent<'Gated', unknown>;
interface GateTables {
  gated: { event_id: string };
}

/** A read model whose batch waits, transaction open, until the test opens the gate: a long batch. */
function gatedProjection(gate: { open: Promise<void>; entered: () => void }) {
  return defineProjection<GateTables, GateEvent>({
    name: 'gated',
    version: 1,
    tables: ['gated'],
    canHandle: ['Gated'],
    migrations: {
      '0001_gated': {
        async up(db) {
          await db.schema
            .createTable('gated')
            .addColumn('event_id', 'text', (c) => c.primaryKey())
            .execute();
        },
      },
    },
    async apply(db, events) {
      await db
        .insertInto('gated')
        .values(events.map((event) => ({ event_id: event.id })))
        .execute();
      gate.entered();
      await gate.open;
    },
  });
}

async function tallyCount(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('tally')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

describe('projection isolation', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('a batch held open by one projection stops neither the others nor the renewal of its own lease', async () => {
    const target = await limitedDatabase();
    cleanups.push(() => target.drop());
    const database = await openPostgres(target.url, { max: 6 });
    cleanups.push(() => database.close());
    await migrate(database.db);
    let opened!: () => void;
    let entered!: () => void;
    const gate = { open: new Promise<void>((resolve) => (opened = resolve)), entered: () => entered() };
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const gated = gatedProjection(gate);
    await prepareProjections(database.db, [tallyProjection, gated]);
    const store = new PostgresEventStore(database);
    cleanups.push(() => store.close());
    const runner = new ProjectionRunner(database, store, [tallyProjection, gated], silent, { leaseMs: 900, scanIntervalMs: 100 });
    await runner.start();
    cleanups.push(async () => {
      opened();
      await runner.stop();
    });

    await store.append('gate-1', [{ type: 'Gated', data: {} }]);
    await inside;
    const leaseBefore = await runtimeDb(database.db).selectFrom('projection_leases').select('until').where('name', '=', 'gated').executeTakeFirstOrThrow();

    // While the gated batch stays open: the other projection applies new events, and the gated lease is renewed.
    for (let n = 0; n < 20; n++) await store.append(`tally-${n}`, [{ type: 'Counted', data: { n } }]);
    await waitUntil(async () => (await tallyCount(database)) === 20, 20_000, 'the tally projection to apply every event');
    await waitUntil(
      async () => {
        const lease = await runtimeDb(database.db).selectFrom('projection_leases').select('until').where('name', '=', 'gated').executeTakeFirstOrThrow();
        return new Date(lease.until).getTime() > new Date(leaseBefore.until).getTime();
      },
      20_000,
      'the gated lease to be renewed',
    );
    const gatedRow = await liveGeneration(database.db, 'gated');
    expect(gatedRow?.checkpoint).toBeNull();

    opened();
    const head = (await store.head())!.position;
    await waitUntil(async () => (await liveGeneration(database.db, 'gated'))?.checkpoint === head, 20_000, 'the gated projection to finish');
    expect(await database.db.selectFrom('gated').selectAll().execute()).toHaveLength(1);
  });

  it('rides out terminated backends and "too many clients": workers back off, resume, apply every event once and park nothing', async () => {
    const target = await limitedDatabase();
    cleanups.push(() => target.drop());
    const database = await openPostgres(target.url, { max: 4 });
    cleanups.push(() => database.close());
    await migrate(database.db);
    await prepareProjections(database.db, [tallyProjection]);
    const store = new PostgresEventStore(database);
    cleanups.push(() => store.close());
    const runner = new ProjectionRunner(database, store, [tallyProjection], silent, { leaseMs: 1500, scanIntervalMs: 100 });
    await runner.start();
    cleanups.push(() => runner.stop());

    for (let n = 0; n < 10; n++) await store.append(`tally-a${n}`, [{ type: 'Counted', data: { n } }]);
    await waitUntil(async () => (await tallyCount(database)) === 10, 20_000, 'the first events');

    // The database refuses this role any connection, and every connection it had is terminated.
    await admin(async (client) => {
      await client.query(`alter role ${target.role} connection limit 0`);
      await client.query(`select pg_terminate_backend(pid) from pg_stat_activity where usename = $1`, [target.role]);
    });
    const refused = await openPostgres(target.url).then(
      () => 'connected',
      (error: { code?: string }) => error.code,
    );
    expect(refused).toBe('53300');

    // Events written meanwhile (by a connection of another role) wait for the workers to come back.
    await admin(async (client) => {
      const url = new URL(adminUrl());
      url.pathname = `/${target.name}`;
      const writer = await openPostgres(url.toString(), { max: 1 });
      const writerStore = new PostgresEventStore(writer);
      for (let n = 0; n < 10; n++) await writerStore.append(`tally-b${n}`, [{ type: 'Counted', data: { n } }]);
      await writerStore.close();
      await writer.close();
      await client.query(`alter role ${target.role} connection limit -1`);
      await client.query(`select pg_terminate_backend(pid) from pg_stat_activity where usename = $1`, [target.role]);
    });

    await waitUntil(async () => (await tallyCount(database).catch(() => -1)) === 20, 30_000, 'the workers to resume and apply the rest');
    const rows = await database.db.selectFrom('tally').select('applied').execute();
    expect(rows.every((row) => row.applied === 1)).toBe(true);
    expect(await runtimeDb(database.db).selectFrom('projection_parked').selectAll().execute()).toEqual([]);
    const generation = await liveGeneration(database.db, 'tally');
    expect(generation?.checkpoint).toBe((await store.head())!.position);
    // The runner is still working: one more event comes through.
    await store.append('tally-c', [{ type: 'Counted', data: {} }]);
    await waitUntil(async () => (await tallyCount(database)) === 21, 20_000, 'one more event after the outage');
    expect(await sql<{ one: number }>`select 1 as one`.execute(database.db)).toMatchObject({ rows: [{ one: 1 }] });
  });
});
