import { describe, expect, it } from 'vitest';
import { leaderboardDecider, metricFitsPeriod, METRIC_TYPES, PERIODS, type LeaderboardCommand, type LeaderboardEvent } from '../domain/leaderboard.ts';
import { given } from './support/decider-spec.ts';

const definition = {
  name: 'Weekly XP',
  description: null,
  metricType: 'total-xp' as const,
  period: 'weekly' as const,
  startsAt: '2026-01-05T00:00:00.000Z',
  expiresAt: null,
  status: 'live' as const,
  conditions: [{ type: 'community' as const, communityId: 'a'.repeat(24) }],
};
const ids = { leaderboardId: 'b'.repeat(24), organisationId: 'c'.repeat(24) };
const create = (overrides: Partial<LeaderboardCommand['data']> = {}): LeaderboardCommand => ({
  type: 'CreateLeaderboard',
  data: { ...definition, ...ids, actor: 'token-1', now: '2026-01-01T10:00:00.000Z', ...overrides },
});
const created: LeaderboardEvent = { type: 'LeaderboardCreated', data: { ...definition, ...ids, createdBy: 'token-1', createdAt: '2026-01-01T10:00:00.000Z' } };

describe('leaderboard decider', () => {
  it('creates a leaderboard that does not exist yet', () => {
    given(leaderboardDecider, []).when(create()).then([created]);
  });

  it('refuses to create one twice', () => {
    given(leaderboardDecider, [created])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses an expiry at or before the start', () => {
    given(leaderboardDecider, [])
      .when(create({ expiresAt: definition.startsAt }))
      .thenRefuses('invalid', /expiresAt must be after startsAt/);
  });

  it('refuses a metric that cannot vary within the period', () => {
    given(leaderboardDecider, [])
      .when(create({ metricType: 'consistent-weeks', period: 'weekly' }))
      .thenRefuses('invalid', /cannot vary/);
  });

  it('evolves into the configured leaderboard with no rank rewards yet', () => {
    const state = leaderboardDecider.evolve(leaderboardDecider.initialState, created);
    expect(state).toEqual({ exists: true, ...definition, ...ids, rewardsConfig: [] });
  });
});

describe('which metrics fit which periods', () => {
  it('rejects exactly the three combinations that cannot vary (DESIGN §6)', () => {
    const refused = METRIC_TYPES.flatMap((metric) => PERIODS.filter((period) => !metricFitsPeriod(metric, period)).map((period) => `${metric}/${period}`));
    expect(refused.sort()).toEqual(['consistent-weeks/daily', 'consistent-weeks/weekly', 'qualifying-active-days/daily']);
  });
});
