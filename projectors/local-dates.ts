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
const DAY = 86_400_000;
/** Bound of each cache below: past it, a cache starts again empty (a rebuild meets far fewer). */
const CACHE_LIMIT = 100_000;

/** Per zone, its offset (minutes) at the start of each UTC hour, as luxon says it. */
const hourStarts = new Map<Zone, Map<number, number>>();

function offsetAtHourStart(zone: Zone, hour: number): number {
  let starts = hourStarts.get(zone);
  if (!starts) hourStarts.set(zone, (starts = new Map<number, number>()));
  let offset = starts.get(hour);
  if (offset === undefined) {
    if (starts.size >= CACHE_LIMIT) starts.clear();
    offset = zone.offset(hour * HOUR);
    starts.set(hour, offset);
  }
  return offset;
}

/**
 * `zone.offset(millis)` from a cache: luxon asks Intl for every call (formatToParts, most of a call's cost).
 * An hour whose offset is the same at its start and at the next hour's start keeps it throughout (no zone
 * changes its offset twice within an hour, and a change at the next hour's start shows there), so luxon is
 * asked once per zone and hour, each answer shared by the two hours it bounds; an hour with a change is
 * asked every time.
 */
function offsetAt(zone: Zone, millis: number): number {
  const hour = Math.floor(millis / HOUR);
  const first = offsetAtHourStart(zone, hour);
  return first === offsetAtHourStart(zone, hour + 1) ? first : zone.offset(millis);
}

const digit = (text: string, at: number) => text.charCodeAt(at) - 48;
const twoDigits = (text: string, at: number) => digit(text, at) * 10 + digit(text, at + 1);

/**
 * The epoch milliseconds of a UTC instant as the engine writes it (`...Z`, milliseconds optional) whose fields
 * are a real date and time of a year from 1000 on; NaN for anything else (luxon then reads it, and refuses what
 * it refuses). The fields are read in place: `Date.parse` reads 30 February as 2 March and hour 24 as the next
 * day, where luxon refuses or reads them otherwise.
 */
function utcInstantMillis(instant: string): number {
  if (!UTC_INSTANT.test(instant)) return NaN;
  const year = digit(instant, 0) * 1000 + digit(instant, 1) * 100 + twoDigits(instant, 2);
  const month = twoDigits(instant, 5);
  const day = twoDigits(instant, 8);
  const hour = twoDigits(instant, 11);
  const minute = twoDigits(instant, 14);
  const second = twoDigits(instant, 17);
  if (year < 1000 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return NaN;
  if (day > 28 && day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return NaN;
  const millis = instant.length === 24 ? digit(instant, 20) * 100 + twoDigits(instant, 21) : 0;
  return Date.UTC(year, month - 1, day, hour, minute, second, millis);
}

/** Local day numbers (days since 1970-01-01) as 'YYYY-MM-DD', years 1000 to 9999 only (undefined otherwise). */
const dates = new Map<number, string | undefined>();

function dateOfDay(day: number): string | undefined {
  let date = dates.get(day);
  if (date === undefined && !dates.has(day)) {
    if (dates.size >= CACHE_LIMIT) dates.clear();
    const local = new Date(day * DAY);
    const year = local.getUTCFullYear();
    date = year < 1000 || year > 9999 ? undefined : `${year}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)}`;
    dates.set(day, date);
  }
  return date;
}

/** The last instant and zone `localDateOf` was asked, and its answer: a custom event's facts come together with their instant. */
let lastLocal = { instant: '', timeZone: '', date: '' };

/**
 * `localDate(instant, timeZone)`, the same answer many times faster: a read model takes the local date of
 * every fact it counts, and luxon's parsing and formatting cost most of a call (some 30 µs, a third of the
 * time budget of an event). A DateTime's local fields are the UTC fields of the instant shifted by its zone's
 * offset at that instant; this computes just that, with the same zone and offset luxon uses, reading the
 * instant's fields in place and each local day's text once. Anything else than a UTC instant (`...Z`) in a
 * valid zone goes to `localDate` itself, so errors and odd inputs behave alike.
 */
export function localDateOf(instant: string, timeZone: string): string {
  if (lastLocal.instant === instant && lastLocal.timeZone === timeZone) return lastLocal.date;
  const zone = zoneOf(timeZone);
  const millis = zone === null ? NaN : utcInstantMillis(instant);
  const date = (Number.isNaN(millis) ? undefined : dateOfDay(Math.floor((millis + offsetAt(zone!, millis) * 60_000) / DAY))) ?? localDate(instant, timeZone);
  lastLocal = { instant, timeZone, date };
  return date;
}

const LOCAL_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** ISO weeks ('YYYY-Www') of local dates, computed once each. */
const weeks = new Map<string, string>();

/**
 * `isoWeekOf(instant, timeZone)` ('YYYY-Www', the ISO week-year) from `localDateOf`'s date: the week of the
 * Thursday of that date's Monday-to-Sunday week, in plain UTC day arithmetic instead of a luxon DateTime.
 */
export function localIsoWeekOf(instant: string, timeZone: string): string {
  const localDay = localDateOf(instant, timeZone);
  const known = weeks.get(localDay);
  if (known !== undefined) return known;
  const date = LOCAL_DATE.exec(localDay);
  if (!date) return isoWeekOf(instant, timeZone);
  const day = Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]));
  const thursday = day + (3 - ((new Date(day).getUTCDay() + 6) % 7)) * DAY;
  const year = new Date(thursday).getUTCFullYear();
  const week = 1 + Math.floor((thursday - Date.UTC(year, 0, 1)) / (7 * DAY));
  if (year < 1000 || year > 9999) return isoWeekOf(instant, timeZone);
  if (weeks.size >= CACHE_LIMIT) weeks.clear();
  const text = `${year}-W${pad(week, 2)}`;
  weeks.set(localDay, text);
  return text;
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
/** The span last found for a leaderboard object (callers keep one per leaderboard), and in which zone. */
const spanOfObject = new WeakMap<WindowedLeaderboard, { timeZone: string; known: KnownWindows }>();

function spanOf(leaderboard: WindowedLeaderboard, timeZone: string): KnownWindows {
  const held = spanOfObject.get(leaderboard);
  if (held?.timeZone === timeZone) return held.known;
  const key = `${leaderboard.period} ${leaderboard.startsAt} ${leaderboard.expiresAt ?? ''} ${timeZone}`;
  let known = spans.get(key);
  if (!known) {
    if (spans.size >= CACHE_LIMIT) spans.clear();
    const startsAt = DateTime.fromISO(leaderboard.startsAt, { zone: timeZone }).toMillis();
    const expiresAt = leaderboard.expiresAt === null ? Infinity : DateTime.fromISO(leaderboard.expiresAt, { zone: timeZone }).toMillis();
    spans.set(key, (known = { startsAt, expiresAt, windows: [] }));
  }
  spanOfObject.set(leaderboard, { timeZone, known });
  return known;
}

/** The last instant `leaderboardWindowOf` read, and what it is: a fact's instant is asked once per leaderboard counting it. */
let lastInstant = { text: '', withOffset: false, millis: NaN };

/**
 * `leaderboardWindowAt`, reusing what the process already found for the same span (period, start, expiry)
 * in the same zone: an instant inside a window found before is in that window (windows partition the span),
 * one outside the span is in none. Only an instant written with its offset reads the same in every zone
 * (then `Date.parse` is the instant); any other is left to the calendar. The windows returned are shared:
 * callers do not change them. A caller that asks for the same leaderboard object again (keeping one per
 * leaderboard, not a new one per call) skips finding its span.
 */
export function leaderboardWindowOf(leaderboard: WindowedLeaderboard, timeZone: string, instant: string): Window | null {
  if (lastInstant.text !== instant) {
    const withOffset = WITH_OFFSET.test(instant);
    lastInstant = { text: instant, withOffset, millis: withOffset ? Date.parse(instant) : NaN };
  }
  if (!lastInstant.withOffset) return leaderboardWindowAt(leaderboard, timeZone, instant);
  const known = spanOf(leaderboard, timeZone);
  const at = lastInstant.millis;
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
