import { describe, expect, it } from 'vitest';
import type { MetricType } from '../domain/leaderboard.ts';
import { rankStandings, scoreFacts, type MetricFact } from '../domain/standings.ts';

const started = (userId: string, occurredAt: string, challengeId: string): MetricFact => ({ userId, occurredAt, kind: 'challenge-started', challengeId });
const acted = (userId: string, occurredAt: string, challengeId = 'c1'): MetricFact => ({ userId, occurredAt, kind: 'action-completed', challengeId });
const completed = (userId: string, occurredAt: string, challengeId: string): MetricFact => ({ userId, occurredAt, kind: 'challenge-completed', challengeId });
const xp = (userId: string, occurredAt: string, amount: number, fromLeaderboard = false): MetricFact => ({
  userId,
  occurredAt,
  kind: 'xp',
  amount,
  fromLeaderboard,
});

// One week (Monday 2026-05-04 to Tuesday 2026-05-05, UTC): ann completes c1 twice and c2 once, bob acts once, cem only starts.
const facts: MetricFact[] = [
  started('ann', '2026-05-04T10:00:00.000Z', 'c1'),
  acted('ann', '2026-05-04T10:05:00.000Z'),
  xp('ann', '2026-05-04T10:05:00.000Z', 10),
  completed('ann', '2026-05-04T10:05:00.000Z', 'c1'),
  started('bob', '2026-05-04T11:00:00.000Z', 'c1'),
  acted('bob', '2026-05-04T11:00:00.000Z'),
  xp('bob', '2026-05-04T11:00:00.000Z', 30),
  completed('ann', '2026-05-04T20:00:00.000Z', 'c2'),
  xp('ann', '2026-05-05T09:00:00.000Z', 100, true),
  started('ann', '2026-05-05T09:30:00.000Z', 'c1'),
  acted('ann', '2026-05-05T09:30:00.000Z'),
  completed('ann', '2026-05-05T09:30:00.000Z', 'c1'),
  xp('ann', '2026-05-05T09:30:00.000Z', 10),
  started('cem', '2026-05-05T12:00:00.000Z', 'c2'),
];

describe('scoreFacts', () => {
  it.each<[MetricType, [number, string], [number, string], [number, string]]>([
    // The 100 leaderboard XP are left out: 10 + 10.
    ['total-xp', [20, '2026-05-05T09:30:00.000Z'], [30, '2026-05-04T11:00:00.000Z'], [0, '2026-05-05T12:00:00.000Z']],
    ['total-actions-completed', [2, '2026-05-05T09:30:00.000Z'], [1, '2026-05-04T11:00:00.000Z'], [0, '2026-05-05T12:00:00.000Z']],
    ['total-challenges-started', [2, '2026-05-05T09:30:00.000Z'], [1, '2026-05-04T11:00:00.000Z'], [1, '2026-05-05T12:00:00.000Z']],
    ['total-challenges-completed', [3, '2026-05-05T09:30:00.000Z'], [0, '2026-05-04T11:00:00.000Z'], [0, '2026-05-05T12:00:00.000Z']],
    // c1 again on 05-05 adds nothing, so ann reached 2 with c2.
    ['unique-challenges-completed', [2, '2026-05-04T20:00:00.000Z'], [0, '2026-05-04T11:00:00.000Z'], [0, '2026-05-05T12:00:00.000Z']],
    ['qualifying-active-days', [2, '2026-05-05T09:30:00.000Z'], [1, '2026-05-04T11:00:00.000Z'], [0, '2026-05-05T12:00:00.000Z']],
    // Both of ann's days are in 2026-W19.
    ['consistent-weeks', [1, '2026-05-04T10:05:00.000Z'], [1, '2026-05-04T11:00:00.000Z'], [0, '2026-05-05T12:00:00.000Z']],
  ])('%s: ann %j, bob %j, cem %j', (metricType, ann, bob, cem) => {
    expect(scoreFacts(metricType, [...facts].reverse(), 'UTC')).toEqual([
      { userId: 'ann', score: ann[0], reachedAt: ann[1] },
      { userId: 'bob', score: bob[0], reachedAt: bob[1] },
      { userId: 'cem', score: cem[0], reachedAt: cem[1] },
    ]);
  });

  it('qualifying-active-days counts local dates: 23:30 UTC is the next day in Asia/Kolkata', () => {
    const dayAndLateEvening = [acted('dia', '2026-05-04T10:00:00.000Z'), acted('dia', '2026-05-04T23:30:00.000Z')];
    expect(scoreFacts('qualifying-active-days', dayAndLateEvening, 'UTC')).toEqual([{ userId: 'dia', score: 1, reachedAt: '2026-05-04T10:00:00.000Z' }]);
    expect(scoreFacts('qualifying-active-days', dayAndLateEvening, 'Asia/Kolkata')).toEqual([
      { userId: 'dia', score: 2, reachedAt: '2026-05-04T23:30:00.000Z' },
    ]);
  });

  it('consistent-weeks counts ISO weeks across a new year: 2026-12-28 and 2027-01-03 are both 2026-W53', () => {
    const acrossNewYear = [
      acted('eve', '2026-12-28T09:00:00.000Z'),
      acted('eve', '2027-01-03T09:00:00.000Z'),
      acted('eve', '2027-01-04T09:00:00.000Z'),
      acted('eve', '2027-01-12T09:00:00.000Z'),
    ];
    expect(scoreFacts('consistent-weeks', acrossNewYear, 'UTC')).toEqual([{ userId: 'eve', score: 3, reachedAt: '2027-01-12T09:00:00.000Z' }]);
  });

  it('no facts, no scores', () => {
    expect(scoreFacts('total-xp', [], 'UTC')).toEqual([]);
  });
});

describe('rankStandings', () => {
  it('ranks by score, leaving zero scores unranked', () => {
    expect(rankStandings(scoreFacts('total-xp', facts, 'UTC'))).toEqual([
      { rank: 1, userId: 'bob', score: 30, reachedAt: '2026-05-04T11:00:00.000Z' },
      { rank: 2, userId: 'ann', score: 20, reachedAt: '2026-05-05T09:30:00.000Z' },
    ]);
  });

  it('breaks ties by who reached the score first, then by userId', () => {
    const standings = rankStandings([
      { userId: 'user-9', score: 5, reachedAt: '2026-05-04T10:00:00.000Z' },
      { userId: 'user-10', score: 5, reachedAt: '2026-05-04T10:00:00.000Z' },
      // 09:00 UTC, earlier than 09:30 UTC though it reads later.
      { userId: 'zoe', score: 5, reachedAt: '2026-05-04T11:00:00.000+02:00' },
      { userId: 'amy', score: 5, reachedAt: '2026-05-04T09:30:00.000Z' },
      { userId: 'max', score: 8, reachedAt: '2026-05-04T12:00:00.000Z' },
      { userId: 'nil', score: 0, reachedAt: '2026-05-04T08:00:00.000Z' },
      { userId: 'neg', score: -3, reachedAt: '2026-05-04T08:00:00.000Z' },
    ]);
    expect(standings.map(({ rank, userId }) => [rank, userId])).toEqual([
      [1, 'max'],
      [2, 'zoe'],
      [3, 'amy'],
      // Plain string order: '1' < '9'.
      [4, 'user-10'],
      [5, 'user-9'],
    ]);
  });
});
