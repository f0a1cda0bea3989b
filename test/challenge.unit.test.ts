import { describe, expect, it } from 'vitest';
import {
  challengeDecider,
  criterionProblem,
  xpConfigOf,
  type Action,
  type ActionReplacement,
  type ChallengeCommand,
  type ChallengeDefinition,
  type ChallengeEvent,
  type Criterion,
} from '../domain/challenge.ts';
import type { DistributionEntry } from '../domain/distribution-entry.ts';
import { given } from './support/decider-spec.ts';

const none = { primaryImageUrl: '', secondaryImageUrl: '' };
const details = (title: string) => [{ language: 'en', title, description: '', light: none, dark: none }];
const ids = { challengeId: 'a'.repeat(24), organisationId: 'b'.repeat(24) };
const otherOrganisation = 'f'.repeat(24);
const distribution: DistributionEntry = {
  pointsToDistribute: 5,
  bonusXpToDistribute: 1,
  rewardsConfig: { amountToDistribute: 1, allocations: [{ id: '1'.repeat(24), rewardId: '2'.repeat(24), supply: 10, amountToDistribute: 1 }] },
};
const action = (n: number, overrides: Partial<Action> = {}): Action => ({
  actionId: String(n).repeat(24),
  key: `action-${n}`,
  category: 'knowledge',
  criteria: [],
  xp: 10,
  isSkippable: false,
  details: details(`Action ${n}`),
  distribution: null,
  ...overrides,
});
const definition: ChallengeDefinition = {
  communityId: 'c'.repeat(24),
  details: details('Coffee'),
  actions: [action(3, { distribution }), action(4, { category: 'loyalty', isSkippable: true })],
  isLinear: true,
  maxCompletionsPerPeriod: 1,
  period: 'open',
  startsAt: '2026-03-01T00:00:00.000Z',
  expiresAt: '2026-04-01T00:00:00.000Z',
  tags: [],
  campaigns: [],
  rewardDistribution: { points: 10, xp: 5, distributionEventId: 'd'.repeat(24), rewardAllocations: [], numberOfRewardsToReceive: 0 },
  isGlobalTemplate: false,
  availableAsTemplateForOrganisations: [],
  featured: false,
  unlockPrice: 0,
  videoConfig: { videoUrl: '', isVideoEnabled: false },
};
const beforeStart = '2026-02-01T00:00:00.000Z';
const afterStart = '2026-03-15T00:00:00.000Z';
const create = (overrides: Partial<ChallengeDefinition> = {}): ChallengeCommand => ({
  type: 'CreateChallenge',
  data: { ...definition, ...ids, actor: 'token-1', now: beforeStart, ...overrides },
});
const created = (overrides: Partial<ChallengeDefinition> = {}): ChallengeEvent => ({
  type: 'ChallengeCreated',
  data: { ...definition, ...ids, createdBy: 'token-1', createdAt: beforeStart, ...overrides },
});
const update = (
  changes: Extract<ChallengeCommand, { type: 'UpdateChallenge' }>['data']['changes'],
  now = beforeStart,
  organisationId = ids.organisationId,
): ChallengeCommand => ({
  type: 'UpdateChallenge',
  data: { ...ids, organisationId, changes, actor: 'token-2', now },
});
const updated = (changes: Partial<ChallengeDefinition>, now = beforeStart): ChallengeEvent => ({
  type: 'ChallengeUpdated',
  data: { ...ids, changes, updatedBy: 'token-2', updatedAt: now },
});
const replacement = (a: Action, kept: boolean, distributionChange?: DistributionEntry | null): ActionReplacement => ({
  ...a,
  kept,
  distribution: distributionChange,
});
const withCriterion = (criterion: Criterion) => create({ actions: [action(3, { criteria: [criterion] })] });

describe('challenge decider: creating', () => {
  it('creates a challenge that does not exist yet, its actions in the given order', () => {
    given(challengeDecider, []).when(create()).then([created()]);
  });

  it('refuses to create one twice', () => {
    given(challengeDecider, [created()])
      .when(create())
      .thenRefuses('conflict', /already exists/);
  });

  it('refuses a challenge without actions', () => {
    given(challengeDecider, [])
      .when(create({ actions: [] }))
      .thenRefuses('invalid', /at least one action/);
  });

  it('refuses two actions with the same key', () => {
    given(challengeDecider, [])
      .when(create({ actions: [action(3), action(4, { key: 'action-3' })] }))
      .thenRefuses('invalid', /actions\.1\.key: "action-3" is already the key of action 0/);
  });

  it('treats keys that differ only in case as different keys (event names match exactly)', () => {
    const actions = [action(3, { key: 'Visit' }), action(4, { key: 'visit' })];
    given(challengeDecider, [])
      .when(create({ actions }))
      .then([created({ actions })]);
  });

  it('refuses a challenge whose every action is skippable, linear or not', () => {
    for (const isLinear of [true, false]) {
      given(challengeDecider, [])
        .when(create({ isLinear, actions: [action(3, { isSkippable: true }), action(4, { isSkippable: true })] }))
        .thenRefuses('invalid', /at least one action must not be skippable/);
    }
  });

  it('accepts skippable actions around a required one, in a linear challenge', () => {
    const actions = [action(3, { isSkippable: true }), action(4), action(5, { isSkippable: true })];
    given(challengeDecider, [])
      .when(create({ isLinear: true, actions }))
      .then([created({ isLinear: true, actions })]);
  });

  it('refuses an expiry at or before the start', () => {
    for (const expiresAt of [definition.startsAt, '2026-02-28T23:59:59.999Z']) {
      given(challengeDecider, [])
        .when(create({ expiresAt }))
        .thenRefuses('invalid', /expiresAt: must be after startsAt/);
    }
  });

  it('refuses maxCompletionsPerPeriod below 1', () => {
    given(challengeDecider, [])
      .when(create({ maxCompletionsPerPeriod: 0 }))
      .thenRefuses('invalid', /maxCompletionsPerPeriod/);
  });

  it('refuses negative XP on an action', () => {
    given(challengeDecider, [])
      .when(create({ actions: [action(3, { xp: -1 })] }))
      .thenRefuses('invalid', /actions\.0\.xp: must be >= 0/);
  });

  it('refuses challenge details without a language, or with one language twice', () => {
    given(challengeDecider, [])
      .when(create({ details: [] }))
      .thenRefuses('invalid', /details: needs details in at least one language/);
    given(challengeDecider, [])
      .when(create({ details: [...details('a'), { ...details('b')[0]!, language: 'EN' }] }))
      .thenRefuses('invalid', /given twice/);
  });

  it('refuses an action distribution with negative amounts or an allocation twice', () => {
    given(challengeDecider, [])
      .when(create({ actions: [action(3, { distribution: { ...distribution, pointsToDistribute: -1 } })] }))
      .thenRefuses('invalid', /actions\.0\.distribution: pointsToDistribute must be >= 0/);
    const allocation = distribution.rewardsConfig.allocations[0]!;
    given(challengeDecider, [])
      .when(
        create({
          actions: [action(3, { distribution: { ...distribution, rewardsConfig: { amountToDistribute: 1, allocations: [allocation, allocation] } } })],
        }),
      )
      .thenRefuses('invalid', /given twice/);
  });

  it('refuses more rewards to receive than reward allocations', () => {
    given(challengeDecider, [])
      .when(create({ rewardDistribution: { ...definition.rewardDistribution, numberOfRewardsToReceive: 1 } }))
      .thenRefuses('invalid', /numberOfRewardsToReceive/);
  });

  it('refuses an enabled video without a URL', () => {
    given(challengeDecider, [])
      .when(create({ videoConfig: { videoUrl: '', isVideoEnabled: true } }))
      .thenRefuses('invalid', /videoConfig\.videoUrl/);
  });
});

describe('challenge decider: criteria, per operator', () => {
  const accepted: Criterion[] = [
    { field: 'a', operator: 'eq', value: 'x' },
    { field: 'a', operator: 'eq', value: 0 },
    { field: 'a', operator: 'neq', value: false },
    { field: 'a', operator: 'gt', value: 1 },
    { field: 'a', operator: 'gte', value: -2.5 },
    { field: 'a', operator: 'lt', value: 0 },
    { field: 'a', operator: 'lte', value: 100 },
    { field: 'a', operator: 'in', value: ['x', 1, true] },
    { field: 'a', operator: 'exists' },
    { field: 'a', operator: 'exists', value: false },
    { field: 'a.b_c', operator: 'contains', value: 'coffee' },
    { field: 'tags', operator: 'contains', value: 3 },
  ];
  it.each(accepted.map((c) => [`${c.operator} ${JSON.stringify(c.value)}`, c] as const))('accepts %s', (_name, criterion) => {
    const actions = [action(3, { criteria: [criterion] })];
    given(challengeDecider, [])
      .when(create({ actions }))
      .then([created({ actions })]);
  });

  const refused: [string, Criterion][] = [
    ['eq without a value', { field: 'a', operator: 'eq' }],
    ['eq with an array', { field: 'a', operator: 'eq', value: ['x'] }],
    ['neq without a value', { field: 'a', operator: 'neq' }],
    ['gt with a string', { field: 'a', operator: 'gt', value: '1' }],
    ['gte without a value', { field: 'a', operator: 'gte' }],
    ['lt with a boolean', { field: 'a', operator: 'lt', value: true }],
    ['lte with NaN', { field: 'a', operator: 'lte', value: Number.NaN }],
    ['in with a scalar', { field: 'a', operator: 'in', value: 'x' }],
    ['in with an empty array', { field: 'a', operator: 'in', value: [] }],
    ['in with more than 100 values', { field: 'a', operator: 'in', value: Array.from({ length: 101 }, (_, i) => i) }],
    ['exists with a number', { field: 'a', operator: 'exists', value: 1 }],
    ['contains without a value', { field: 'a', operator: 'contains' }],
    ['contains with an array', { field: 'a', operator: 'contains', value: ['x'] }],
  ];
  it.each(refused)('refuses %s', (_name, criterion) => {
    given(challengeDecider, [])
      .when(withCriterion(criterion))
      .thenRefuses('invalid', /actions\.0\.criteria\.0\.value: /);
  });

  it('refuses a field that is not a dot path', () => {
    for (const field of ['', 'a..b', '.a', 'a b']) {
      expect(criterionProblem({ field, operator: 'exists' })?.path).toEqual(['field']);
    }
    given(challengeDecider, [])
      .when(withCriterion({ field: 'a..b', operator: 'eq', value: 1 }))
      .thenRefuses('invalid', /actions\.0\.criteria\.0\.field/);
  });
});

describe('challenge decider: changing', () => {
  it('refuses to change a challenge that does not exist, or is another organisation’s', () => {
    given(challengeDecider, [])
      .when(update({ featured: true }))
      .thenRefuses('not_found', /not found/);
    given(challengeDecider, [created()])
      .when(update({ featured: true }, beforeStart, otherOrganisation))
      .thenRefuses('not_found', /not found/);
  });

  it('changes details, dates and flags', () => {
    const changes = { details: details('Tea'), expiresAt: '2026-05-01T00:00:00.000Z', featured: true, tags: ['x'] };
    given(challengeDecider, [created()])
      .when(update(changes))
      .then([updated(changes)]);
  });

  it('replaces the actions before the start: a kept action keeps its distribution, a new one has none', () => {
    const [first] = definition.actions;
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(action(7), false), replacement({ ...first!, key: 'renamed' }, true)] }))
      .then([updated({ actions: [action(7), { ...first!, key: 'renamed' }] })]);
  });

  it('a kept action can drop or replace its distribution', () => {
    const [first] = definition.actions;
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(first!, true, null)] }))
      .then([updated({ actions: [{ ...first!, distribution: null }] })]);
  });

  it('refuses to keep an action the challenge does not have, or to list one twice', () => {
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(action(9), true)] }))
      .thenRefuses('invalid', /actions\.0\.id: 9{24} is not an action of this challenge/);
    const [first] = definition.actions;
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(first!, true), replacement({ ...first!, key: 'other' }, true)] }))
      .thenRefuses('invalid', /listed twice/);
  });

  it('applies the action rules to a replacement: unique keys, not all skippable', () => {
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(action(7), false), replacement(action(8, { key: 'action-7' }), false)] }))
      .thenRefuses('invalid', /already the key/);
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(action(7, { isSkippable: true }), false)] }))
      .thenRefuses('invalid', /must not be skippable/);
  });

  it('refuses to replace the actions once the challenge has started', () => {
    given(challengeDecider, [created()])
      .when(update({ actions: [replacement(action(7), false)] }, afterStart))
      .thenRefuses('conflict', /actions and isLinear can no longer change/);
  });

  it('refuses to change isLinear once started, but accepts it unchanged', () => {
    given(challengeDecider, [created()])
      .when(update({ isLinear: false }, afterStart))
      .thenRefuses('conflict', /can no longer change/);
    given(challengeDecider, [created()])
      .when(update({ isLinear: true, featured: true }, afterStart))
      .then([updated({ isLinear: true, featured: true }, afterStart)]);
  });

  it('changes isLinear before the start', () => {
    given(challengeDecider, [created()])
      .when(update({ isLinear: false }))
      .then([updated({ isLinear: false })]);
  });

  it('refuses to move startsAt once started; details and expiry may still change', () => {
    given(challengeDecider, [created()])
      .when(update({ startsAt: '2026-06-01T00:00:00.000Z', expiresAt: '2026-07-01T00:00:00.000Z' }, afterStart))
      .thenRefuses('conflict', /startsAt can no longer change/);
    given(challengeDecider, [created()])
      .when(update({ details: details('Later'), expiresAt: '2026-09-01T00:00:00.000Z' }, afterStart))
      .then([updated({ details: details('Later'), expiresAt: '2026-09-01T00:00:00.000Z' }, afterStart)]);
  });

  it('checks dates against the challenge as it would become', () => {
    given(challengeDecider, [created()])
      .when(update({ expiresAt: '2026-02-15T00:00:00.000Z' }))
      .thenRefuses('invalid', /expiresAt: must be after startsAt/);
    given(challengeDecider, [created()])
      .when(update({ startsAt: '2026-04-02T00:00:00.000Z' }))
      .thenRefuses('invalid', /expiresAt: must be after startsAt/);
  });
});

describe('challenge decider: action distribution', () => {
  const assign = (actionId: string, organisationId = ids.organisationId, entry = distribution): ChallengeCommand => ({
    type: 'AssignActionDistribution',
    data: { ...ids, organisationId, actionId, distribution: entry, actor: 'token-3', now: afterStart },
  });

  it('assigns a distribution to one of the challenge’s actions, even after the start', () => {
    given(challengeDecider, [created()])
      .when(assign('4'.repeat(24)))
      .then([
        {
          type: 'ActionDistributionAssigned',
          data: { ...ids, actionId: '4'.repeat(24), distribution, assignedBy: 'token-3', assignedAt: afterStart },
        },
      ]);
  });

  it('an action the challenge does not have, or another organisation’s, is not found', () => {
    given(challengeDecider, [created()])
      .when(assign('9'.repeat(24)))
      .thenRefuses('not_found', /Action 9{24} not found/);
    given(challengeDecider, [created()])
      .when(assign('4'.repeat(24), otherOrganisation))
      .thenRefuses('not_found', /Challenge/);
    given(challengeDecider, [])
      .when(assign('4'.repeat(24)))
      .thenRefuses('not_found', /Challenge/);
  });

  it('refuses negative amounts', () => {
    given(challengeDecider, [created()])
      .when(assign('4'.repeat(24), ids.organisationId, { ...distribution, bonusXpToDistribute: -1 }))
      .thenRefuses('invalid', /bonusXpToDistribute must be >= 0/);
  });

  it('an action that was removed by a replacement is not found any more', () => {
    given(challengeDecider, [created(), updated({ actions: [action(7)] })])
      .when(assign('4'.repeat(24)))
      .thenRefuses('not_found', /Action/);
  });
});

describe('challenge evolve and derived values', () => {
  it('folds creation, changes and distributions into the record', () => {
    const events: ChallengeEvent[] = [
      created(),
      updated({ featured: true }, '2026-02-02T00:00:00.000Z'),
      {
        type: 'ActionDistributionAssigned',
        data: { ...ids, actionId: '4'.repeat(24), distribution, assignedBy: 'token-3', assignedAt: '2026-02-03T00:00:00.000Z' },
      },
    ];
    const state = events.reduce(challengeDecider.evolve, challengeDecider.initialState);
    expect(state).toMatchObject({
      exists: true,
      featured: true,
      createdBy: 'token-1',
      createdAt: beforeStart,
      updatedBy: 'token-3',
      updatedAt: '2026-02-03T00:00:00.000Z',
    });
    if (!state.exists) throw new Error('no challenge');
    expect(state.actions.map((a) => a.actionId)).toEqual(['3'.repeat(24), '4'.repeat(24)]);
    expect(state.actions[1]!.distribution).toEqual(distribution);
  });

  it('sums XP per category and in total', () => {
    expect(
      xpConfigOf([action(1, { category: 'loyalty', xp: 3 }), action(2, { category: 'loyalty', xp: 4 }), action(3, { category: 'contribution', xp: 1.5 })]),
    ).toEqual({
      total: 8.5,
      knowledge: 0,
      creativity: 0,
      loyalty: 7,
      influence: 0,
      participation: 0,
      contribution: 1.5,
    });
  });
});
