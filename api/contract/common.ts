import { z } from 'zod';
import { ID_PATTERN } from '../../infra/ids.ts';

/** Building blocks of the contract's request and response shapes, shared by the command and query sides. */
const notAnId = 'must be 24 hexadecimal characters';
// The length first (and alone when it fails), so that the documents show the bound and a long string is refused at once.
export const hexId = z.string().length(24, { error: notAnId, abort: true }).regex(ID_PATTERN, notAnId);

/**
 * The dates the service accepts, in requests and filters: PostgreSQL, the time zone arithmetic and the
 * windows of a leaderboard all work on these, and none of the programmes it runs reaches outside them.
 */
/**
 * For a refinement that relates several fields: it runs only once every field is valid (by default zod
 * runs it after some failed checks too, and it would meet a field still in its raw, untransformed shape).
 */
export const whenValid = { when: (payload: { issues: readonly unknown[] }) => payload.issues.length === 0 };

export const EARLIEST_DATE = '1900-01-01';
export const LATEST_DATE = '2999-12-31';
const FIRST_INSTANT = Date.parse(`${EARLIEST_DATE}T00:00:00Z`);
const END_INSTANT = Date.parse('3000-01-01T00:00:00Z');
export const DATE_RANGE_MESSAGE = `must be between ${EARLIEST_DATE} and ${LATEST_DATE} (UTC)`;

/** A date `YYYY-MM-DD`, or an ISO 8601 date-time with Z or an offset (at most nanoseconds). */
export const isoDate = z.iso.date().max(10);
export const isoDateTime = z.iso.datetime({ offset: true }).max(35);

/** A date or a date-time inside the accepted range: a date counts as its midnight UTC. */
export function withinDateRange(value: string): boolean {
  const instant = Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value);
  return instant >= FIRST_INSTANT && instant < END_INSTANT;
}

/** An ISO 8601 date-time (with Z or an offset) or a calendar date; stored and returned in UTC ISO form. */
export const dateTime = z
  .union([isoDateTime, isoDate], { error: 'must be an ISO 8601 date-time such as 2026-01-05T00:00:00Z' })
  .refine(withinDateRange, DATE_RANGE_MESSAGE)
  .transform((value) => new Date(value).toISOString());

export function pageOf<Item extends z.ZodType>(item: Item) {
  return z.object({ totalCount: z.number().int().min(0), edges: z.array(item) });
}
