import { z } from 'zod';
import type { SelectQueryBuilder } from 'kysely';

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
export async function newestFirst(matching: SelectQueryBuilder<any, any, object>, { limit, skip }: Pagination): Promise<{ rows: any[]; totalCount: number }> {
  const [rows, count] = await Promise.all([
    matching.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(skip).execute(),
    matching.select((eb) => eb.fn.countAll<string>().as('count')).executeTakeFirstOrThrow(),
  ]);
  return { rows, totalCount: Number(count.count) };
}
