import { IANAZone } from 'luxon';
import { describe, expect, it } from 'vitest';
import { leaderboardWindowAt, localDate, type WindowedLeaderboard } from '../domain/windows.ts';
import { leaderboardWindowOf, localDateOf } from '../projectors/local-dates.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Deterministic pseudo-random numbers, so a failure names an instant that fails again. */
function random(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
}

/** The instants around each change of offset in `zone` during 2027, every 30 minutes from half a day before to half a day after. */
function aroundTransitions(zone: string): number[] {
  const offsets = IANAZone.create(zone);
  const instants: number[] = [];
  // A week at a time, then the week's days where the offset changed within it.
  for (let week = Date.UTC(2027, 0, 1); week < Date.UTC(2028, 0, 1); week += 7 * DAY) {
    if (offsets.offset(week) === offsets.offset(week + 7 * DAY)) continue;
    for (let day = week; day < week + 7 * DAY; day += DAY) {
      if (offsets.offset(day) === offsets.offset(day + DAY)) continue;
      for (let at = day - DAY / 2; at < day + DAY + DAY / 2; at += 30 * 60_000) instants.push(at);
    }
  }
  return instants;
}

describe('localDateOf', () => {
  const zones = Intl.supportedValuesOf('timeZone');

  it('gives the local date localDate gives, in every time zone, at random instants and across every change of offset', () => {
    const next = random(7);
    const mismatches: string[] = [];
    for (const zone of zones) {
      const random = Array.from({ length: 20 }, () => new Date(Date.UTC(2000, 0, 1) + Math.floor(next() * 40 * 365 * DAY)).toISOString());
      const instants = [...aroundTransitions(zone).map((millis) => new Date(millis).toISOString()), ...random, ...random.map((iso) => `${iso.slice(0, 19)}Z`)];
      for (const instant of instants) {
        if (localDateOf(instant, zone) !== localDate(instant, zone)) mismatches.push(`${zone} ${instant}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('answers like localDate for the names luxon reads specially and for instants that are not plain UTC', () => {
    const instant = '2027-03-14T04:30:00.000Z';
    for (const zone of ['UTC', 'utc', 'GMT', 'UTC+3', 'UTC-09:30', 'Etc/GMT+12', 'Asia/Kathmandu', 'Australia/Lord_Howe']) {
      expect(localDateOf(instant, zone), zone).toBe(localDate(instant, zone));
    }
    for (const other of ['2027-03-14T04:30:00+05:00', '2027-03-14T23:30:00.123456Z', '2027-03-14']) {
      expect(localDateOf(other, 'America/New_York'), other).toBe(localDate(other, 'America/New_York'));
    }
  });

  it('answers like localDate at the edges of its own reading: leap days, the years it leaves to luxon, fields out of range, one instant in two zones', () => {
    /** The date, or the kind of error thrown. */
    const outcome = (read: (instant: string, zone: string) => string, instant: string, zone: string) => {
      try {
        return read(instant, zone);
      } catch (error) {
        return error instanceof RangeError ? 'RangeError' : 'other';
      }
    };
    const cases: [string, string][] = [
      ['2028-02-29T12:00:00.000Z', 'UTC'],
      ['2027-02-29T12:00:00.000Z', 'UTC'],
      ['2100-02-29T12:00:00Z', 'UTC'],
      ['2000-02-29T23:30:00Z', 'Asia/Tokyo'],
      ['2027-04-31T00:00:00.000Z', 'UTC'],
      ['2027-13-01T00:00:00.000Z', 'UTC'],
      ['2027-00-10T00:00:00.000Z', 'UTC'],
      ['2027-01-00T00:00:00.000Z', 'UTC'],
      ['2027-01-10T10:60:00.000Z', 'UTC'],
      ['2027-01-10T10:00:60.000Z', 'UTC'],
      ['2027-01-10T10:00:00.5Z', 'UTC'],
      ['0999-06-01T00:00:00.000Z', 'UTC'],
      ['1000-01-01T02:00:00.000Z', 'America/New_York'],
      ['9999-12-31T22:00:00.000Z', 'Asia/Tokyo'],
      ['2027-03-14T04:30:00.000Z', 'Pacific/Kiritimati'],
      ['2027-03-14T04:30:00.000Z', 'Pacific/Niue'],
      ['2027-03-14T04:30:00.000Z', 'Pacific/Kiritimati'],
    ];
    for (const [instant, zone] of cases) expect(outcome(localDateOf, instant, zone), `${instant} in ${zone}`).toBe(outcome(localDate, instant, zone));
  });

  it('refuses what localDate refuses, and reads what it reads (hour 24 is the next midnight)', () => {
    expect(() => localDateOf('2027-02-30T00:00:00.000Z', 'UTC')).toThrow(RangeError);
    expect(() => localDateOf('not a date', 'UTC')).toThrow(RangeError);
    expect(() => localDateOf('2027-03-14T04:30:00.000Z', 'Fantasia/Castle')).toThrow(RangeError);
    expect(localDateOf('2027-03-14T24:00:00.000Z', 'UTC')).toBe(localDate('2027-03-14T24:00:00.000Z', 'UTC'));
  });
});

describe('leaderboardWindowOf', () => {
  it('finds the window leaderboardWindowAt finds, for every period, across changes of offset, asked in any order and again', () => {
    const next = random(11);
    const zones = ['UTC', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kathmandu'];
    const leaderboards: WindowedLeaderboard[] = [];
    for (const period of ['daily', 'weekly', 'monthly', 'yearly', 'open'] as const) {
      leaderboards.push({ period, startsAt: '2027-01-01T00:00:00.000Z', expiresAt: null });
      leaderboards.push({ period, startsAt: '2027-02-10T13:30:00.000Z', expiresAt: '2027-11-20T07:00:00.000Z' });
    }
    const mismatches: string[] = [];
    for (const zone of zones) {
      const instants = [...aroundTransitions(zone), ...Array.from({ length: 60 }, () => Date.UTC(2026, 11, 1) + Math.floor(next() * 400 * DAY))].map((millis) =>
        new Date(millis).toISOString(),
      );
      // Twice, the second time shuffled: answers from the cache must not depend on what was asked before.
      const shuffled = [...instants].sort(() => next() - 0.5);
      for (const instant of [...instants, ...shuffled, '2027-03-14T04:30:00+05:00', '2027-03-14T04:30:00']) {
        for (const leaderboard of leaderboards) {
          const expected = leaderboardWindowAt(leaderboard, zone, instant);
          if (JSON.stringify(leaderboardWindowOf(leaderboard, zone, instant)) !== JSON.stringify(expected)) {
            mismatches.push(`${zone} ${leaderboard.period} ${leaderboard.startsAt} ${instant}`);
          }
        }
      }
    }
    expect(mismatches).toEqual([]);
  });
});
