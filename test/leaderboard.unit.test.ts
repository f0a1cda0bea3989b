import { describe, expect, it } from 'vitest';
import {
  distributionProblems,
  evolveLeaderboardConfig,
  leaderboardDecider,
  LEADERBOARD_STATUSES,
  LEGAL_TRANSITIONS,
  metricFitsPeriod,
  METRIC_TYPES,
  PERIODS,
  type LeaderboardCommand,
  type LeaderboardEvent,
  type LeaderboardStatus,
  type RankDistribution,
} from '../domain/leaderboard.ts';
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
const create = (overrides: Partial<Extract<LeaderboardCommand, { type: 'CreateLeaderboard' }>['data']> = {}): LeaderboardCommand => ({
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

const later = '2026-01-02T09:00:00.000Z';
const createdAs = (status: LeaderboardStatus): LeaderboardEvent => ({ type: 'LeaderboardCreated', data: { ...created.data, status } });
const update = (changes: { status?: LeaderboardStatus; edits?: Record<string, unknown>; organisationId?: string } = {}): LeaderboardCommand => ({
  type: 'UpdateLeaderboard',
  data: {
    ...ids,
    organisationId: changes.organisationId ?? ids.organisationId,
    ...(changes.status ? { status: changes.status } : {}),
    edits: changes.edits ?? {},
    actor: 'token-2',
    now: later,
  },
});
const statusChanged = (from: LeaderboardStatus, to: LeaderboardStatus): LeaderboardEvent => ({
  type: 'LeaderboardStatusChanged',
  data: { ...ids, from, to, changedBy: 'token-2', changedAt: later },
});
const updated = (changes: Record<string, unknown>): LeaderboardEvent => ({
  type: 'LeaderboardUpdated',
  data: { ...ids, changes, updatedBy: 'token-2', updatedAt: later },
});

describe('leaderboard decider: status changes', () => {
  const pairs = LEADERBOARD_STATUSES.flatMap((from) => LEADERBOARD_STATUSES.filter((to) => to !== from).map((to) => [from, to] as const));
  const legal = pairs.filter(([from, to]) => LEGAL_TRANSITIONS[from].includes(to));
  const illegal = pairs.filter(([from, to]) => !LEGAL_TRANSITIONS[from].includes(to));

  it('allows exactly the admin transitions of the brief', () => {
    expect(legal.map(([from, to]) => `${from}→${to}`).sort()).toEqual(
      [
        'draft→scheduled',
        'draft→live',
        'draft→archived',
        'scheduled→draft',
        'scheduled→live',
        'scheduled→archived',
        'live→expired',
        'live→archived',
        'expired→archived',
      ].sort(),
    );
  });

  it.each(legal)('%s → %s is recorded as LeaderboardStatusChanged', (from, to) => {
    given(leaderboardDecider, [createdAs(from)])
      .when(update({ status: to }))
      .then([statusChanged(from, to)]);
  });

  it.each(illegal)('%s → %s is a conflict naming both states', (from, to) => {
    given(leaderboardDecider, [createdAs(from)])
      .when(update({ status: to }))
      .thenRefuses('conflict', new RegExp(`from ${from} to ${to}`));
  });

  it.each(LEADERBOARD_STATUSES.map((status) => [status]))('the current status again (%s) changes nothing', (status) => {
    given(leaderboardDecider, [createdAs(status)])
      .when(update({ status }))
      .then([]);
  });

  it('follows the status through earlier changes', () => {
    given(leaderboardDecider, [createdAs('draft'), statusChanged('draft', 'live')])
      .when(update({ status: 'scheduled' }))
      .thenRefuses('conflict', /from live to scheduled/);
  });

  it('refuses an unknown leaderboard as not found', () => {
    given(leaderboardDecider, [])
      .when(update({ status: 'live' }))
      .thenRefuses('not_found', /not found/);
  });

  it('refuses another organisation’s leaderboard as not found', () => {
    given(leaderboardDecider, [createdAs('draft')])
      .when(update({ status: 'live', organisationId: 'd'.repeat(24) }))
      .thenRefuses('not_found', /not found/);
  });
});

describe('leaderboard decider: editing the definition', () => {
  const edits = { name: 'Renamed', description: 'New words', expiresAt: '2026-06-01T00:00:00.000Z', conditions: [] };

  it.each([['draft' as const], ['scheduled' as const]])('changes name, description, expiresAt and conditions while %s', (status) => {
    given(leaderboardDecider, [createdAs(status)])
      .when(update({ edits }))
      .then([updated(edits)]);
  });

  it.each([['live' as const], ['expired' as const], ['archived' as const]])('refuses to change the definition while %s', (status) => {
    given(leaderboardDecider, [createdAs(status)])
      .when(update({ edits: { name: 'Renamed' } }))
      .thenRefuses('conflict', new RegExp(`name can only be changed while the leaderboard is draft or scheduled; it is ${status}`));
  });

  it('records only the fields that differ, whatever the key order of a condition', () => {
    const sameConditions = [{ communityId: 'a'.repeat(24), type: 'community' }];
    given(leaderboardDecider, [createdAs('draft')])
      .when(update({ edits: { name: definition.name, description: 'New words', conditions: sameConditions } }))
      .then([updated({ description: 'New words' })]);
  });

  it('treats values equal to the current ones as no change, even when the status forbids changes', () => {
    given(leaderboardDecider, [createdAs('live')])
      .when(update({ status: 'archived', edits: { name: definition.name, expiresAt: null } }))
      .then([statusChanged('live', 'archived')]);
  });

  it('clears description and expiresAt with null', () => {
    given(leaderboardDecider, [
      { type: 'LeaderboardCreated', data: { ...created.data, status: 'draft', description: 'x', expiresAt: '2026-06-01T00:00:00.000Z' } },
    ])
      .when(update({ edits: { description: null, expiresAt: null } }))
      .then([updated({ description: null, expiresAt: null })]);
  });

  it('refuses an expiry at or before the start', () => {
    given(leaderboardDecider, [createdAs('scheduled')])
      .when(update({ edits: { expiresAt: definition.startsAt } }))
      .thenRefuses('invalid', /expiresAt: must be after startsAt/);
  });

  it('edits judged on the status before the request, then the transition: both events, in that order', () => {
    given(leaderboardDecider, [createdAs('scheduled')])
      .when(update({ status: 'live', edits: { name: 'Renamed' } }))
      .then([updated({ name: 'Renamed' }), statusChanged('scheduled', 'live')]);
  });

  it('an edit with an illegal transition appends nothing', () => {
    given(leaderboardDecider, [createdAs('draft')])
      .when(update({ status: 'expired', edits: { name: 'Renamed' } }))
      .thenRefuses('conflict', /from draft to expired/);
  });

  it('evolves edits and status changes into the state', () => {
    const state = [createdAs('draft'), updated({ name: 'Renamed' }), statusChanged('draft', 'live')].reduce(
      leaderboardDecider.evolve,
      leaderboardDecider.initialState,
    );
    expect(state).toMatchObject({ exists: true, name: 'Renamed', status: 'live' });
  });
});

const allocation = { id: 'e'.repeat(24), rewardId: 'f'.repeat(24), supply: 10, amountToDistribute: 1 };
const range = (
  startRank: number,
  endRank: number,
  distributionEventId = `${startRank}`.padStart(24, '0'),
  allocations = [] as (typeof allocation)[],
): RankDistribution => ({
  startRank,
  endRank,
  distributionEventId,
  pointsToDistribute: 100,
  bonusXpToDistribute: 50,
  rewardsConfig: { amountToDistribute: 1, allocations },
});
const assign = (rewards: RankDistribution[], organisationId = ids.organisationId): LeaderboardCommand => ({
  type: 'AssignLeaderboardRewards',
  data: { ...ids, organisationId, rewards, actor: 'token-2', now: later },
});
const assigned = (rewards: RankDistribution[]): LeaderboardEvent => ({
  type: 'LeaderboardRewardsAssigned',
  data: { ...ids, rewards, assignedBy: 'token-2', assignedAt: later },
});

describe('leaderboard decider: rank-range distributions', () => {
  it.each([['draft' as const], ['scheduled' as const], ['live' as const]])('assigns a distribution while %s, ranges sorted by start rank', (status) => {
    given(leaderboardDecider, [createdAs(status)])
      .when(assign([range(4, 10), range(1, 1, undefined, [allocation]), range(2, 3)]))
      .then([assigned([range(1, 1, undefined, [allocation]), range(2, 3), range(4, 10)])]);
  });

  it('assigns an empty distribution, which removes the ranges', () => {
    given(leaderboardDecider, [createdAs('live'), assigned([range(1, 3)])])
      .when(assign([]))
      .then([assigned([])]);
  });

  it.each([['archived' as const], ['expired' as const]])('refuses a new distribution while %s', (status) => {
    given(leaderboardDecider, [createdAs(status)])
      .when(assign([range(1, 3)]))
      .thenRefuses('conflict', new RegExp(`${status} accepts no new distribution`));
  });

  it('refuses a distribution once the leaderboard has been archived', () => {
    given(leaderboardDecider, [createdAs('live'), statusChanged('live', 'archived')])
      .when(assign([range(1, 3)]))
      .thenRefuses('conflict', /archived accepts no new distribution/);
  });

  it('refuses overlapping rank ranges, naming both entries', () => {
    given(leaderboardDecider, [createdAs('live')])
      .when(assign([range(1, 5), range(5, 8)]))
      .thenRefuses('invalid', /rewards\.1 \(ranks 5-8\) overlaps rewards\.0 \(ranks 1-5\)/);
  });

  it('refuses a range that contains another', () => {
    given(leaderboardDecider, [createdAs('live')])
      .when(assign([range(3, 4), range(1, 10)]))
      .thenRefuses('invalid', /rewards\.1 \(ranks 1-10\) overlaps rewards\.0 \(ranks 3-4\)/);
  });

  it('refuses an end rank before the start rank', () => {
    given(leaderboardDecider, [createdAs('live')])
      .when(assign([range(5, 4)]))
      .thenRefuses('invalid', /rewards\.0\.endRank: must be >= startRank/);
  });

  it.each([
    [0, 1, 'startRank'],
    [1, 0, 'endRank'],
    [1.5, 2, 'startRank'],
    [-2, 3, 'startRank'],
  ])('refuses ranks that are not integers >= 1 (%s-%s)', (startRank, endRank, field) => {
    given(leaderboardDecider, [createdAs('live')])
      .when(assign([range(startRank, endRank)]))
      .thenRefuses('invalid', new RegExp(`rewards\\.0\\.${field}: must be an integer >= 1`));
  });

  it('refuses one allocation id in two places', () => {
    given(leaderboardDecider, [createdAs('live')])
      .when(assign([range(1, 1, undefined, [allocation]), range(2, 2, undefined, [{ ...allocation, id: allocation.id.toUpperCase() }])]))
      .thenRefuses('invalid', /rewards\.1\.rewardsConfig\.allocations\.0\.id: e{24} is also used by rewards\.0\.rewardsConfig\.allocations\.0/);
  });

  it('refuses an unknown or another organisation’s leaderboard as not found', () => {
    given(leaderboardDecider, [])
      .when(assign([range(1, 1)]))
      .thenRefuses('not_found', /not found/);
    given(leaderboardDecider, [createdAs('live')])
      .when(assign([range(1, 1)], 'd'.repeat(24)))
      .thenRefuses('not_found', /not found/);
  });

  it('evolves the rank ranges into rewardsConfig, replacing the previous ones', () => {
    const state = [createdAs('live'), assigned([range(1, 3), range(4, 9)]), assigned([range(1, 1, 'a'.repeat(24))])].reduce(
      leaderboardDecider.evolve,
      leaderboardDecider.initialState,
    );
    expect(state).toMatchObject({ rewardsConfig: [{ startRank: 1, endRank: 1, distributionEventId: 'a'.repeat(24) }] });
  });

  it('names every range a wide range covers', () => {
    expect(distributionProblems([range(1, 10), range(2, 3), range(4, 5)]).map((problem) => problem.message)).toEqual([
      'rewards.1 (ranks 2-3) overlaps rewards.0 (ranks 1-10)',
      'rewards.2 (ranks 4-5) overlaps rewards.0 (ranks 1-10)',
    ]);
  });

  it('finds no problem in adjacent ranges given in any order', () => {
    expect(distributionProblems([range(11, 20), range(1, 1), range(2, 10)])).toEqual([]);
  });
});

describe('the admin view of a leaderboard config', () => {
  it('follows creation, edits, status changes and distributions, with who changed it last', () => {
    const config = [
      created,
      updated({ name: 'Renamed' }),
      statusChanged('live', 'archived'),
      { ...assigned([range(4, 9), range(1, 3)]), data: { ...assigned([range(4, 9), range(1, 3)]).data, assignedBy: 'token-3' } } as LeaderboardEvent,
    ].reduce(evolveLeaderboardConfig, null);
    expect(config).toEqual({
      id: ids.leaderboardId,
      organisationId: ids.organisationId,
      ...definition,
      name: 'Renamed',
      status: 'archived',
      rewardsConfig: [
        { startRank: 1, endRank: 3, distributionEventId: range(1, 3).distributionEventId },
        { startRank: 4, endRank: 9, distributionEventId: range(4, 9).distributionEventId },
      ],
      createdAt: created.data.createdAt,
      createdBy: 'token-1',
      updatedAt: later,
      updatedBy: 'token-3',
    });
  });
});
