import { describe, expect, it } from 'vitest';
import {
  completionPeriodKey,
  dayBefore,
  isoWeekOf,
  isTimeZone,
  leaderboardWindowAt,
  localDate,
  nextWindow,
  previousWindow,
  type WindowedLeaderboard,
} from '../domain/windows.ts';

const HOUR = 3_600_000;
const since2020 = (period: WindowedLeaderboard['period']): WindowedLeaderboard => ({ period, startsAt: '2020-01-01T00:00:00.000Z', expiresAt: null });
const hours = (window: { start: string; end: string | null }) => (Date.parse(window.end ?? '') - Date.parse(window.start)) / HOUR;

describe('daily windows follow local midnight', () => {
  const daily = since2020('daily');

  it('Europe/Paris 2026-03-29 (clocks forward at 02:00) is 23 hours: 00:00+01:00 to 00:00+02:00', () => {
    const window = leaderboardWindowAt(daily, 'Europe/Paris', '2026-03-29T01:30:00Z');
    expect(window).toEqual({ start: '2026-03-28T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z' });
    expect(hours(window!)).toBe(23);
  });

  it('Europe/Paris 2026-10-25 (clocks back at 03:00) is 25 hours: 00:00+02:00 to 00:00+01:00', () => {
    const window = leaderboardWindowAt(daily, 'Europe/Paris', '2026-10-25T12:00:00Z');
    expect(window).toEqual({ start: '2026-10-24T22:00:00.000Z', end: '2026-10-25T23:00:00.000Z' });
    expect(hours(window!)).toBe(25);
  });

  it('America/New_York 2026-03-08 is 23 hours and 2026-11-01 is 25 hours', () => {
    expect(leaderboardWindowAt(daily, 'America/New_York', '2026-03-08T12:00:00Z')).toEqual({
      start: '2026-03-08T05:00:00.000Z',
      end: '2026-03-09T04:00:00.000Z',
    });
    expect(leaderboardWindowAt(daily, 'America/New_York', '2026-11-01T12:00:00Z')).toEqual({
      start: '2026-11-01T04:00:00.000Z',
      end: '2026-11-02T05:00:00.000Z',
    });
  });

  it('steps across a DST change from one local midnight to the next', () => {
    const shortDay = { start: '2026-03-28T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z' };
    expect(nextWindow(daily, 'Europe/Paris', shortDay)).toEqual({ start: '2026-03-29T22:00:00.000Z', end: '2026-03-30T22:00:00.000Z' });
    expect(previousWindow(daily, 'Europe/Paris', shortDay)).toEqual({ start: '2026-03-27T23:00:00.000Z', end: '2026-03-28T23:00:00.000Z' });
  });

  it.each([
    ['UTC', '2026-05-10T00:00:00.000Z', '2026-05-11T00:00:00.000Z'],
    // 2026-05-11 01:30 local (+05:30)
    ['Asia/Kolkata', '2026-05-10T18:30:00.000Z', '2026-05-11T18:30:00.000Z'],
    // 2026-05-11 08:00 local (NZST +12)
    ['Pacific/Auckland', '2026-05-10T12:00:00.000Z', '2026-05-11T12:00:00.000Z'],
    // 2026-05-10 13:00 local (PDT -07)
    ['America/Los_Angeles', '2026-05-10T07:00:00.000Z', '2026-05-11T07:00:00.000Z'],
  ])('the day containing 2026-05-10T20:00Z in %s is [%s, %s)', (timeZone, start, end) => {
    expect(leaderboardWindowAt(daily, timeZone, '2026-05-10T20:00:00Z')).toEqual({ start, end });
  });

  it('Pacific/Auckland in summer is +13 (NZDT)', () => {
    expect(leaderboardWindowAt(daily, 'Pacific/Auckland', '2026-01-15T12:00:00Z')).toEqual({
      start: '2026-01-15T11:00:00.000Z',
      end: '2026-01-16T11:00:00.000Z',
    });
  });

  it('a window starts at its own start instant and excludes its end instant', () => {
    expect(leaderboardWindowAt(daily, 'UTC', '2026-05-10T00:00:00.000Z')?.start).toBe('2026-05-10T00:00:00.000Z');
    expect(leaderboardWindowAt(daily, 'UTC', '2026-05-10T23:59:59.999Z')?.end).toBe('2026-05-11T00:00:00.000Z');
    expect(leaderboardWindowAt(daily, 'UTC', '2026-05-11T00:00:00.000Z')?.start).toBe('2026-05-11T00:00:00.000Z');
  });
});

describe('weekly, monthly and yearly windows', () => {
  it('a week runs from ISO Monday 00:00 local: Sunday 2026-05-10 in UTC is already Monday in Auckland and Kolkata', () => {
    const weekly = since2020('weekly');
    expect(leaderboardWindowAt(weekly, 'UTC', '2026-05-10T20:00:00Z')).toEqual({ start: '2026-05-04T00:00:00.000Z', end: '2026-05-11T00:00:00.000Z' });
    expect(leaderboardWindowAt(weekly, 'Pacific/Auckland', '2026-05-10T20:00:00Z')).toEqual({
      start: '2026-05-10T12:00:00.000Z',
      end: '2026-05-17T12:00:00.000Z',
    });
    expect(leaderboardWindowAt(weekly, 'Asia/Kolkata', '2026-05-10T20:00:00Z')).toEqual({
      start: '2026-05-10T18:30:00.000Z',
      end: '2026-05-17T18:30:00.000Z',
    });
  });

  it('the Paris week holding the spring DST change is 167 hours, Monday to Monday', () => {
    const window = leaderboardWindowAt(since2020('weekly'), 'Europe/Paris', '2026-03-29T12:00:00Z');
    expect(window).toEqual({ start: '2026-03-22T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z' });
    expect(hours(window!)).toBe(167);
  });

  it('a month runs from the 1st, local: March 2026 in Paris starts at +01:00 and ends at +02:00', () => {
    expect(leaderboardWindowAt(since2020('monthly'), 'Europe/Paris', '2026-03-15T12:00:00Z')).toEqual({
      start: '2026-02-28T23:00:00.000Z',
      end: '2026-03-31T22:00:00.000Z',
    });
  });

  it('a year runs from 1 January, local', () => {
    expect(leaderboardWindowAt(since2020('yearly'), 'America/New_York', '2026-07-01T00:00:00Z')).toEqual({
      start: '2026-01-01T05:00:00.000Z',
      end: '2027-01-01T05:00:00.000Z',
    });
    // 2026-12-31T20:00Z is already 2027 in Kolkata.
    expect(leaderboardWindowAt(since2020('yearly'), 'Asia/Kolkata', '2026-12-31T20:00:00Z')).toEqual({
      start: '2026-12-31T18:30:00.000Z',
      end: '2027-12-31T18:30:00.000Z',
    });
  });
});

describe('the leaderboard span clips its windows', () => {
  // Wednesday to Wednesday; startsAt given with an offset comes out in UTC.
  const weekly: WindowedLeaderboard = { period: 'weekly', startsAt: '2026-05-06T14:00:00+02:00', expiresAt: '2026-05-20T12:00:00Z' };
  const first = { start: '2026-05-06T12:00:00.000Z', end: '2026-05-11T00:00:00.000Z' };
  const middle = { start: '2026-05-11T00:00:00.000Z', end: '2026-05-18T00:00:00.000Z' };
  const last = { start: '2026-05-18T00:00:00.000Z', end: '2026-05-20T12:00:00.000Z' };

  it('the first window starts at startsAt and the last ends at expiresAt', () => {
    expect(leaderboardWindowAt(weekly, 'UTC', '2026-05-06T12:00:00.000Z')).toEqual(first);
    expect(leaderboardWindowAt(weekly, 'UTC', '2026-05-13T00:00:00.000Z')).toEqual(middle);
    expect(leaderboardWindowAt(weekly, 'UTC', '2026-05-20T11:59:59.999Z')).toEqual(last);
  });

  it('there is no window before startsAt or from expiresAt on', () => {
    expect(leaderboardWindowAt(weekly, 'UTC', '2026-05-06T11:59:59.999Z')).toBeNull();
    expect(leaderboardWindowAt(weekly, 'UTC', '2026-05-20T12:00:00.000Z')).toBeNull();
    expect(leaderboardWindowAt(weekly, 'UTC', '2027-01-01T00:00:00.000Z')).toBeNull();
  });

  it('next and previous walk the windows and stop at the ends', () => {
    expect(nextWindow(weekly, 'UTC', first)).toEqual(middle);
    expect(nextWindow(weekly, 'UTC', middle)).toEqual(last);
    expect(nextWindow(weekly, 'UTC', last)).toBeNull();
    expect(previousWindow(weekly, 'UTC', last)).toEqual(middle);
    expect(previousWindow(weekly, 'UTC', middle)).toEqual(first);
    expect(previousWindow(weekly, 'UTC', first)).toBeNull();
  });

  it('an open leaderboard has one window, [startsAt, expiresAt)', () => {
    const open: WindowedLeaderboard = { period: 'open', startsAt: '2026-05-06T12:00:00Z', expiresAt: '2026-06-01T00:00:00Z' };
    const window = { start: '2026-05-06T12:00:00.000Z', end: '2026-06-01T00:00:00.000Z' };
    expect(leaderboardWindowAt(open, 'Europe/Paris', '2026-05-20T00:00:00Z')).toEqual(window);
    expect(nextWindow(open, 'Europe/Paris', window)).toBeNull();
    expect(previousWindow(open, 'Europe/Paris', window)).toBeNull();
    expect(leaderboardWindowAt(open, 'Europe/Paris', '2026-06-01T00:00:00Z')).toBeNull();
  });

  it('an open leaderboard without expiry never closes its window', () => {
    const open: WindowedLeaderboard = { period: 'open', startsAt: '2026-05-06T12:00:00Z', expiresAt: null };
    const window = { start: '2026-05-06T12:00:00.000Z', end: null };
    expect(leaderboardWindowAt(open, 'UTC', '2030-01-01T00:00:00Z')).toEqual(window);
    expect(nextWindow(open, 'UTC', window)).toBeNull();
  });

  it('refuses an unknown time zone', () => {
    expect(() => leaderboardWindowAt(weekly, 'Mars/Olympus', '2026-05-13T00:00:00Z')).toThrow(RangeError);
  });
});

describe('calendar keys', () => {
  it('localDate is the date in the time zone', () => {
    expect(localDate('2026-03-29T23:30:00Z', 'UTC')).toBe('2026-03-29');
    expect(localDate('2026-03-29T23:30:00Z', 'Asia/Kolkata')).toBe('2026-03-30');
    expect(localDate('2026-03-30T05:00:00Z', 'America/Los_Angeles')).toBe('2026-03-29');
  });

  it('isoWeekOf uses the ISO week-year across a new year', () => {
    expect(isoWeekOf('2026-12-28T00:00:00Z', 'UTC')).toBe('2026-W53');
    expect(isoWeekOf('2027-01-03T23:59:59.999Z', 'UTC')).toBe('2026-W53');
    expect(isoWeekOf('2027-01-04T00:00:00Z', 'UTC')).toBe('2027-W01');
    expect(isoWeekOf('2024-12-30T12:00:00Z', 'UTC')).toBe('2025-W01');
    expect(isoWeekOf('2026-05-06T12:00:00Z', 'UTC')).toBe('2026-W19');
    // Sunday 23:30 UTC is Monday 05:00 in Kolkata.
    expect(isoWeekOf('2027-01-03T23:30:00Z', 'Asia/Kolkata')).toBe('2027-W01');
  });

  it('dayBefore steps back one calendar day', () => {
    expect(dayBefore('2026-03-30')).toBe('2026-03-29');
    expect(dayBefore('2026-03-01')).toBe('2026-02-28');
    expect(dayBefore('2024-03-01')).toBe('2024-02-29');
    expect(dayBefore('2027-01-01')).toBe('2026-12-31');
  });

  it.each([
    ['open', 'open', 'open'],
    ['daily', '2026-12-31', '2027-01-01'],
    ['weekly', '2026-W53', '2026-W53'],
    ['monthly', '2026-12', '2027-01'],
    ['yearly', '2026', '2027'],
  ] as const)('completionPeriodKey %s of 2026-12-31T20:00Z is %s in UTC and %s in Kolkata', (period, inUtc, inKolkata) => {
    expect(completionPeriodKey(period, 'UTC', '2026-12-31T20:00:00Z')).toBe(inUtc);
    expect(completionPeriodKey(period, 'Asia/Kolkata', '2026-12-31T20:00:00Z')).toBe(inKolkata);
  });

  it('isTimeZone accepts IANA zones only', () => {
    expect(['UTC', 'Europe/Paris', 'Asia/Kolkata', 'America/New_York'].map(isTimeZone)).toEqual([true, true, true, true]);
    expect(['', 'Paris', 'Mars/Olympus'].map(isTimeZone)).toEqual([false, false, false]);
  });
});
