import { z } from 'zod';
import type { AliasedSelectQueryBuilder, Selectable, SelectQueryBuilder } from 'kysely';

/** `limit` 1..100 (default 10) and `skip` >= 0 (default 0); anything else is a 400. */
export const pagination = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(10),
  skip: z.coerce.number().int().min(0).default(0),
});

export type Pagination = z.infer<typeof pagination>;

export interface Page<T> {
  totalCount: number;
  edges: T[];
}

/**
 * One page of the rows `matching` selects, newest first (`created_at`, then `id`, so the order is stable),
 * with the total count, both served by the (organisation, created_at desc, id desc) index every listed read
 * model keeps. The total goes with the page in one statement (`withTotal`), so both come from one snapshot.
 */
export async function newestFirst<DB, TB extends keyof DB>(
  matching: SelectQueryBuilder<DB, TB, object>,
  { limit, skip }: Pagination,
): Promise<{ rows: Selectable<DB[TB]>[]; totalCount: number }> {
  // Every listed table has `created_at` and `id`, which the builder's types cannot say of a table in general.
  const erased: SelectQueryBuilder<any, any, object> = matching;
  const { rows, totalCount } = await withTotal(
    erased.select((eb) => eb.fn.countAll<string>().as('count')),
    skip,
    (total) => erased.selectAll().select(total).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(skip).execute(),
  );
  return { rows: rows as Selectable<DB[TB]>[], totalCount };
}

/** The column a page's statement carries its list's total in. */
const TOTAL_COLUMN = 'engage_total_count';

/** Reads of an empty page, each beside a count that found rows where the page had none, before one is answered. */
const EMPTY_PAGE_READS = 3;

/**
 * A page and its list's total, from one snapshot. Two statements (or two at once on two connections) each see
 * the list as of their own start: a row committed between them was counted and not listed, and a client
 * read `{"totalCount": 1, "edges": []}` for the leaderboard it had just created. So the total goes into the
 * page's statement as a scalar subquery (`count`: the list's count, one column `count`, planned once as an
 * init plan). An empty page carries no row to hold it: then the total is counted alone, and a total that puts
 * rows at `skip` or after means a write landed between the two; the page is read again (a few times at most:
 * the window is one statement wide).
 */
export async function withTotal<Row>(
  count: SelectQueryBuilder<any, any, { count: string }>,
  skip: number,
  page: (total: AliasedTotal) => Promise<Row[]>,
): Promise<{ rows: Row[]; totalCount: number }> {
  for (let read = 1; ; read++) {
    const rows = await page(count.as(TOTAL_COLUMN));
    if (rows.length > 0) {
      const totalCount = Number((rows[0] as Record<string, unknown>)[TOTAL_COLUMN]);
      return { rows: rows.map(withoutTotal), totalCount };
    }
    const totalCount = Number((await count.executeTakeFirstOrThrow()).count);
    if (totalCount <= skip || read >= EMPTY_PAGE_READS) return { rows: [], totalCount };
  }
}

/** The count of a list, as a column of its page's statement. */
export type AliasedTotal = AliasedSelectQueryBuilder<{ count: string }, typeof TOTAL_COLUMN>;

function withoutTotal<Row>(row: Row): Row {
  const { [TOTAL_COLUMN]: _total, ...rest } = row as Record<string, unknown>;
  return rest as Row;
}
