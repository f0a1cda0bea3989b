import { z } from 'zod';
import { ID_PATTERN } from '../ids.ts';

/** Building blocks of the contract's request and response shapes, shared by the command and query sides. */
export const hexId = z.string().regex(ID_PATTERN, 'must be 24 hexadecimal characters');

/** An ISO 8601 date-time (with Z or an offset) or a calendar date; stored and returned in UTC ISO form. */
export const dateTime = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], { error: 'must be an ISO 8601 date-time such as 2026-01-05T00:00:00Z' })
  .transform((value) => new Date(value).toISOString());

export function pageOf<Item extends z.ZodType>(item: Item) {
  return z.object({ totalCount: z.number().int().min(0), edges: z.array(item) });
}
