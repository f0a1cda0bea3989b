import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Database } from '../infra/database.ts';
import { CounterBatch } from '../projectors/counters.ts';
import { recordsetOf } from '../projectors/recordset.ts';
import { RowBatch } from '../projectors/row-batch.ts';
import { freshDatabase } from './support/databases.ts';

/**
 * The batches' many-rows parameter (`recordsetOf`): one JSON array per column, read with the types the table
 * declares, in the schema the Kysely names (a generation's): values come back as they were held.
 */
const test = await freshDatabase();
let database: Database;

beforeAll(async () => {
  database = await openPostgres(test.url, { max: 1 });
  for (const schema of ['rm_typed_g1', 'rm_typed_g2']) {
    await sql`create schema ${sql.id(schema)}`.execute(database.db);
  }
  // The same table in two generations, with a column whose type changed between them.
  await sql`create table rm_typed_g1.held (
      id text primary key, label varchar(8), flags text[], active boolean, total bigint, ratio double precision,
      at timestamptz, details jsonb, extra json, level integer)`.execute(database.db);
  await sql`create table rm_typed_g2.held (id text primary key, label text, level text)`.execute(database.db);
  await sql`create table rm_typed_g1.counted (org text, day text, attempts integer, total bigint, primary key (org, day))`.execute(database.db);
});

afterAll(async () => {
  await database?.close();
  await test.drop();
});

interface Held {
  id: string;
  label?: string | null;
  flags?: string[] | null;
  active?: boolean | null;
  total?: number | string | null;
  ratio?: number | null;
  at?: string | Date | null;
  details?: unknown;
  extra?: unknown;
  level?: number | string | null;
}

describe('recordsetOf', () => {
  it('writes each value as held: JSON values as themselves (a string stays a string), arrays, nulls and missing values, Dates', async () => {
    const db = database.db.withSchema('rm_typed_g1');
    const rows: Held[] = [
      {
        id: 'a',
        label: 'say "hi"',
        flags: ['x', 'with, comma', '{brace}', 'back\\slash'],
        active: true,
        total: 9007199254740991,
        ratio: -1e-9,
        at: '2026-03-29T01:30:00+02:00',
        details: { nested: { n: 2 }, s: 'ü €' },
        extra: [1, 'two'],
        level: 3,
      },
      {
        id: 'b',
        label: null,
        flags: [],
        active: false,
        total: 0,
        ratio: 1e21,
        at: new Date('2026-01-07T08:00:00.000Z'),
        details: 'a JSON string',
        extra: '{"not":"parsed"}',
      },
      { id: 'c', details: null, extra: null },
    ];
    const columns = ['id', 'label', 'flags', 'active', 'total', 'ratio', 'at', 'details', 'extra', 'level'];
    await db
      .insertInto('held')
      .columns(columns)
      .expression(await recordsetOf(db, 'held', columns, rows))
      .execute();
    const back = await sql<Record<string, unknown>>`
      select id, label, flags, active, total::text as total, ratio, to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') as at,
             details, extra::text as extra, details is null as details_null, level
      from rm_typed_g1.held order by id`.execute(database.db);
    expect(back.rows).toEqual([
      {
        id: 'a',
        label: 'say "hi"',
        flags: ['x', 'with, comma', '{brace}', 'back\\slash'],
        active: true,
        total: '9007199254740991',
        ratio: -1e-9,
        at: '2026-03-28T23:30:00',
        details: { nested: { n: 2 }, s: 'ü €' },
        extra: '[1,"two"]',
        details_null: false,
        level: 3,
      },
      {
        id: 'b',
        label: null,
        flags: [],
        active: false,
        total: '0',
        ratio: 1e21,
        at: '2026-01-07T08:00:00',
        details: 'a JSON string',
        extra: '"{\\"not\\":\\"parsed\\"}"',
        details_null: false,
        level: null,
      },
      { id: 'c', label: null, flags: null, active: null, total: null, ratio: null, at: null, details: null, extra: null, details_null: true, level: null },
    ]);
  });

  it("reads each generation's own column types, and a column's length is checked as an insert checks it", async () => {
    const g2 = database.db.withSchema('rm_typed_g2');
    await g2
      .insertInto('held')
      .columns(['id', 'level'])
      .expression(await recordsetOf(g2, 'held', ['id', 'level'], [{ id: 'x', level: 'gold' }]))
      .execute();
    expect((await sql<{ level: string }>`select level from rm_typed_g2.held`.execute(database.db)).rows).toEqual([{ level: 'gold' }]);

    const g1 = database.db.withSchema('rm_typed_g1');
    await expect(
      g1
        .insertInto('held')
        .columns(['id', 'label'])
        .expression(await recordsetOf(g1, 'held', ['id', 'label'], [{ id: 'long', label: 'longer than eight' }]))
        .execute(),
    ).rejects.toThrow(/too long/);
    await expect(recordsetOf(g1, 'held', ['id', 'missing'], [{ id: 'x' }])).rejects.toThrow(/no column missing/);
    // Nothing written by the refused insert.
    expect((await sql<{ n: number }>`select count(*)::int as n from rm_typed_g1.held where id = 'long'`.execute(database.db)).rows).toEqual([{ n: 0 }]);
  });

  it('serves RowBatch (load by keys, delete, upsert) and CounterBatch (sums added to the rows there)', async () => {
    const db = database.db.withSchema('rm_typed_g1');
    const batch = new RowBatch<Held>('held', ['id']);
    await batch.load(db, [{ id: 'a' }, { id: 'b' }, { id: 'nobody' }]);
    expect(batch.get({ id: 'a' })?.flags).toEqual(['x', 'with, comma', '{brace}', 'back\\slash']);
    expect(batch.get({ id: 'nobody' })).toBeUndefined();
    const held = batch.get({ id: 'b' })!;
    batch.set({ ...held, label: 'changed', details: { now: 'an object' } });
    batch.delete({ id: 'a' });
    await batch.save(db);
    const back = await sql<{ id: string; label: string; details: unknown }>`select id, label, details from rm_typed_g1.held order by id`.execute(database.db);
    expect(back.rows).toEqual([
      { id: 'b', label: 'changed', details: { now: 'an object' } },
      { id: 'c', label: null, details: null },
    ]);

    for (const round of [1, 2]) {
      const counters = new CounterBatch('counted', ['org', 'day'], ['attempts', 'total']);
      counters.add({ org: 'o1', day: '2026-01-01' }, { attempts: 1, total: 5 });
      counters.add({ org: 'o1', day: '2026-01-01' }, { attempts: 1 });
      counters.add({ org: 'o2', day: '2026-01-01' }, { total: round });
      await counters.write(db);
    }
    const counted = await sql`select org, day, attempts, total::int as total from rm_typed_g1.counted order by org`.execute(database.db);
    expect(counted.rows).toEqual([
      { org: 'o1', day: '2026-01-01', attempts: 4, total: 10 },
      { org: 'o2', day: '2026-01-01', attempts: 0, total: 3 },
    ]);
  });
});
