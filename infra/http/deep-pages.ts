import type { Kysely, Selectable, SelectQueryBuilder } from 'kysely';
import { withTotal, type AliasedTotal, type Pagination } from './pagination.ts';

/** A list served newest first (`created_at desc, id desc`) from one table of a read model. */
export interface DeepList<DB = any, TB extends keyof DB & string = any> {
  table: TB;
  /** Narrows the table's rows to the list's. */
  filter: (rows: SelectQueryBuilder<DB, TB, object>) => SelectQueryBuilder<DB, TB, object>;
  /** The list's size from a counter the read model keeps beside it, when it has one. */
  counted?: (db: Kysely<DB>) => Promise<number>;
}

/**
 * `newestFirst` for lists a client may page deep into (a log of events). The page's ids are picked from
 * the (…, created_at desc, id desc) index alone, so a deep `skip` steps over index entries (an index-only
 * scan) instead of fetching every skipped row; then only the page's rows are read, by primary key.
 * With a counter, the total costs no scan either, and a page past the middle is read from the oldest end
 * (the same rows, found by a shorter walk); counter and page are read in one snapshot, so they agree.
 */
export async function newestFirstDeep<DB, TB extends keyof DB & string>(
  typed: Kysely<DB>,
  typedList: DeepList<DB, TB>,
  page: Pagination,
): Promise<{ rows: Selectable<DB[TB]>[]; totalCount: number }> {
  // Every listed table has `created_at` and `id`, which the builder's types cannot say of a table in general.
  const db: Kysely<any> = typed;
  const list: DeepList = typedList;
  const { counted } = list;
  if (!counted) {
    const count = list.filter(db.selectFrom(list.table)).select((eb) => eb.fn.countAll<string>().as('count'));
    const { rows, totalCount } = await withTotal(count, page.skip, (total) => pageRows(db, list, 'desc', page, total));
    return { rows: rows as Selectable<DB[TB]>[], totalCount };
  }
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const totalCount = await counted(trx);
      const end = Math.min(page.skip + page.limit, totalCount);
      if (page.skip >= end) return { rows: [], totalCount };
      // Newest-first positions [skip, end) are oldest-first positions [totalCount - end, totalCount - skip).
      const fromOldest = totalCount - end < page.skip;
      const rows = fromOldest
        ? (await pageRows(trx, list, 'asc', { skip: totalCount - end, limit: end - page.skip })).reverse()
        : await pageRows(trx, list, 'desc', page);
      return { rows, totalCount };
    });
}

/** `total`: the list's count, as a column of each row (`withTotal`). */
function pageRows(db: Kysely<any>, list: DeepList, direction: 'asc' | 'desc', { limit, skip }: Pagination, total?: AliasedTotal): Promise<any[]> {
  const ids = list.filter(db.selectFrom(list.table)).select('id').orderBy('created_at', direction).orderBy('id', direction).limit(limit).offset(skip);
  const rows = db.selectFrom(ids.as('page')).innerJoin(`${list.table} as row`, 'row.id', 'page.id').selectAll('row');
  return (total ? rows.select(total) : rows).orderBy('row.created_at', direction).orderBy('row.id', direction).execute();
}
