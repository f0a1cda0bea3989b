import { DateTime, Info, type Zone } from 'luxon';
import { isoWeekOf, leaderboardWindowAt, localDate, type Window, type WindowedLeaderboard } from '../domain/windows.ts';

/** What the engine stamps facts with (`toISOString`, milliseconds optional): a UTC instant, nothing to interpret. */
const UTC_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3})?Z$/;

const zones = new Map<string, Zone | null>();

function zoneOf(timeZone: string): Zone | null {
  let zone = zones.get(timeZone);
  if (zone === undefined) {
    // The zone luxon itself resolves the name to; null when it is not a valid one.
    const resolved = Info.normalizeZone(timeZone);
    zone = resolved.isValid ? resolved : null;
    zones.set(timeZone, zone);
  }
  return zone;
}

const pad = (value: number, width: number) => String(value).padStart(width, '0');

const HOUR = 3_600_000;
/** Bound of each cache below: past it, a cache starts again empty (a rebuild meets far fewer). */
const CACHE_LIMIT = 100_000;

/** Per zone, its offset (minutes) through each UTC hour where it does not change; NaN for an hour where it does. */
const offsets = new Map<Zone, Map<number, number>>();

/**
 * `zone.offset(millis)` from a cache: luxon asks Intl for every call (formatToParts, most of a call's cost).
 * An hour whose offset is the same at both ends keeps it throughout (no zone changes its offset twice within
 * an hour), so it is asked once per zone and hour; an hour with a change is asked every time.
 */
function offsetAt(zone: Zone, millis: number): number {
  let hours = offsets.get(zone);
  if (!hours) offsets.set(zone, (hours = new Map<number, number>()));
  const hour = Math.floor(millis / HOUR);
  let offset = hours.get(hour);
  if (offset === undefined) {
    if (hours.size >= CACHE_LIMIT) hours.clear();
    const first = zone.offset(hour * HOUR);
    offset = first === zone.offset(hour * HOUR + HOUR - 1) ? first : NaN;
    hours.set(hour, offset);
  }
  return Number.isNaN(offset) ? zone.offset(millis) : offset;
}

/**
 * `localDate(instant, timeZone)`, the same answer several times faster: a read model takes the local date of
 * every fact it counts, and luxon's parsing and formatting cost most of a call (some 30 µs, a third of the
 * time budget of an event). A DateTime's local fields are the UTC fields of the instant shifted by its zone's
 * offset at that instant; this computes just that, with the same zone and offset luxon uses. Anything else
 * than a UTC instant (`...Z`) in a valid zone goes to `localDate` itself, so errors and odd inputs behave alike.
 */
export function localDateOf(instant: string, timeZone: string): string {
  const zone = zoneOf(timeZone);
  const millis = zone !== null && UTC_INSTANT.test(instant) ? Date.parse(instant) : NaN;
  // A date that does not exist (30 February, hour 24) does not read back the same: luxon's answer, then.
  if (Number.isNaN(millis) || new Date(millis).toISOString().slice(0, 19) !== instant.slice(0, 19)) return localDate(instant, timeZone);
  const local = new Date(millis + offsetAt(zone!, millis) * 60_000);
  const year = local.getUTCFullYear();
  if (year < 1000 || year > 9999) return localDate(instant, timeZone);
  return `${year}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)}`;
}

const DAY = 86_400_000;
const LOCAL_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * `isoWeekOf(instant, timeZone)` ('YYYY-Www', the ISO week-year) from `localDateOf`'s date: the week of the
 * Thursday of that date's Monday-to-Sunday week, in plain UTC day arithmetic instead of a luxon DateTime.
 */
export function localIsoWeekOf(instant: string, timeZone: string): string {
  const date = LOCAL_DATE.exec(localDateOf(instant, timeZone));
  if (!date) return isoWeekOf(instant, timeZone);
  const day = Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]));
  const thursday = day + (3 - ((new Date(day).getUTCDay() + 6) % 7)) * DAY;
  const year = new Date(thursday).getUTCFullYear();
  const week = 1 + Math.floor((thursday - Date.UTC(year, 0, 1)) / (7 * DAY));
  if (year < 1000 || year > 9999) return isoWeekOf(instant, timeZone);
  return `${year}-W${pad(week, 2)}`;
}

/** An ISO instant with its offset, as `Date.parse` and the calendar read it alike. */
const WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?(Z|[+-]\d{2}:\d{2})$/;

/** A leaderboard's span in one time zone (epoch milliseconds) and the windows met in it, in the order met. */
interface KnownWindows {
  startsAt: number;
  expiresAt: number;
  windows: { start: number; end: number; window: Window }[];
}

const spans = new Map<string, KnownWindows>();

/**
 * `leaderboardWindowAt`, reusing what the process already found for the same span (period, start, expiry)
 * in the same zone: an instant inside a window found before is in that window (windows partition the span),
 * one outside the span is in none. Only an instant written with its offset reads the same in every zone
 * (then `Date.parse` is the instant); any other is left to the calendar. The windows returned are shared:
 * callers do not change them.
 */
export function leaderboardWindowOf(leaderboard: WindowedLeaderboard, timeZone: string, instant: string): Window | null {
  if (!WITH_OFFSET.test(instant)) return leaderboardWindowAt(leaderboard, timeZone, instant);
  const key = `${leaderboard.period} ${leaderboard.startsAt} ${leaderboard.expiresAt ?? ''} ${timeZone}`;
  let known = spans.get(key);
  if (!known) {
    if (spans.size >= CACHE_LIMIT) spans.clear();
    const startsAt = DateTime.fromISO(leaderboard.startsAt, { zone: timeZone }).toMillis();
    const expiresAt = leaderboard.expiresAt === null ? Infinity : DateTime.fromISO(leaderboard.expiresAt, { zone: timeZone }).toMillis();
    spans.set(key, (known = { startsAt, expiresAt, windows: [] }));
  }
  const at = Date.parse(instant);
  // NaN bounds (an unreadable date) compare false: the calendar then says what is wrong.
  if (at < known.startsAt || at >= known.expiresAt) return null;
  for (let index = known.windows.length - 1; index >= 0; index--) {
    const met = known.windows[index]!;
    if (met.start <= at && at < met.end) return met.window;
  }
  const window = leaderboardWindowAt(leaderboard, timeZone, instant);
  if (window) {
    if (known.windows.length >= 1000) known.windows.length = 0;
    known.windows.push({ start: Date.parse(window.start), end: window.end === null ? Infinity : Date.parse(window.end), window });
  }
  return window;
}
