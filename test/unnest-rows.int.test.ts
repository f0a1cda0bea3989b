import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../infra/database.ts';
import { unnestRows } from '../projectors/unnest.ts';
import { freshDatabase } from './support/databases.ts';

/** The read models' many-rows parameter: rows go in as one JSON array per column and come out as written. */
const test = await freshDatabase();
afterAll(() => test.drop());

interface Row {
  id: string;
  name: string | null;
  count: number | null;
  score: number;
  at: string | null;
  details: string | Record<string, unknown> | null;
}

const TYPES = { id: 'text', name: 'text', count: 'integer', score: 'double precision', at: 'timestamptz', details: 'jsonb' } as const;

describe.each([
  ['as row objects', Number.POSITIVE_INFINITY],
  ['as one array per column', 0],
] as const)('unnestRows, %s', (shape, columnsFrom) => {
  it('writes every value as it was given: nulls, missing values, quotes, backslashes, commas, braces, unicode, JSON text or values', async () => {
    const database = await openPostgres(test.url, { max: 1 });
    try {
      await sql`create table ${sql.id(`rows_written_${columnsFrom}`)} (seq serial, id text, name text, count integer, score double precision, at timestamptz, details jsonb)`.execute(
        database.db,
      );
      const rows: Partial<Row>[] = [
        { id: 'a', name: 'plain', count: 1, score: 0.5, at: '2026-01-07T08:00:00.000Z', details: '{"tags":["x","y"]}' },
        { id: 'b', name: 'say "hi", {braces} \\ back\\slash', count: null, score: -1e-9, at: null, details: { nested: { n: 2 }, s: 'ü €' } },
        { id: 'c', count: 2147483647, score: 1e21, details: '"a JSON string"' },
        { id: 'd', name: 'NULL', count: 0, score: 0, at: '2026-03-29T01:30:00+02:00', details: null },
        { id: 'e', name: '', score: 3, details: [] as unknown as Record<string, unknown> },
      ];
      const written = unnestRows(rows as Row[], TYPES, columnsFrom);
      await database.db.insertInto(`rows_written_${columnsFrom}`).columns(written.columns).expression(written.select).execute();
      const back =
        await sql<Row>`select id, name, count, score, to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') as at, details from ${sql.id(`rows_written_${columnsFrom}`)} order by seq`.execute(
          database.db,
        );
      expect(back.rows).toEqual([
        { id: 'a', name: 'plain', count: 1, score: 0.5, at: '2026-01-07T08:00:00', details: { tags: ['x', 'y'] } },
        { id: 'b', name: 'say "hi", {braces} \\ back\\slash', count: null, score: -1e-9, at: null, details: { nested: { n: 2 }, s: 'ü €' } },
        { id: 'c', name: null, count: 2147483647, score: 1e21, at: null, details: 'a JSON string' },
        { id: 'd', name: 'NULL', count: 0, score: 0, at: '2026-03-28T23:30:00', details: null },
        { id: 'e', name: '', count: null, score: 3, at: null, details: [] },
      ]);
      // No rows: nothing written, no error.
      const none = unnestRows([] as Row[], TYPES, columnsFrom);
      const result = await database.db.insertInto(`rows_written_${columnsFrom}`).columns(none.columns).expression(none.select).executeTakeFirst();
      expect(Number(result.numInsertedOrUpdatedRows)).toBe(0);
    } finally {
      await database.close();
    }
  });
});
