/**
 * Calendar windows in an organisation's IANA time zone: the windows a leaderboard ranks in, and the keys
 * of the periods challenges and streaks count in. Instants go in as ISO strings (any offset) and come out
 * as UTC ISO strings with milliseconds. Windows follow local midnight, so a day is 23 or 25 hours long
 * across a DST change.
 */
import { DateTime, IANAZone } from 'luxon';
import type { CompletionPeriod } from './challenge.ts';
import type { Period } from './leaderboard.ts';

/** Half-open [start, end); `end` null: the window never closes (an open leaderboard without expiry). */
export interface Window {
  start: string;
  end: string | null;
}

export type WindowedLeaderboard = { period: Period; startsAt: string; expiresAt: string | null };

const CALENDAR_UNITS = { daily: 'day', weekly: 'week', monthly: 'month', yearly: 'year' } as const;

/** `instant` as a local time in `timeZone`; refuses an unreadable instant or an unknown zone rather than computing NaN windows. */
function inZone(instant: string, timeZone: string): DateTime<true> {
  const local = DateTime.fromISO(instant, { zone: timeZone });
  if (!local.isValid) throw new RangeError(`Cannot read ${instant} in time zone ${timeZone}: ${local.invalidExplanation ?? local.invalidReason}`);
  return local;
}

function utc(millis: number): string {
  return new Date(millis).toISOString();
}

/** The leaderboard's window containing `instant`, clipped to [startsAt, expiresAt); null outside that span. */
export function leaderboardWindowAt(leaderboard: WindowedLeaderboard, timeZone: string, instant: string): Window | null {
  const local = inZone(instant, timeZone);
  const at = local.toMillis();
  const startsAt = inZone(leaderboard.startsAt, timeZone).toMillis();
  const expiresAt = leaderboard.expiresAt === null ? null : inZone(leaderboard.expiresAt, timeZone).toMillis();
  if (at < startsAt || (expiresAt !== null && at >= expiresAt)) return null;
  if (leaderboard.period === 'open') return { start: utc(startsAt), end: expiresAt === null ? null : utc(expiresAt) };
  const unit = CALENDAR_UNITS[leaderboard.period];
  const calendarStart = local.startOf(unit);
  // startOf again, in case the zone skips local midnight on the next period's first day.
  const calendarEnd = calendarStart
    .plus({ [unit]: 1 })
    .startOf(unit)
    .toMillis();
  return {
    start: utc(Math.max(calendarStart.toMillis(), startsAt)),
    end: utc(expiresAt === null ? calendarEnd : Math.min(calendarEnd, expiresAt)),
  };
}

/** The window after `window`; null once the leaderboard has expired (or never closes its only window). */
export function nextWindow(leaderboard: WindowedLeaderboard, timeZone: string, window: Window): Window | null {
  return window.end === null ? null : leaderboardWindowAt(leaderboard, timeZone, window.end);
}

/** The window before `window`; null for the leaderboard's first window. */
export function previousWindow(leaderboard: WindowedLeaderboard, timeZone: string, window: Window): Window | null {
  return leaderboardWindowAt(leaderboard, timeZone, utc(inZone(window.start, timeZone).toMillis() - 1));
}

/** The local calendar date, 'YYYY-MM-DD'. */
export function localDate(instant: string, timeZone: string): string {
  return inZone(instant, timeZone).toFormat('yyyy-MM-dd');
}

/** The local ISO week, 'YYYY-Www' with the ISO week-year: 2027-01-03 is in '2026-W53'. */
export function isoWeekOf(instant: string, timeZone: string): string {
  return inZone(instant, timeZone).toFormat("kkkk-'W'WW");
}

/** The calendar date before a 'YYYY-MM-DD' date. */
export function dayBefore(date: string): string {
  return inZone(date, 'UTC').minus({ days: 1 }).toFormat('yyyy-MM-dd');
}

/** The key of the period a challenge's `maxCompletionsPerPeriod` counts in: completions with the same key share the allowance. */
export function completionPeriodKey(period: CompletionPeriod, timeZone: string, instant: string): string {
  switch (period) {
    case 'open':
      return 'open';
    case 'daily':
      return localDate(instant, timeZone);
    case 'weekly':
      return isoWeekOf(instant, timeZone);
    case 'monthly':
      return inZone(instant, timeZone).toFormat('yyyy-MM');
    case 'yearly':
      return inZone(instant, timeZone).toFormat('yyyy');
  }
}

export function isTimeZone(timeZone: string): boolean {
  return IANAZone.isValidZone(timeZone);
}
