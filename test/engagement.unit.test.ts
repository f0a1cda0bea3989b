import { describe, expect, it } from 'vitest';
import type { Action, ChallengeRecord } from '../domain/challenge.ts';
import type { CustomEventLoggedData } from '../domain/custom-event.ts';
import type { DistributionEntry } from '../domain/distribution-entry.ts';
import {
  CHALLENGE_XP_CATEGORY,
  NO_PROGRESS,
  NO_STREAK,
  decideCustomEvent,
  distributeEntry,
  extendStreak,
  handOut,
  isLive,
  ledgerEvents,
  type AllocationSupply,
  type ChallengeProgress,
  type CustomEventDecision,
  type Outcome,
  type StreakState,
  type Who,
} from '../domain/engagement.ts';
import type { AllocationDistributedEvent, EngagementEvent, PayoutSource } from '../domain/engagement-events.ts';

// ---------------------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------------------

const ORG = 'org-1';
const COMMUNITY = 'community-1';
const OTHER_COMMUNITY = 'community-2';
const USER = 'user-1';
const EVENT_ID = 'event-1';
const CHALLENGE_ID = 'challenge-1';
/** New York is UTC-5 in January: 03:00Z on the 15th is 22:00 on the 14th there. */
const TZ = 'America/New_York';
/** 2026-01-15T03:00Z: the 14th locally, the 15th in UTC. */
const AT = '2026-01-15T03:00:00.000Z';
const LOCAL_DAY = '2026-01-14';

const noImages = { primaryImageUrl: '', secondaryImageUrl: '' };
const details = (title: string) => [{ language: 'en', title, description: '', light: noImages, dark: noImages }];

function action(actionId: string, key: string, overrides: Partial<Action> = {}): Action {
  return { actionId, key, category: 'knowledge', criteria: [], xp: 10, isSkippable: false, details: details(key), distribution: null, ...overrides };
}

/** A challenge of COMMUNITY, live through January 2026, linear, completable once (open period), no rewards. */
function challenge(overrides: Partial<ChallengeRecord> = {}): ChallengeRecord {
  return {
    challengeId: CHALLENGE_ID,
    organisationId: ORG,
    communityId: COMMUNITY,
    details: details('Coffee lover'),
    actions: [action('a1', 'visit-store'), action('a2', 'buy-coffee')],
    isLinear: true,
    maxCompletionsPerPeriod: 1,
    period: 'open',
    startsAt: '2026-01-01T00:00:00.000Z',
    expiresAt: '2026-02-01T00:00:00.000Z',
    tags: [],
    campaigns: [],
    rewardDistribution: { points: 0, xp: 0, distributionEventId: 'distribution-event-1', rewardAllocations: [], numberOfRewardsToReceive: 0 },
    isGlobalTemplate: false,
    availableAsTemplateForOrganisations: [],
    featured: false,
    unlockPrice: 0,
    videoConfig: { videoUrl: '', isVideoEnabled: false },
    createdAt: '2025-12-01T00:00:00.000Z',
    createdBy: 'admin',
    updatedAt: '2025-12-01T00:00:00.000Z',
    updatedBy: 'admin',
    ...overrides,
  };
}

function customEvent(
  name: string,
  occurredAt = AT,
  payload: Record<string, unknown> = {},
  overrides: Partial<CustomEventLoggedData> = {},
): CustomEventLoggedData {
  return {
    eventId: EVENT_ID,
    organisationId: ORG,
    communityId: COMMUNITY,
    userId: USER,
    externalUserId: 'external-1',
    name,
    payload,
    nonce: null,
    source: { type: 'api', tokenId: 'token-1' },
    occurredAt,
    ...overrides,
  };
}

function supply(allocationId: string, overrides: Partial<AllocationSupply> = {}): AllocationSupply {
  return { allocationId, rewardId: `reward-of-${allocationId}`, rewardKind: 'asset', supply: 10, distributed: 0, drawsAt: null, ...overrides };
}

function allocationMap(...supplies: AllocationSupply[]): Map<string, AllocationSupply> {
  return new Map(supplies.map((entry) => [entry.allocationId, entry]));
}

function entry(amountToDistribute: number, allocations: { id: string; amountToDistribute?: number }[], points = 0, bonusXp = 0): DistributionEntry {
  return {
    pointsToDistribute: points,
    bonusXpToDistribute: bonusXp,
    rewardsConfig: {
      amountToDistribute,
      allocations: allocations.map((allocation) => ({
        id: allocation.id,
        rewardId: `reward-of-${allocation.id}`,
        supply: 10,
        amountToDistribute: allocation.amountToDistribute ?? 1,
      })),
    },
  };
}

function decide(
  event: CustomEventLoggedData,
  challenges: ChallengeRecord[],
  options: Partial<Omit<CustomEventDecision, 'event' | 'challenges'>> = {},
): Outcome {
  return decideCustomEvent({
    event,
    timeZone: TZ,
    challenges,
    progress: new Map(),
    allocations: new Map(),
    streak: NO_STREAK,
    ...options,
  });
}

const who = (occurredAt = AT): Who => ({ organisationId: ORG, communityId: COMMUNITY, userId: USER, occurredAt });

const actionSource = (actionId: string, challengeId = CHALLENGE_ID, customEventId = EVENT_ID): PayoutSource => ({
  kind: 'action',
  challengeId,
  actionId,
  customEventId,
});
const challengeSource = (challengeId = CHALLENGE_ID, customEventId = EVENT_ID): PayoutSource => ({ kind: 'challenge', challengeId, customEventId });

// Expected-event builders: each returns the literal event, so the expectations below stay exact.
const started = (run: number, at = AT, challengeId = CHALLENGE_ID): EngagementEvent => ({
  type: 'ChallengeStarted',
  data: { ...who(at), customEventId: EVENT_ID, challengeId, run },
});
const attempted = (
  actionId: string,
  actionKey: string,
  stepIndex: number,
  outcome: 'completed' | 'criteria-not-met' | 'out-of-order' | 'already-completed' | 'limit-reached',
  criteriaMet = true,
  at = AT,
  challengeId = CHALLENGE_ID,
): EngagementEvent => ({
  type: 'ActionAttempted',
  data: { ...who(at), customEventId: EVENT_ID, challengeId, actionId, actionKey, stepIndex, criteriaMet, outcome },
});
const actionCompleted = (
  actionId: string,
  actionKey: string,
  stepIndex: number,
  run: number,
  category: Action['category'] = 'knowledge',
  at = AT,
  challengeId = CHALLENGE_ID,
): EngagementEvent => ({
  type: 'ActionCompleted',
  data: { ...who(at), customEventId: EVENT_ID, challengeId, actionId, actionKey, stepIndex, category, run },
});
const xpEarned = (amount: number, category: Action['category'], source: PayoutSource, at = AT): EngagementEvent => ({
  type: 'XpEarned',
  data: { ...who(at), category, amount, source },
});
const pointsEarned = (amount: number, source: PayoutSource, at = AT): EngagementEvent => ({
  type: 'PointsEarned',
  data: { ...who(at), amount, source },
});
const challengeCompleted = (run: number, at = AT, challengeId = CHALLENGE_ID): EngagementEvent => ({
  type: 'ChallengeCompleted',
  data: { ...who(at), customEventId: EVENT_ID, challengeId, run },
});
const streakExtended = (day: string, currentStreak: number, longestStreak: number, at = AT): EngagementEvent => ({
  type: 'StreakExtended',
  data: { ...who(at), day, currentStreak, longestStreak },
});
const distributed = (
  allocationId: string,
  amount: number,
  firstUnit: number,
  source: PayoutSource,
  at = AT,
  rewardKind: 'asset' | 'entries' = 'asset',
): AllocationDistributedEvent => ({
  type: 'AllocationDistributed',
  data: { ...who(at), allocationId, rewardId: `reward-of-${allocationId}`, rewardKind, amount, firstUnit, source },
});

const types = (outcome: Outcome) => outcome.events.map((event) => event.type);

// ---------------------------------------------------------------------------------------------------------
// isLive
// ---------------------------------------------------------------------------------------------------------

describe('isLive', () => {
  const window = { startsAt: '2026-01-01T00:00:00.000Z', expiresAt: '2026-02-01T00:00:00.000Z' };

  it('is half-open: live from startsAt, no longer at expiresAt', () => {
    expect(isLive(window, '2025-12-31T23:59:59.999Z')).toBe(false);
    expect(isLive(window, '2026-01-01T00:00:00.000Z')).toBe(true);
    expect(isLive(window, '2026-01-31T23:59:59.999Z')).toBe(true);
    expect(isLive(window, '2026-02-01T00:00:00.000Z')).toBe(false);
    expect(isLive(window, '2026-03-01T00:00:00.000Z')).toBe(false);
  });

  it('compares instants, whatever their offsets', () => {
    // 2025-12-31T19:00-05:00 is 2026-01-01T00:00Z: the start itself.
    expect(isLive(window, '2025-12-31T19:00:00-05:00')).toBe(true);
    expect(isLive(window, '2025-12-31T18:59:59-05:00')).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------------------
// decideCustomEvent: attempts
// ---------------------------------------------------------------------------------------------------------

describe('decideCustomEvent: an attempt on a live challenge', () => {
  it('starts run 1, completes the action, pays its XP (with bonus, in its category), points and allocation, and extends the streak', () => {
    const subject = challenge({
      actions: [action('a1', 'visit-store', { category: 'loyalty', xp: 10, distribution: entry(1, [{ id: 'alloc-1' }], 5, 2) }), action('a2', 'buy-coffee')],
    });
    const allocations = allocationMap(supply('alloc-1', { distributed: 4 }));
    const progress = new Map<string, ChallengeProgress>();

    const outcome = decide(customEvent('visit-store'), [subject], { allocations, progress });

    const fact = { organisationId: ORG, communityId: COMMUNITY, userId: USER, occurredAt: AT };
    const source = { kind: 'action', challengeId: CHALLENGE_ID, actionId: 'a1', customEventId: EVENT_ID } as const;
    expect(outcome.events).toEqual([
      { type: 'ChallengeStarted', data: { ...fact, customEventId: EVENT_ID, challengeId: CHALLENGE_ID, run: 1 } },
      {
        type: 'ActionAttempted',
        data: {
          ...fact,
          customEventId: EVENT_ID,
          challengeId: CHALLENGE_ID,
          actionId: 'a1',
          actionKey: 'visit-store',
          stepIndex: 0,
          criteriaMet: true,
          outcome: 'completed',
        },
      },
      {
        type: 'ActionCompleted',
        data: {
          ...fact,
          customEventId: EVENT_ID,
          challengeId: CHALLENGE_ID,
          actionId: 'a1',
          actionKey: 'visit-store',
          stepIndex: 0,
          category: 'loyalty',
          run: 1,
        },
      },
      { type: 'XpEarned', data: { ...fact, category: 'loyalty', amount: 12, source } },
      { type: 'PointsEarned', data: { ...fact, amount: 5, source } },
      // 03:00Z is still the 14th in New York.
      { type: 'StreakExtended', data: { ...fact, day: '2026-01-14', currentStreak: 1, longestStreak: 1 } },
    ]);
    expect(outcome.distributions).toEqual([
      {
        type: 'AllocationDistributed',
        data: { ...fact, allocationId: 'alloc-1', rewardId: 'reward-of-alloc-1', rewardKind: 'asset', amount: 1, firstUnit: 4, source },
      },
    ]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: true, completedActionIds: ['a1'], completionsByPeriod: {} });
    expect(outcome.allocations.get('alloc-1')).toEqual(supply('alloc-1', { distributed: 5 }));
    expect(outcome.streak).toEqual({ lastDay: '2026-01-14', current: 1, longest: 1 });

    // The caller's state is not touched: the outcome carries the new state.
    expect(allocations.get('alloc-1')?.distributed).toBe(4);
    expect(progress.size).toBe(0);
  });

  it('pays no XP event when the action gives none, and no points event when its distribution gives none', () => {
    const subject = challenge({ actions: [action('a1', 'visit-store', { xp: 0 }), action('a2', 'buy-coffee')] });
    const outcome = decide(customEvent('visit-store'), [subject]);
    expect(outcome.events).toEqual([
      started(1),
      attempted('a1', 'visit-store', 0, 'completed'),
      actionCompleted('a1', 'visit-store', 0, 1),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);

    const bonusOnly = challenge({ actions: [action('a1', 'visit-store', { xp: 0, distribution: entry(0, [], 0, 3) }), action('a2', 'buy-coffee')] });
    expect(decide(customEvent('visit-store'), [bonusOnly]).events).toEqual([
      started(1),
      attempted('a1', 'visit-store', 0, 'completed'),
      actionCompleted('a1', 'visit-store', 0, 1),
      xpEarned(3, 'knowledge', actionSource('a1')),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
  });

  it('continues the open run: no second ChallengeStarted, the run number carried', () => {
    const progress = new Map([[CHALLENGE_ID, { run: 3, open: true, completedActionIds: [], completionsByPeriod: { open: 0 } }]]);
    const subject = challenge({ maxCompletionsPerPeriod: 5 });
    const outcome = decide(customEvent('visit-store'), [subject], { progress });
    expect(outcome.events).toEqual([
      attempted('a1', 'visit-store', 0, 'completed'),
      actionCompleted('a1', 'visit-store', 0, 3),
      xpEarned(10, 'knowledge', actionSource('a1')),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 3, open: true, completedActionIds: ['a1'], completionsByPeriod: { open: 0 } });
  });

  describe('events that are no attempt decide nothing', () => {
    const streak: StreakState = { lastDay: '2026-01-10', current: 2, longest: 4 };
    const progress = new Map([[CHALLENGE_ID, NO_PROGRESS]]);
    const allocations = allocationMap(supply('alloc-1'));
    const paying = challenge({ actions: [action('a1', 'visit-store', { distribution: entry(1, [{ id: 'alloc-1' }], 5, 5) })] });

    const nothing = (outcome: Outcome) => {
      expect(outcome.events).toEqual([]);
      expect(outcome.distributions).toEqual([]);
      expect(outcome.progress).toEqual(progress);
      expect(outcome.allocations).toEqual(allocations);
      expect(outcome.streak).toBe(streak);
    };

    it.each([
      ['long before startsAt', '2025-12-15T12:00:00.000Z'],
      ['just before startsAt', '2025-12-31T23:59:59.999Z'],
      ['exactly at expiresAt', '2026-02-01T00:00:00.000Z'],
      ['after expiresAt', '2026-02-10T12:00:00.000Z'],
    ])('a challenge not live at the event time (%s)', (_label, at) => {
      nothing(decide(customEvent('visit-store', at), [paying], { progress, allocations, streak }));
    });

    it('a challenge live from its startsAt (inclusive) does take the attempt', () => {
      expect(types(decide(customEvent('visit-store', '2026-01-01T00:00:00.000Z'), [paying], { progress, allocations, streak }))).toContain('ActionCompleted');
    });

    it('a challenge of another community', () => {
      nothing(decide(customEvent('visit-store'), [challenge({ ...paying, communityId: OTHER_COMMUNITY })], { progress, allocations, streak }));
    });

    it('an event name matching no action key (keys match exactly, case included)', () => {
      nothing(decide(customEvent('checkout'), [paying], { progress, allocations, streak }));
      nothing(decide(customEvent('Visit-Store'), [paying], { progress, allocations, streak }));
      nothing(decide(customEvent('visit-store '), [paying], { progress, allocations, streak }));
    });

    it('no challenges at all', () => {
      nothing(decide(customEvent('visit-store'), [], { progress, allocations, streak }));
    });
  });
});

describe('decideCustomEvent: criteria', () => {
  const subject = challenge({
    actions: [
      action('a1', 'purchase', {
        criteria: [
          { field: 'order.total', operator: 'gte', value: 50 },
          { field: 'order.currency', operator: 'eq', value: 'EUR' },
        ],
        distribution: entry(1, [{ id: 'alloc-1' }], 5, 0),
      }),
      action('a2', 'review'),
    ],
  });

  it('criteria not met: the challenge is started, the attempt recorded as criteria-not-met, nothing completed or paid, no streak', () => {
    const allocations = allocationMap(supply('alloc-1'));
    const streak: StreakState = { lastDay: '2026-01-13', current: 1, longest: 1 };
    const outcome = decide(customEvent('purchase', AT, { order: { total: 20, currency: 'EUR' } }), [subject], { allocations, streak });
    expect(outcome.events).toEqual([started(1), attempted('a1', 'purchase', 0, 'criteria-not-met', false)]);
    expect(outcome.distributions).toEqual([]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: true, completedActionIds: [], completionsByPeriod: {} });
    expect(outcome.allocations).toEqual(allocations);
    expect(outcome.streak).toBe(streak);
  });

  it('a missing field fails the criteria too', () => {
    const outcome = decide(customEvent('purchase', AT, { order: { total: 80 } }), [subject]);
    expect(outcome.events).toEqual([started(1), attempted('a1', 'purchase', 0, 'criteria-not-met', false)]);
  });

  it('a later attempt meeting the criteria completes the action in the same run', () => {
    const first = decide(customEvent('purchase', AT, { order: { total: 20, currency: 'EUR' } }), [subject]);
    const second = decide(customEvent('purchase', AT, { order: { total: '75', currency: 'EUR' } }), [subject], {
      progress: first.progress,
      allocations: allocationMap(supply('alloc-1')),
    });
    expect(second.events).toEqual([
      attempted('a1', 'purchase', 0, 'completed'),
      actionCompleted('a1', 'purchase', 0, 1),
      xpEarned(10, 'knowledge', actionSource('a1')),
      pointsEarned(5, actionSource('a1')),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
    expect(second.distributions).toEqual([distributed('alloc-1', 1, 0, actionSource('a1'))]);
    expect(second.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: true, completedActionIds: ['a1'], completionsByPeriod: {} });
  });
});

describe('decideCustomEvent: order', () => {
  const three = (isLinear: boolean, skippable: string[] = []) =>
    challenge({
      isLinear,
      actions: [
        action('a1', 'step-1', { isSkippable: skippable.includes('a1') }),
        action('a2', 'step-2', { isSkippable: skippable.includes('a2') }),
        action('a3', 'step-3', { isSkippable: skippable.includes('a3') }),
      ],
    });

  it('linear: a later action before an earlier non-skippable one is out-of-order (the challenge is still started)', () => {
    const outcome = decide(customEvent('step-2'), [three(true)]);
    expect(outcome.events).toEqual([started(1), attempted('a2', 'step-2', 1, 'out-of-order')]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: true, completedActionIds: [], completionsByPeriod: {} });
    expect(outcome.streak).toBe(NO_STREAK);
  });

  it('linear: out-of-order when only one of the earlier non-skippable actions is done', () => {
    const progress = new Map([[CHALLENGE_ID, { run: 1, open: true, completedActionIds: ['a1'], completionsByPeriod: {} }]]);
    const outcome = decide(customEvent('step-3'), [three(true)], { progress });
    expect(outcome.events).toEqual([attempted('a3', 'step-3', 2, 'out-of-order')]);
  });

  it('linear: in order once the earlier ones are done', () => {
    const first = decide(customEvent('step-1'), [three(true)]);
    const second = decide(customEvent('step-2'), [three(true)], { progress: first.progress, streak: first.streak });
    expect(second.events).toEqual([
      attempted('a2', 'step-2', 1, 'completed'),
      actionCompleted('a2', 'step-2', 1, 1),
      xpEarned(10, 'knowledge', actionSource('a2')),
    ]);
    expect(second.progress.get(CHALLENGE_ID)?.completedActionIds).toEqual(['a1', 'a2']);
  });

  it('linear: a skippable earlier action may be skipped', () => {
    const outcome = decide(customEvent('step-2'), [three(true, ['a1'])]);
    expect(outcome.events).toEqual([
      started(1),
      attempted('a2', 'step-2', 1, 'completed'),
      actionCompleted('a2', 'step-2', 1, 1),
      xpEarned(10, 'knowledge', actionSource('a2')),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
  });

  it('linear: skipping a skippable action does not let a non-skippable one be skipped', () => {
    const outcome = decide(customEvent('step-3'), [three(true, ['a1'])]);
    expect(outcome.events).toEqual([started(1), attempted('a3', 'step-3', 2, 'out-of-order')]);
  });

  it('non-linear: any order is accepted', () => {
    const outcome = decide(customEvent('step-3'), [three(false)]);
    expect(outcome.events).toEqual([
      started(1),
      attempted('a3', 'step-3', 2, 'completed'),
      actionCompleted('a3', 'step-3', 2, 1),
      xpEarned(10, 'knowledge', actionSource('a3')),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
    const next = decide(customEvent('step-1'), [three(false)], { progress: outcome.progress });
    expect(types(next)).toEqual(['ActionAttempted', 'ActionCompleted', 'XpEarned', 'StreakExtended']);
    expect(next.progress.get(CHALLENGE_ID)?.completedActionIds).toEqual(['a3', 'a1']);
  });
});

describe('decideCustomEvent: already completed', () => {
  const progress = new Map([[CHALLENGE_ID, { run: 2, open: true, completedActionIds: ['a1'], completionsByPeriod: { open: 1 } }]]);

  it('an action already completed in the run is already-completed: nothing paid, progress unchanged', () => {
    const subject = challenge({
      maxCompletionsPerPeriod: 3,
      actions: [action('a1', 'visit-store', { distribution: entry(1, [], 5, 5) }), action('a2', 'buy-coffee')],
    });
    const outcome = decide(customEvent('visit-store'), [subject], { progress });
    expect(outcome.events).toEqual([attempted('a1', 'visit-store', 0, 'already-completed')]);
    expect(outcome.distributions).toEqual([]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual(progress.get(CHALLENGE_ID));
    expect(outcome.streak).toBe(NO_STREAK);
  });

  it('already-completed is reported before the criteria (criteriaMet still says whether they held)', () => {
    const subject = challenge({
      maxCompletionsPerPeriod: 3,
      actions: [action('a1', 'visit-store', { criteria: [{ field: 'store', operator: 'exists' }] }), action('a2', 'buy-coffee')],
    });
    const outcome = decide(customEvent('visit-store'), [subject], { progress });
    expect(outcome.events).toEqual([attempted('a1', 'visit-store', 0, 'already-completed', false)]);
  });
});

describe('decideCustomEvent: completing a challenge', () => {
  const withReward = (overrides: Partial<ChallengeRecord> = {}) =>
    challenge({
      actions: [
        action('a1', 'visit-store'),
        action('a2', 'buy-coffee', { category: 'creativity', xp: 7, distribution: entry(1, [{ id: 'alloc-action' }], 3, 1) }),
      ],
      rewardDistribution: {
        points: 100,
        xp: 40,
        distributionEventId: 'distribution-event-1',
        rewardAllocations: [
          { rewardId: 'reward-of-alloc-x', allocationId: 'alloc-x', amountToDistribute: 1 },
          { rewardId: 'reward-of-alloc-y', allocationId: 'alloc-y', amountToDistribute: 2 },
          { rewardId: 'reward-of-alloc-z', allocationId: 'alloc-z', amountToDistribute: 1 },
          { rewardId: 'reward-of-alloc-w', allocationId: 'alloc-w', amountToDistribute: 1 },
        ],
        numberOfRewardsToReceive: 2,
      },
      ...overrides,
    });
  const progress = new Map([[CHALLENGE_ID, { run: 1, open: true, completedActionIds: ['a1'], completionsByPeriod: {} }]]);

  it('completing the last non-skippable action completes the challenge: reward points and XP (participation) and the first allocations that can pay', () => {
    const allocations = allocationMap(
      supply('alloc-action'),
      supply('alloc-x', { supply: 5, distributed: 5 }), // exhausted: cannot pay
      supply('alloc-y', { supply: 5, distributed: 1 }),
      supply('alloc-z', { supply: 5, distributed: 2 }),
      supply('alloc-w'),
    );
    const outcome = decide(customEvent('buy-coffee'), [withReward()], { progress, allocations });

    expect(outcome.events).toEqual([
      attempted('a2', 'buy-coffee', 1, 'completed'),
      actionCompleted('a2', 'buy-coffee', 1, 1, 'creativity'),
      xpEarned(8, 'creativity', actionSource('a2')),
      pointsEarned(3, actionSource('a2')),
      challengeCompleted(1),
      xpEarned(40, 'participation', challengeSource()),
      pointsEarned(100, challengeSource()),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
    expect(CHALLENGE_XP_CATEGORY).toBe('participation');
    expect(outcome.distributions).toEqual([
      distributed('alloc-action', 1, 0, actionSource('a2')),
      distributed('alloc-y', 2, 1, challengeSource()),
      distributed('alloc-z', 1, 2, challengeSource()),
    ]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: false, completedActionIds: ['a1', 'a2'], completionsByPeriod: { open: 1 } });
    expect(outcome.allocations.get('alloc-x')?.distributed).toBe(5);
    expect(outcome.allocations.get('alloc-y')?.distributed).toBe(3);
    expect(outcome.allocations.get('alloc-z')?.distributed).toBe(3);
    expect(outcome.allocations.get('alloc-w')?.distributed).toBe(0);
  });

  it('an allocation whose supply cannot cover its whole amount is passed over (all or nothing)', () => {
    const allocations = allocationMap(
      supply('alloc-action'),
      supply('alloc-x'),
      supply('alloc-y', { supply: 5, distributed: 4 }), // 4 + 2 > 5
      supply('alloc-z', { supply: 5, distributed: 4 }), // 4 + 1 <= 5
    );
    const outcome = decide(customEvent('buy-coffee'), [withReward()], { progress, allocations });
    expect(outcome.distributions).toEqual([
      distributed('alloc-action', 1, 0, actionSource('a2')),
      distributed('alloc-x', 1, 0, challengeSource()),
      distributed('alloc-z', 1, 4, challengeSource()),
    ]);
    expect(outcome.allocations.get('alloc-y')?.distributed).toBe(4);
  });

  it('unknown allocations pay nothing; fewer than numberOfRewardsToReceive when too few can pay', () => {
    const outcome = decide(customEvent('buy-coffee'), [withReward()], { progress, allocations: allocationMap(supply('alloc-z')) });
    expect(outcome.distributions).toEqual([distributed('alloc-z', 1, 0, challengeSource())]);
  });

  it('numberOfRewardsToReceive 0: no allocation pays', () => {
    const subject = withReward();
    subject.rewardDistribution = { ...subject.rewardDistribution, numberOfRewardsToReceive: 0 };
    const outcome = decide(customEvent('buy-coffee'), [subject], { progress, allocations: allocationMap(supply('alloc-x'), supply('alloc-y')) });
    expect(outcome.distributions).toEqual([]);
    expect(types(outcome)).toContain('ChallengeCompleted');
  });

  it('a reward of no points and no XP has no ledger events', () => {
    const subject = challenge({ actions: [action('a1', 'visit-store')] });
    expect(decide(customEvent('visit-store'), [subject]).events).toEqual([
      started(1),
      attempted('a1', 'visit-store', 0, 'completed'),
      actionCompleted('a1', 'visit-store', 0, 1),
      xpEarned(10, 'knowledge', actionSource('a1')),
      challengeCompleted(1),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
  });

  it('skippable actions left undone do not hold the completion back', () => {
    const subject = challenge({
      actions: [action('a1', 'visit-store', { isSkippable: true }), action('a2', 'buy-coffee'), action('a3', 'share', { isSkippable: true })],
    });
    const outcome = decide(customEvent('buy-coffee'), [subject]);
    expect(outcome.events).toEqual([
      started(1),
      attempted('a2', 'buy-coffee', 1, 'completed'),
      actionCompleted('a2', 'buy-coffee', 1, 1),
      xpEarned(10, 'knowledge', actionSource('a2')),
      challengeCompleted(1),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: false, completedActionIds: ['a2'], completionsByPeriod: { open: 1 } });
  });

  it('a challenge is not completed while a non-skippable action is left', () => {
    const subject = challenge({ isLinear: false, actions: [action('a1', 'visit-store'), action('a2', 'buy-coffee'), action('a3', 'share')] });
    const outcome = decide(customEvent('buy-coffee'), [subject], { progress });
    expect(types(outcome)).not.toContain('ChallengeCompleted');
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: true, completedActionIds: ['a1', 'a2'], completionsByPeriod: {} });
  });
});

// ---------------------------------------------------------------------------------------------------------
// maxCompletionsPerPeriod
// ---------------------------------------------------------------------------------------------------------

describe('decideCustomEvent: maxCompletionsPerPeriod', () => {
  const oneStep = (period: ChallengeRecord['period'], maxCompletionsPerPeriod: number) =>
    challenge({ period, maxCompletionsPerPeriod, actions: [action('a1', 'visit-store', { xp: 0 })] });

  /** Decides a series of events, each on the state the previous one left. */
  function series(subject: ChallengeRecord, times: string[]): Outcome[] {
    const outcomes: Outcome[] = [];
    let progress = new Map<string, ChallengeProgress>();
    let streak = NO_STREAK;
    for (const at of times) {
      const outcome = decide(customEvent('visit-store', at), [subject], { progress, streak });
      outcomes.push(outcome);
      progress = outcome.progress;
      streak = outcome.streak;
    }
    return outcomes;
  }

  it('daily, in the organisation time zone: limit-reached until local midnight, then run 2', () => {
    // All three are on 2026-01-15 in UTC, but New York (UTC-5) puts the first two on the 14th.
    const t1 = '2026-01-15T03:00:00.000Z'; // 22:00 on the 14th
    const t2 = '2026-01-15T04:59:59.000Z'; // 23:59:59 on the 14th
    const t3 = '2026-01-15T05:00:00.000Z'; // midnight on the 15th
    const [first, second, third] = series(oneStep('daily', 1), [t1, t2, t3]);

    expect(first!.events).toEqual([
      started(1, t1),
      attempted('a1', 'visit-store', 0, 'completed', true, t1),
      actionCompleted('a1', 'visit-store', 0, 1, 'knowledge', t1),
      challengeCompleted(1, t1),
      streakExtended('2026-01-14', 1, 1, t1),
    ]);
    expect(first!.progress.get(CHALLENGE_ID)).toEqual({ run: 1, open: false, completedActionIds: ['a1'], completionsByPeriod: { '2026-01-14': 1 } });

    expect(second!.events).toEqual([attempted('a1', 'visit-store', 0, 'limit-reached', true, t2)]);
    expect(second!.progress.get(CHALLENGE_ID)).toEqual(first!.progress.get(CHALLENGE_ID));
    expect(second!.streak).toEqual(first!.streak);

    expect(third!.events).toEqual([
      started(2, t3),
      attempted('a1', 'visit-store', 0, 'completed', true, t3),
      actionCompleted('a1', 'visit-store', 0, 2, 'knowledge', t3),
      challengeCompleted(2, t3),
      streakExtended('2026-01-15', 2, 2, t3),
    ]);
    expect(third!.progress.get(CHALLENGE_ID)).toEqual({
      run: 2,
      open: false,
      completedActionIds: ['a1'],
      completionsByPeriod: { '2026-01-14': 1, '2026-01-15': 1 },
    });
  });

  it('daily with a limit of 2: two runs a day, the third attempt refused', () => {
    const outcomes = series(oneStep('daily', 2), ['2026-01-14T14:00:00.000Z', '2026-01-14T18:00:00.000Z', '2026-01-15T04:00:00.000Z']);
    expect(outcomes.map((outcome) => outcome.events.filter((event) => event.type === 'ChallengeCompleted').length)).toEqual([1, 1, 0]);
    expect(outcomes[2]!.events).toEqual([attempted('a1', 'visit-store', 0, 'limit-reached', true, '2026-01-15T04:00:00.000Z')]);
    expect(outcomes[2]!.progress.get(CHALLENGE_ID)).toEqual({ run: 2, open: false, completedActionIds: ['a1'], completionsByPeriod: { '2026-01-14': 2 } });
  });

  it('weekly (ISO weeks, local time): limit-reached until local Monday, then a new run', () => {
    const monday = '2026-01-12T15:00:00.000Z'; // 2026-W03
    const friday = '2026-01-16T15:00:00.000Z'; // 2026-W03
    const sundayNight = '2026-01-19T03:00:00.000Z'; // Monday in UTC, still Sunday 22:00 (W03) in New York
    const nextMonday = '2026-01-19T05:00:00.000Z'; // local Monday midnight: 2026-W04
    const outcomes = series(oneStep('weekly', 2), [monday, friday, sundayNight, nextMonday]);

    expect(outcomes.map(types)).toEqual([
      ['ChallengeStarted', 'ActionAttempted', 'ActionCompleted', 'ChallengeCompleted', 'StreakExtended'],
      ['ChallengeStarted', 'ActionAttempted', 'ActionCompleted', 'ChallengeCompleted', 'StreakExtended'],
      ['ActionAttempted'],
      ['ChallengeStarted', 'ActionAttempted', 'ActionCompleted', 'ChallengeCompleted', 'StreakExtended'],
    ]);
    expect(outcomes[1]!.events[0]).toEqual(started(2, friday));
    expect(outcomes[2]!.events).toEqual([attempted('a1', 'visit-store', 0, 'limit-reached', true, sundayNight)]);
    expect(outcomes[3]!.events[0]).toEqual(started(3, nextMonday));
    expect(outcomes[3]!.events[3]).toEqual(challengeCompleted(3, nextMonday));
    expect(outcomes[3]!.progress.get(CHALLENGE_ID)).toEqual({
      run: 3,
      open: false,
      completedActionIds: ['a1'],
      completionsByPeriod: { '2026-W03': 2, '2026-W04': 1 },
    });
  });

  it('open: the limit counts over the whole life of the challenge', () => {
    const outcomes = series(oneStep('open', 2), ['2026-01-02T12:00:00.000Z', '2026-01-10T12:00:00.000Z', '2026-01-30T12:00:00.000Z']);
    expect(outcomes[0]!.events[0]).toEqual(started(1, '2026-01-02T12:00:00.000Z'));
    expect(outcomes[1]!.events[0]).toEqual(started(2, '2026-01-10T12:00:00.000Z'));
    expect(outcomes[2]!.events).toEqual([attempted('a1', 'visit-store', 0, 'limit-reached', true, '2026-01-30T12:00:00.000Z')]);
    expect(outcomes[2]!.progress.get(CHALLENGE_ID)).toEqual({ run: 2, open: false, completedActionIds: ['a1'], completionsByPeriod: { open: 2 } });
  });

  it('limit-reached is decided before the criteria, and starts nothing', () => {
    const subject = challenge({ actions: [action('a1', 'visit-store', { criteria: [{ field: 'store', operator: 'exists' }] })] });
    const progress = new Map([[CHALLENGE_ID, { run: 1, open: false, completedActionIds: ['a1'], completionsByPeriod: { open: 1 } }]]);
    const outcome = decide(customEvent('visit-store'), [subject], { progress });
    expect(outcome.events).toEqual([attempted('a1', 'visit-store', 0, 'limit-reached', false)]);
    expect(outcome.progress.get(CHALLENGE_ID)).toBe(progress.get(CHALLENGE_ID));
  });

  it('a multi-step run restarts from nothing: the earlier run’s actions are not carried over', () => {
    const subject = challenge({ period: 'daily', maxCompletionsPerPeriod: 1 });
    const progress = new Map([[CHALLENGE_ID, { run: 1, open: false, completedActionIds: ['a1', 'a2'], completionsByPeriod: { '2026-01-13': 1 } }]]);
    const outcome = decide(customEvent('buy-coffee'), [subject], { progress });
    expect(outcome.events).toEqual([started(2), attempted('a2', 'buy-coffee', 1, 'out-of-order')]);
    expect(outcome.progress.get(CHALLENGE_ID)).toEqual({ run: 2, open: true, completedActionIds: [], completionsByPeriod: { '2026-01-13': 1 } });
  });
});

// ---------------------------------------------------------------------------------------------------------
// Streaks
// ---------------------------------------------------------------------------------------------------------

describe('extendStreak', () => {
  it('a first completion starts the streak at 1', () => {
    expect(extendStreak(NO_STREAK, '2026-01-14')).toEqual({ lastDay: '2026-01-14', current: 1, longest: 1 });
  });

  it('the same day changes nothing', () => {
    expect(extendStreak({ lastDay: '2026-01-14', current: 3, longest: 5 }, '2026-01-14')).toBeNull();
  });

  it('the next day adds one, and raises longest when passed', () => {
    expect(extendStreak({ lastDay: '2026-01-14', current: 3, longest: 5 }, '2026-01-15')).toEqual({ lastDay: '2026-01-15', current: 4, longest: 5 });
    expect(extendStreak({ lastDay: '2026-01-14', current: 5, longest: 5 }, '2026-01-15')).toEqual({ lastDay: '2026-01-15', current: 6, longest: 6 });
  });

  it('the next day across a month, a year and a leap day', () => {
    expect(extendStreak({ lastDay: '2026-01-31', current: 1, longest: 1 }, '2026-02-01')?.current).toBe(2);
    expect(extendStreak({ lastDay: '2025-12-31', current: 1, longest: 1 }, '2026-01-01')?.current).toBe(2);
    expect(extendStreak({ lastDay: '2028-02-28', current: 1, longest: 1 }, '2028-02-29')?.current).toBe(2);
    expect(extendStreak({ lastDay: '2028-02-28', current: 1, longest: 1 }, '2028-03-01')?.current).toBe(1);
  });

  it('a gap restarts it at 1 and keeps longest', () => {
    expect(extendStreak({ lastDay: '2026-01-14', current: 3, longest: 5 }, '2026-01-16')).toEqual({ lastDay: '2026-01-16', current: 1, longest: 5 });
  });

  it('an earlier day (an event processed out of order) changes nothing', () => {
    expect(extendStreak({ lastDay: '2026-01-14', current: 3, longest: 5 }, '2026-01-13')).toBeNull();
    expect(extendStreak({ lastDay: '2026-01-14', current: 3, longest: 5 }, '2025-12-31')).toBeNull();
  });
});

describe('decideCustomEvent: streaks', () => {
  const subject = challenge({ maxCompletionsPerPeriod: 100, actions: [action('a1', 'visit-store'), action('a2', 'buy-coffee')] });

  it('same local day: no StreakExtended, the streak kept', () => {
    const streak: StreakState = { lastDay: LOCAL_DAY, current: 2, longest: 3 };
    const outcome = decide(customEvent('visit-store'), [subject], { streak });
    expect(types(outcome)).not.toContain('StreakExtended');
    expect(outcome.streak).toBe(streak);
  });

  it('next local day (not the UTC day): current + 1, longest updated', () => {
    // In UTC the event is on the 15th, two days after the 13th; in New York it is the 14th, the next day.
    const outcome = decide(customEvent('visit-store'), [subject], { streak: { lastDay: '2026-01-13', current: 4, longest: 4 } });
    expect(outcome.events.at(-1)).toEqual(streakExtended('2026-01-14', 5, 5));
    expect(outcome.streak).toEqual({ lastDay: '2026-01-14', current: 5, longest: 5 });
  });

  it('a gap: current 1, longest kept', () => {
    const outcome = decide(customEvent('visit-store'), [subject], { streak: { lastDay: '2026-01-10', current: 4, longest: 7 } });
    expect(outcome.events.at(-1)).toEqual(streakExtended(LOCAL_DAY, 1, 7));
    expect(outcome.streak).toEqual({ lastDay: LOCAL_DAY, current: 1, longest: 7 });
  });

  it('an event of an earlier day than the streak’s: completes the action but extends nothing', () => {
    const streak: StreakState = { lastDay: '2026-01-20', current: 2, longest: 2 };
    const outcome = decide(customEvent('visit-store'), [subject], { streak });
    expect(types(outcome)).toEqual(['ChallengeStarted', 'ActionAttempted', 'ActionCompleted', 'XpEarned']);
    expect(outcome.streak).toBe(streak);
  });

  it('an attempt completing nothing extends nothing', () => {
    const streak: StreakState = { lastDay: '2026-01-13', current: 1, longest: 1 };
    const outcome = decide(customEvent('buy-coffee'), [subject], { streak }); // out of order
    expect(types(outcome)).toEqual(['ChallengeStarted', 'ActionAttempted']);
    expect(outcome.streak).toBe(streak);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Allocations
// ---------------------------------------------------------------------------------------------------------

describe('handOut', () => {
  const source: PayoutSource = { kind: 'giveaway', rewardId: 'reward-9' };

  it('hands out when distributed + amount <= supply: firstUnit is what was distributed before, the map updated', () => {
    const allocations = allocationMap(supply('alloc-1', { supply: 10, distributed: 3 }));
    expect(handOut(allocations, 'alloc-1', 2, who(), source)).toEqual(distributed('alloc-1', 2, 3, source));
    expect(allocations.get('alloc-1')).toEqual(supply('alloc-1', { supply: 10, distributed: 5 }));
    expect(handOut(allocations, 'alloc-1', 1, who(), source)).toEqual(distributed('alloc-1', 1, 5, source));
    expect(allocations.get('alloc-1')?.distributed).toBe(6);
  });

  it('may take the very last units', () => {
    const allocations = allocationMap(supply('alloc-1', { supply: 10, distributed: 8 }));
    expect(handOut(allocations, 'alloc-1', 2, who(), source)).toEqual(distributed('alloc-1', 2, 8, source));
    expect(allocations.get('alloc-1')?.distributed).toBe(10);
    expect(handOut(allocations, 'alloc-1', 1, who(), source)).toBeNull();
  });

  it('all or nothing: refuses when the supply cannot cover the whole amount, and leaves the map alone', () => {
    const before = supply('alloc-1', { supply: 10, distributed: 9 });
    const allocations = allocationMap(before);
    expect(handOut(allocations, 'alloc-1', 2, who(), source)).toBeNull();
    expect(allocations.get('alloc-1')).toBe(before);
  });

  it('an allocation of no supply pays nothing', () => {
    expect(handOut(allocationMap(supply('alloc-1', { supply: 0 })), 'alloc-1', 1, who(), source)).toBeNull();
  });

  it('an amount below 1 pays nothing', () => {
    const allocations = allocationMap(supply('alloc-1'));
    expect(handOut(allocations, 'alloc-1', 0, who(), source)).toBeNull();
    expect(allocations.get('alloc-1')?.distributed).toBe(0);
  });

  it('an unknown allocation id pays nothing', () => {
    const allocations = allocationMap(supply('alloc-1'));
    expect(handOut(allocations, 'alloc-unknown', 1, who(), source)).toBeNull();
    expect([...allocations.keys()]).toEqual(['alloc-1']);
  });

  it('an entries allocation pays until its reward’s drawsAt, and refuses from drawsAt on', () => {
    const drawsAt = '2026-01-20T12:00:00.000Z';
    const entries = () => allocationMap(supply('alloc-1', { rewardKind: 'entries', drawsAt }));
    expect(handOut(entries(), 'alloc-1', 3, who('2026-01-20T11:59:59.999Z'), source)).toEqual(
      distributed('alloc-1', 3, 0, source, '2026-01-20T11:59:59.999Z', 'entries'),
    );
    expect(handOut(entries(), 'alloc-1', 3, who(drawsAt), source)).toBeNull();
    expect(handOut(entries(), 'alloc-1', 3, who('2026-01-21T00:00:00.000Z'), source)).toBeNull();
  });

  it('an entries allocation without a draw time, and an asset allocation, ignore drawsAt', () => {
    const late = who('2027-01-01T00:00:00.000Z');
    expect(handOut(allocationMap(supply('alloc-1', { rewardKind: 'entries', drawsAt: null })), 'alloc-1', 1, late, source)).not.toBeNull();
    expect(handOut(allocationMap(supply('alloc-1', { rewardKind: 'asset', drawsAt: '2026-01-01T00:00:00.000Z' })), 'alloc-1', 1, late, source)).not.toBeNull();
  });
});

describe('distributeEntry', () => {
  const source = actionSource('a1');

  it('rewardsConfig.amountToDistribute limits how many allocations pay: the first ones in order that can, each its own amount', () => {
    const allocations = allocationMap(
      supply('alloc-1', { supply: 1, distributed: 1 }), // exhausted
      supply('alloc-2', { distributed: 2 }),
      supply('alloc-3'),
      supply('alloc-4'),
    );
    const paid = distributeEntry(
      allocations,
      entry(2, [
        { id: 'alloc-1', amountToDistribute: 1 },
        { id: 'alloc-2', amountToDistribute: 3 },
        { id: 'alloc-3', amountToDistribute: 2 },
        { id: 'alloc-4', amountToDistribute: 1 },
      ]),
      who(),
      source,
    );
    expect(paid).toEqual([distributed('alloc-2', 3, 2, source), distributed('alloc-3', 2, 0, source)]);
    expect([...allocations.values()].map((allocation) => allocation.distributed)).toEqual([1, 5, 2, 0]);
  });

  it('amountToDistribute 1: only the first that can pay', () => {
    const allocations = allocationMap(supply('alloc-1'), supply('alloc-2'));
    expect(distributeEntry(allocations, entry(1, [{ id: 'alloc-1' }, { id: 'alloc-2' }]), who(), source)).toEqual([distributed('alloc-1', 1, 0, source)]);
  });

  it('amountToDistribute 0: nothing pays', () => {
    const allocations = allocationMap(supply('alloc-1'));
    expect(distributeEntry(allocations, entry(0, [{ id: 'alloc-1' }]), who(), source)).toEqual([]);
    expect(allocations.get('alloc-1')?.distributed).toBe(0);
  });

  it('unknown allocation ids are skipped, the next ones pay instead', () => {
    const allocations = allocationMap(supply('alloc-2'));
    expect(distributeEntry(allocations, entry(1, [{ id: 'alloc-unknown' }, { id: 'alloc-2' }]), who(), source)).toEqual([distributed('alloc-2', 1, 0, source)]);
  });

  it('fewer than amountToDistribute when too few can pay', () => {
    const allocations = allocationMap(supply('alloc-1'), supply('alloc-2', { supply: 0 }));
    expect(distributeEntry(allocations, entry(3, [{ id: 'alloc-1' }, { id: 'alloc-2' }]), who(), source)).toEqual([distributed('alloc-1', 1, 0, source)]);
  });

  it('an entries allocation whose draw has come is passed over for the next', () => {
    const allocations = allocationMap(supply('alloc-1', { rewardKind: 'entries', drawsAt: '2026-01-10T00:00:00.000Z' }), supply('alloc-2'));
    expect(distributeEntry(allocations, entry(1, [{ id: 'alloc-1' }, { id: 'alloc-2' }]), who(), source)).toEqual([distributed('alloc-2', 1, 0, source)]);
  });
});

describe('ledgerEvents', () => {
  const source = challengeSource();

  it('XP then points, each only when positive', () => {
    expect(ledgerEvents(who(), 5, 7, 'influence', source)).toEqual([xpEarned(7, 'influence', source), pointsEarned(5, source)]);
    expect(ledgerEvents(who(), 5, 0, 'influence', source)).toEqual([pointsEarned(5, source)]);
    expect(ledgerEvents(who(), 0, 7, 'influence', source)).toEqual([xpEarned(7, 'influence', source)]);
    expect(ledgerEvents(who(), 0, 0, 'influence', source)).toEqual([]);
  });
});

describe('decideCustomEvent: allocations through the engine', () => {
  it('an entries allocation of an action stops paying once its draw has come; the action still completes', () => {
    const subject = challenge({ actions: [action('a1', 'visit-store', { distribution: entry(1, [{ id: 'alloc-1' }]) }), action('a2', 'buy-coffee')] });
    const allocations = allocationMap(supply('alloc-1', { rewardKind: 'entries', drawsAt: AT }));
    const outcome = decide(customEvent('visit-store'), [subject], { allocations });
    expect(types(outcome)).toContain('ActionCompleted');
    expect(outcome.distributions).toEqual([]);
    expect(outcome.allocations.get('alloc-1')?.distributed).toBe(0);
  });

  it('an unknown allocation id of an action pays nothing', () => {
    const subject = challenge({ actions: [action('a1', 'visit-store', { distribution: entry(1, [{ id: 'alloc-gone' }]) }), action('a2', 'buy-coffee')] });
    expect(decide(customEvent('visit-store'), [subject]).distributions).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Several challenges
// ---------------------------------------------------------------------------------------------------------

describe('decideCustomEvent: one event, several challenges', () => {
  it('both matching challenges of the community progress; one StreakExtended; a shared allocation pays once when its supply allows once', () => {
    const shared = entry(1, [{ id: 'alloc-shared' }], 2, 0);
    const a = challenge({ challengeId: 'challenge-a', actions: [action('a1', 'visit-store', { distribution: shared })] });
    const b = challenge({
      challengeId: 'challenge-b',
      isLinear: false,
      actions: [action('b1', 'check-in'), action('b2', 'visit-store', { category: 'influence', xp: 4, distribution: shared })],
    });
    const elsewhere = challenge({ challengeId: 'challenge-c', communityId: OTHER_COMMUNITY, actions: [action('c1', 'visit-store')] });
    const expired = challenge({ challengeId: 'challenge-d', expiresAt: '2026-01-10T00:00:00.000Z', actions: [action('d1', 'visit-store')] });
    const allocations = allocationMap(supply('alloc-shared', { supply: 1 }));

    const outcome = decide(customEvent('visit-store'), [a, elsewhere, b, expired], { allocations });

    expect(outcome.events).toEqual([
      started(1, AT, 'challenge-a'),
      attempted('a1', 'visit-store', 0, 'completed', true, AT, 'challenge-a'),
      actionCompleted('a1', 'visit-store', 0, 1, 'knowledge', AT, 'challenge-a'),
      xpEarned(10, 'knowledge', actionSource('a1', 'challenge-a')),
      pointsEarned(2, actionSource('a1', 'challenge-a')),
      challengeCompleted(1, AT, 'challenge-a'),
      started(1, AT, 'challenge-b'),
      attempted('b2', 'visit-store', 1, 'completed', true, AT, 'challenge-b'),
      actionCompleted('b2', 'visit-store', 1, 1, 'influence', AT, 'challenge-b'),
      xpEarned(4, 'influence', actionSource('b2', 'challenge-b')),
      pointsEarned(2, actionSource('b2', 'challenge-b')),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
    expect(outcome.distributions).toEqual([distributed('alloc-shared', 1, 0, actionSource('a1', 'challenge-a'))]);
    expect(outcome.allocations.get('alloc-shared')?.distributed).toBe(1);
    expect(outcome.progress.get('challenge-a')).toEqual({ run: 1, open: false, completedActionIds: ['a1'], completionsByPeriod: { open: 1 } });
    expect(outcome.progress.get('challenge-b')).toEqual({ run: 1, open: true, completedActionIds: ['b2'], completionsByPeriod: {} });
    expect(outcome.progress.has('challenge-c')).toBe(false);
    expect(outcome.progress.has('challenge-d')).toBe(false);
    expect(outcome.streak).toEqual({ lastDay: LOCAL_DAY, current: 1, longest: 1 });
  });

  it('one challenge refusing (limit-reached) and another completing: the streak is still extended once', () => {
    const a = challenge({ challengeId: 'challenge-a', actions: [action('a1', 'visit-store', { xp: 0 })] });
    const b = challenge({ challengeId: 'challenge-b', actions: [action('b1', 'visit-store', { xp: 0 }), action('b2', 'buy-coffee')] });
    const progress = new Map([['challenge-a', { run: 1, open: false, completedActionIds: ['a1'], completionsByPeriod: { open: 1 } }]]);
    const outcome = decide(customEvent('visit-store'), [a, b], { progress });
    expect(outcome.events).toEqual([
      attempted('a1', 'visit-store', 0, 'limit-reached', true, AT, 'challenge-a'),
      started(1, AT, 'challenge-b'),
      attempted('b1', 'visit-store', 0, 'completed', true, AT, 'challenge-b'),
      actionCompleted('b1', 'visit-store', 0, 1, 'knowledge', AT, 'challenge-b'),
      streakExtended(LOCAL_DAY, 1, 1),
    ]);
  });

  it('no challenge completing anything: no StreakExtended at all', () => {
    const a = challenge({ challengeId: 'challenge-a', actions: [action('a1', 'warm-up'), action('a2', 'visit-store')] });
    const b = challenge({ challengeId: 'challenge-b', actions: [action('b1', 'visit-store', { criteria: [{ field: 'x', operator: 'exists' }] })] });
    const outcome = decide(customEvent('visit-store'), [a, b]);
    expect(types(outcome)).toEqual(['ChallengeStarted', 'ActionAttempted', 'ChallengeStarted', 'ActionAttempted']);
    expect(outcome.events.filter((event) => event.type === 'ActionAttempted').map((event) => event.type === 'ActionAttempted' && event.data.outcome)).toEqual([
      'out-of-order',
      'criteria-not-met',
    ]);
  });
});
