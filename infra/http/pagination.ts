import { z } from 'zod';

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
