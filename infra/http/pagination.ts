import { z } from 'zod';
import type { Selectable, SelectQueryBuilder } from 'kysely';

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
 * with the total count: two queries whatever the page size, both served by the (organisation,
 * created_at desc, id desc) index every listed read model keeps.
 */
export async function newestFirst<DB, TB extends keyof DB>(
  matching: SelectQueryBuilder<DB, TB, object>,
  { limit, skip }: Pagination,
): Promise<{ rows: Selectable<DB[TB]>[]; totalCount: number }> {
  // Every listed table has `created_at` and `id`, which the builder's types cannot say of a table in general.
  const erased: SelectQueryBuilder<any, any, object> = matching;
  const [rows, count] = await Promise.all([
    erased.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(skip).execute(),
    erased.select((eb) => eb.fn.countAll<string>().as('count')).executeTakeFirstOrThrow(),
  ]);
  return { rows: rows as Selectable<DB[TB]>[], totalCount: Number(count.count) };
}
