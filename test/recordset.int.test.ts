import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Database } from '../infra/database.ts';
import { CounterBatch, writeCounters } from '../projectors/counters.ts';
import { recordsetOf } from '../projectors/recordset.ts';
import { RowBatch } from '../projectors/row-batch.ts';
import { freshDatabase } from './support/databases.ts';

/**
 * The batches' many-rows parameter (`recordsetOf`): one JSON array per column, read with the types the table
 * declares, in the schema the Kysely names (a generation's): values come back as they were held.
 */
const test = await freshDatabase();
let database: Database;

/** A read model's table as two shapes' tests and the batches' test each create it, in a schema of their own. */
const createHeld = (schema: string) =>
  sql`create table ${sql.id(schema)}.held (
      id text primary key, label varchar(8), flags text[], active boolean, total bigint, ratio double precision,
      at timestamptz, details jsonb, extra json, level integer)`;

beforeAll(async () => {
  database = await openPostgres(test.url, { max: 1 });
  // The same table in another generation, where `level` became text.
  await sql`create schema rm_typed_g2`.execute(database.db);
  await sql`create table rm_typed_g2.held (id text primary key, label text, level text)`.execute(database.db);
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

/** Each shape: row objects (what a live batch sends), one array per column (a rebuild's batch). */
describe.each([
  ['as row objects', Number.POSITIVE_INFINITY, 'rm_typed_g1'],
  ['as one array per column', 0, 'rm_typed_g3'],
] as const)('recordsetOf, %s', (_shape, columnsFrom, schema) => {
  beforeAll(async () => {
    await sql`create schema ${sql.id(schema)}`.execute(database.db);
    await createHeld(schema).execute(database.db);
  });

  it('writes each value as held: JSON values as themselves (a string stays a string), arrays, nulls and missing values, Dates', async () => {
    const db = database.db.withSchema(schema);
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
      .expression(await recordsetOf(db, 'held', columns, rows, columnsFrom))
      .execute();
    const back = await sql<Record<string, unknown>>`
      select id, label, flags, active, total::text as total, ratio, to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') as at,
             details, extra::text as extra, details is null as details_null, level
      from ${sql.id(schema)}.held order by id`.execute(database.db);
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
    // The same table name in another generation, where `level` is text: each reads its own.
    const g2 = database.db.withSchema('rm_typed_g2');
    await g2
      .insertInto('held')
      .columns(['id', 'level'])
      .expression(await recordsetOf(g2, 'held', ['id', 'level'], [{ id: `x-${schema}`, level: 'gold' }], columnsFrom))
      .execute();
    expect((await sql<{ level: string }>`select level from rm_typed_g2.held where id = ${`x-${schema}`}`.execute(database.db)).rows).toEqual([
      { level: 'gold' },
    ]);

    const db = database.db.withSchema(schema);
    await expect(
      db
        .insertInto('held')
        .columns(['id', 'label'])
        .expression(await recordsetOf(db, 'held', ['id', 'label'], [{ id: 'long', label: 'longer than eight' }], columnsFrom))
        .execute(),
    ).rejects.toThrow(/too long/);
    // Nothing written by the refused insert.
    expect((await sql<{ n: number }>`select count(*)::int as n from ${sql.id(schema)}.held where id = 'long'`.execute(database.db)).rows).toEqual([{ n: 0 }]);
  });
});

describe('recordsetOf in the batches', () => {
  it.each([
    ['a live batch (row objects)', 3, 'rm_typed_live'],
    ['a rebuild batch (one array per column)', 150, 'rm_typed_rebuild'],
  ] as const)('serves RowBatch (load by keys, delete, upsert) and CounterBatch (sums added to the rows there): %s', async (_batch, size, schema) => {
    await sql`create schema ${sql.id(schema)}`.execute(database.db);
    await createHeld(schema).execute(database.db);
    await sql`create table ${sql.id(schema)}.counted (org text, day text, attempts integer, total bigint, primary key (org, day))`.execute(database.db);
    const db = database.db.withSchema(schema);
    const ids = Array.from({ length: size }, (_, index) => `id-${String(index).padStart(3, '0')}`);

    const first = new RowBatch<Held>('held', ['id']);
    for (const id of ids) first.set({ id, label: 'first', flags: ['a, b', '{c}'], details: 'a JSON string', at: new Date('2026-01-07T08:00:00.000Z') });
    await first.save(db);

    const batch = new RowBatch<Held>('held', ['id']);
    await batch.load(db, [...ids.map((id) => ({ id })), { id: 'nobody' }]);
    expect(batch.get({ id: ids[0]! })?.flags).toEqual(['a, b', '{c}']);
    expect(batch.get({ id: ids[0]! })?.details).toBe('a JSON string');
    expect(batch.get({ id: 'nobody' })).toBeUndefined();
    for (const id of ids.slice(1)) batch.set({ ...batch.get({ id })!, label: 'changed', details: { now: 'an object' } });
    batch.delete({ id: ids[0]! });
    await batch.save(db);
    const back = await sql<{ id: string; label: string; details: unknown; at: Date }>`
      select id, label, details, at from ${sql.id(schema)}.held order by id`.execute(database.db);
    expect(back.rows).toEqual(ids.slice(1).map((id) => ({ id, label: 'changed', details: { now: 'an object' }, at: new Date('2026-01-07T08:00:00.000Z') })));

    for (const round of [1, 2]) {
      const counters = new CounterBatch('counted', ['org', 'day'], ['attempts', 'total']);
      for (const id of ids) {
        counters.add({ org: id, day: '2026-01-01' }, { attempts: 1, total: 5 });
        counters.add({ org: id, day: '2026-01-01' }, { attempts: 1 });
      }
      counters.add({ org: 'other', day: '2026-01-01' }, { total: round });
      await counters.write(db);
    }
    const counted = await sql<{ org: string; attempts: number; total: number }>`
      select org, attempts, total::int as total from ${sql.id(schema)}.counted order by org`.execute(database.db);
    expect(counted.rows).toEqual([...ids.map((org) => ({ org, attempts: 4, total: 10 })), { org: 'other', attempts: 0, total: 3 }]);
  });
});

describe('RowBatch.add', () => {
  it('inserts a new row unread where the table has none, leaves one it has as it is, and upserts the rows set beside it', async () => {
    const schema = 'rm_typed_added';
    await sql`create schema ${sql.id(schema)}`.execute(database.db);
    await createHeld(schema).execute(database.db);
    const db = database.db.withSchema(schema);
    const before = new RowBatch<Held>('held', ['id']);
    before.set({ id: 'there', label: 'first' });
    before.set({ id: 'changed', label: 'first' });
    before.set({ id: 'gone', label: 'first' });
    await before.save(db);

    const batch = new RowBatch<Held>('held', ['id']);
    await batch.load(db, [{ id: 'changed' }, { id: 'gone' }]);
    batch.add({ id: 'there', label: 'again' }); // the table has it: left as it is
    batch.add({ id: 'new', label: 'added' });
    batch.add({ id: 'twice', label: 'one' });
    batch.add({ id: 'twice', label: 'two' }); // the batch's last, still only where the table has none
    batch.set({ ...batch.get({ id: 'changed' })!, label: 'set' });
    batch.delete({ id: 'gone' });
    expect(batch.get({ id: 'new' })?.label).toBe('added');
    await batch.save(db);
    const rows = await sql<{ id: string; label: string }>`select id, label from ${sql.id(schema)}.held order by id`.execute(database.db);
    expect(rows.rows).toEqual([
      { id: 'changed', label: 'set' },
      { id: 'new', label: 'added' },
      { id: 'there', label: 'first' },
      { id: 'twice', label: 'two' },
    ]);
  });
});

describe('writeCounters', () => {
  it('writes the counter batches of several tables in one statement, each as its own write would (empty ones left out), and refuses two of one table', async () => {
    const schema = 'rm_counted_together';
    await sql`create schema ${sql.id(schema)}`.execute(database.db);
    await sql`create table ${sql.id(schema)}.by_day (org text, day text, attempts integer, primary key (org, day))`.execute(database.db);
    await sql`create table ${sql.id(schema)}.by_org (org text primary key, label text, attempts integer, users integer)`.execute(database.db);
    await sql`create table ${sql.id(schema)}.untouched (org text primary key, attempts integer)`.execute(database.db);
    const db = database.db.withSchema(schema);
    let statements = 0;
    database.observeStatements(() => statements++);

    for (const round of [1, 2, 3]) {
      const byDay = new CounterBatch('by_day', ['org', 'day'], ['attempts']);
      const byOrg = new CounterBatch('by_org', ['org'], ['attempts', 'users']);
      const untouched = new CounterBatch('untouched', ['org'], ['attempts']);
      // Enough rows for the one-array-per-column shape after the first round.
      const orgs = Array.from({ length: round === 1 ? 3 : 120 }, (_, index) => `org-${index}`);
      for (const org of orgs) {
        byDay.add({ org, day: '2026-01-01' }, { attempts: 1 });
        byDay.add({ org, day: `2026-01-0${round}` }, { attempts: 2 });
        byOrg.add({ org }, { attempts: 3, users: round }, { label: `created in round ${round}` });
      }
      const before = statements;
      await writeCounters(db, [byDay, byOrg, untouched]);
      // The first many-rows round also reads each table's column types, once per process (recordsetOf).
      if (round !== 2) expect(statements - before).toBe(1);
      expect(byDay.size + byOrg.size).toBe(0);
    }
    const byDay = await sql<{ org: string; day: string; attempts: number }>`
      select org, day, attempts from ${sql.id(schema)}.by_day where org in ('org-0', 'org-100') order by org, day`.execute(database.db);
    expect(byDay.rows).toEqual([
      { org: 'org-0', day: '2026-01-01', attempts: 5 },
      { org: 'org-0', day: '2026-01-02', attempts: 2 },
      { org: 'org-0', day: '2026-01-03', attempts: 2 },
      { org: 'org-100', day: '2026-01-01', attempts: 2 },
      { org: 'org-100', day: '2026-01-02', attempts: 2 },
      { org: 'org-100', day: '2026-01-03', attempts: 2 },
    ]);
    const byOrg = await sql<{ org: string; label: string; attempts: number; users: number }>`
      select org, label, attempts, users from ${sql.id(schema)}.by_org where org in ('org-0', 'org-100') order by org`.execute(database.db);
    expect(byOrg.rows).toEqual([
      { org: 'org-0', label: 'created in round 1', attempts: 9, users: 6 },
      { org: 'org-100', label: 'created in round 2', attempts: 6, users: 5 },
    ]);
    expect((await sql<{ n: number }>`select count(*)::int as n from ${sql.id(schema)}.untouched`.execute(database.db)).rows).toEqual([{ n: 0 }]);

    const one = new CounterBatch('by_org', ['org'], ['attempts']);
    const other = new CounterBatch('by_org', ['org'], ['users']);
    one.add({ org: 'twice' }, { attempts: 1 });
    other.add({ org: 'twice' }, { users: 1 });
    await expect(writeCounters(db, [one, other])).rejects.toThrow(/one batch per table/);
    expect((await sql<{ n: number }>`select count(*)::int as n from ${sql.id(schema)}.by_org where org = 'twice'`.execute(database.db)).rows).toEqual([
      { n: 0 },
    ]);
  });
});
