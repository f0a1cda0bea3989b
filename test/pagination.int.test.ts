import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, withTableTypes, type Database } from '../infra/database.ts';
import { newestFirst } from '../infra/http/pagination.ts';
import { newestFirstDeep } from '../infra/http/deep-pages.ts';
import { freshDatabase } from './support/databases.ts';

/**
 * A page and its total agree while the list grows: a client never reads a total that the page contradicts
 * (`{"totalCount": 1, "edges": []}` for a leaderboard just created, when the two came from two snapshots).
 */
const test = await freshDatabase();
let database: Database;

interface ListedTables {
  listed: { id: string; organisation_id: string; created_at: Date; name: string };
}

beforeAll(async () => {
  database = await openPostgres(test.url, { max: 4 });
  await sql`create table listed (id text primary key, organisation_id text not null, created_at timestamptz not null, name text not null)`.execute(database.db);
  await sql`create index listed_newest on listed (organisation_id, created_at desc, id desc)`.execute(database.db);
});

afterAll(async () => {
  await database?.close();
  await test.drop();
});

/** What a page of `limit` rows from `skip` must hold when the list has `totalCount` rows. */
const expectedLength = (totalCount: number, skip: number, limit: number) => Math.max(0, Math.min(limit, totalCount - skip));

describe('a page and its total come from one snapshot', () => {
  it('agree on every read while another session adds rows one by one (newestFirst and newestFirstDeep)', async () => {
    const db = withTableTypes<ListedTables>(database.db);
    const organisationId = 'org-growing';
    const rowsAdded = 300;
    let added = 0;
    const writer = (async () => {
      for (; added < rowsAdded; added++) {
        await db
          .insertInto('listed')
          .values({
            id: `row-${String(added).padStart(4, '0')}`,
            organisation_id: organisationId,
            created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, added)),
            name: `n${added}`,
          })
          .execute();
      }
    })();
    const reads: { totalCount: number; skip: number; limit: number; ids: string[] }[] = [];
    const skips = [0, 1, 2, 5];
    while (added < rowsAdded) {
      for (const skip of skips) {
        const page = { skip, limit: 3 };
        const flat = await newestFirst(db.selectFrom('listed').where('organisation_id', '=', organisationId), page);
        reads.push({ totalCount: flat.totalCount, ...page, ids: flat.rows.map((row) => row.id) });
        const deep = await newestFirstDeep(db, { table: 'listed', filter: (rows) => rows.where('organisation_id', '=', organisationId) }, page);
        reads.push({ totalCount: deep.totalCount, ...page, ids: deep.rows.map((row) => row.id) });
      }
    }
    await writer;
    expect(reads.length).toBeGreaterThan(0);
    for (const read of reads) {
      // The page holds what the total says it must, and they are the newest rows of that snapshot: ids count up
      // with the rows, so the snapshot's newest is row totalCount - 1 and the page starts `skip` below it.
      expect({ read, length: read.ids.length }).toEqual({ read, length: expectedLength(read.totalCount, read.skip, read.limit) });
      const newest = read.totalCount - 1 - read.skip;
      expect(read.ids).toEqual(read.ids.map((_, index) => `row-${String(newest - index).padStart(4, '0')}`));
    }
  });

  it('answers a page past the end as empty, with the total, and the total and page of an empty list as 0 and []', async () => {
    const db = withTableTypes<ListedTables>(database.db);
    await db.insertInto('listed').values({ id: 'only-0', organisation_id: 'org-one', created_at: new Date(), name: 'only' }).execute();
    const past = await newestFirst(db.selectFrom('listed').where('organisation_id', '=', 'org-one'), { skip: 5, limit: 10 });
    expect(past).toEqual({ rows: [], totalCount: 1 });
    const deepPast = await newestFirstDeep(db, { table: 'listed', filter: (rows) => rows.where('organisation_id', '=', 'org-one') }, { skip: 1, limit: 10 });
    expect(deepPast).toEqual({ rows: [], totalCount: 1 });
    const empty = await newestFirst(db.selectFrom('listed').where('organisation_id', '=', 'org-none'), { skip: 0, limit: 10 });
    expect(empty).toEqual({ rows: [], totalCount: 0 });
    const first = await newestFirst(db.selectFrom('listed').where('organisation_id', '=', 'org-one'), { skip: 0, limit: 10 });
    // The page's rows are the table's columns only: the total's column does not leak into them.
    expect(first.rows).toEqual([{ id: 'only-0', organisation_id: 'org-one', created_at: expect.any(Date) as Date, name: 'only' }]);
    expect(first.totalCount).toBe(1);
  });
});
