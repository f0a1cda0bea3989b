import type { Action, ActionCategory, ChallengeRecord } from './challenge.ts';
import { meetsCriteria } from './criteria.ts';
import type { CustomEventLoggedData } from './custom-event.ts';
import type { Allocation, DistributionEntry } from './distribution-entry.ts';
import type { AllocationDistributedEvent, AttemptOutcome, EngagementEvent, PayoutSource } from './engagement-events.ts';
import { completionPeriodKey, dayBefore, localDate } from './windows.ts';

/**
 * The engagement engine's decisions (DESIGN §6), pure: given a logged custom event and what the engine
 * knows (the community's live challenges, the user's progress in them, the allocations' supply, the
 * user's streak), the facts it causes. The process manager (`process-managers/engagement-engine/`) loads the
 * state, calls these, appends the events and saves the new state in one transaction.
 */

/** A user's progress in one challenge. */
export interface ChallengeProgress {
  /** Runs started so far; the current run is `run` while `open`. */
  run: number;
  open: boolean;
  /** Actions completed in the current run. */
  completedActionIds: string[];
  /** Challenge completions per period key (see `completionPeriodKey`), for `maxCompletionsPerPeriod`. */
  completionsByPeriod: Record<string, number>;
}

export const NO_PROGRESS: ChallengeProgress = { run: 0, open: false, completedActionIds: [], completionsByPeriod: {} };

/** An allocation as the engine decides on it: its supply, what has gone, and its reward's terms. */
export interface AllocationSupply {
  allocationId: string;
  rewardId: string;
  rewardKind: 'entries' | 'asset';
  supply: number;
  distributed: number;
  /** An entries reward's draw time: entries stop once it has come. */
  drawsAt: string | null;
}

export interface StreakState {
  lastDay: string | null;
  current: number;
  longest: number;
}

export const NO_STREAK: StreakState = { lastDay: null, current: 0, longest: 0 };

export interface Who {
  organisationId: string;
  communityId: string;
  userId: string;
  occurredAt: string;
}

/** What a decision produced and the state it leaves, for the caller to append and save. */
export interface Outcome {
  events: EngagementEvent[];
  distributions: AllocationDistributedEvent[];
  progress: Map<string, ChallengeProgress>;
  allocations: Map<string, AllocationSupply>;
  streak: StreakState;
}

export interface CustomEventDecision {
  event: CustomEventLoggedData;
  timeZone: string;
  /** The challenges of the event's community; the ones not live at the event's time are ignored. */
  challenges: ChallengeRecord[];
  progress: Map<string, ChallengeProgress>;
  allocations: Map<string, AllocationSupply>;
  streak: StreakState;
}

/** The challenge rewards' XP goes to this bucket: a challenge spans categories, finishing it is taking part. */
export const CHALLENGE_XP_CATEGORY: ActionCategory = 'participation';
/** Leaderboard bonus XP goes here too (and never counts towards `total-xp`). */
export const LEADERBOARD_XP_CATEGORY: ActionCategory = 'participation';

export function isLive(challenge: Pick<ChallengeRecord, 'startsAt' | 'expiresAt'>, at: string): boolean {
  const time = Date.parse(at);
  return Date.parse(challenge.startsAt) <= time && time < Date.parse(challenge.expiresAt);
}

/**
 * Hands `amount` units of an allocation to a user when the allocation can give them all: it exists, has
 * the supply left, and (for a giveaway) its draw has not come. Returns the event, or null; updates `allocations`.
 */
export function handOut(
  allocations: Map<string, AllocationSupply>,
  allocationId: string,
  amount: number,
  who: Who,
  source: PayoutSource,
): AllocationDistributedEvent | null {
  const allocation = allocations.get(allocationId);
  if (!allocation || amount < 1) return null;
  if (allocation.distributed + amount > allocation.supply) return null;
  if (allocation.rewardKind === 'entries' && allocation.drawsAt !== null && Date.parse(allocation.drawsAt) <= Date.parse(who.occurredAt)) return null;
  allocations.set(allocationId, { ...allocation, distributed: allocation.distributed + amount });
  return {
    type: 'AllocationDistributed',
    data: {
      ...who,
      allocationId,
      rewardId: allocation.rewardId,
      rewardKind: allocation.rewardKind,
      amount,
      firstUnit: allocation.distributed,
      source,
    },
  };
}

/**
 * A distribution entry's reward hand-outs: `rewardsConfig.amountToDistribute` is how many of the listed
 * allocations pay out, the first ones in order that can; each pays its own `amountToDistribute` units.
 */
export function distributeEntry(
  allocations: Map<string, AllocationSupply>,
  entry: Pick<DistributionEntry, 'rewardsConfig'>,
  who: Who,
  source: PayoutSource,
): AllocationDistributedEvent[] {
  return payFirst(
    allocations,
    entry.rewardsConfig.allocations.map((allocation: Allocation) => ({ allocationId: allocation.id, amount: allocation.amountToDistribute })),
    entry.rewardsConfig.amountToDistribute,
    who,
    source,
  );
}

function payFirst(
  allocations: Map<string, AllocationSupply>,
  candidates: { allocationId: string; amount: number }[],
  count: number,
  who: Who,
  source: PayoutSource,
): AllocationDistributedEvent[] {
  const paid: AllocationDistributedEvent[] = [];
  for (const candidate of candidates) {
    if (paid.length >= count) break;
    const event = handOut(allocations, candidate.allocationId, candidate.amount, who, source);
    if (event) paid.push(event);
  }
  return paid;
}

/** Points and XP, each only when there is some. */
export function ledgerEvents(who: Who, points: number, xp: number, category: ActionCategory, source: PayoutSource): EngagementEvent[] {
  const events: EngagementEvent[] = [];
  if (xp > 0) events.push({ type: 'XpEarned', data: { ...who, category, amount: xp, source } });
  if (points > 0) events.push({ type: 'PointsEarned', data: { ...who, amount: points, source } });
  return events;
}

/** The daily streak after a completion on `day`: the same day changes nothing, the next day extends it, a gap restarts it. */
export function extendStreak(streak: StreakState, day: string): StreakState | null {
  if (streak.lastDay === day) return null;
  if (streak.lastDay !== null && day < streak.lastDay) return null;
  const current = streak.lastDay === dayBefore(day) ? streak.current + 1 : 1;
  return { lastDay: day, current, longest: Math.max(streak.longest, current) };
}

/** Whether the actions before this one that may not be skipped are done (linear challenges). */
function inOrder(actions: Action[], index: number, completed: ReadonlySet<string>): boolean {
  return actions.slice(0, index).every((action) => action.isSkippable || completed.has(action.actionId));
}

export function decideCustomEvent(input: CustomEventDecision): Outcome {
  const { event, timeZone } = input;
  const who: Who = { organisationId: event.organisationId, communityId: event.communityId, userId: event.userId, occurredAt: event.occurredAt };
  const progress = new Map(input.progress);
  const allocations = new Map(input.allocations);
  const events: EngagementEvent[] = [];
  const distributions: AllocationDistributedEvent[] = [];
  let streak = input.streak;
  let completedSomething = false;

  for (const challenge of input.challenges) {
    if (challenge.communityId !== event.communityId || !isLive(challenge, event.occurredAt)) continue;
    const stepIndex = challenge.actions.findIndex((action) => action.key === event.name);
    if (stepIndex < 0) continue;
    const action = challenge.actions[stepIndex]!;
    const challengeId = challenge.challengeId;
    let state = progress.get(challengeId) ?? NO_PROGRESS;
    const periodKey = completionPeriodKey(challenge.period, timeZone, event.occurredAt);
    const criteriaMet = meetsCriteria(action.criteria, event.payload);
    const attempt = (outcome: AttemptOutcome): EngagementEvent => ({
      type: 'ActionAttempted',
      data: { ...who, customEventId: event.eventId, challengeId, actionId: action.actionId, actionKey: action.key, stepIndex, criteriaMet, outcome },
    });

    if (!state.open) {
      if ((state.completionsByPeriod[periodKey] ?? 0) >= challenge.maxCompletionsPerPeriod) {
        events.push(attempt('limit-reached'));
        continue;
      }
      state = { ...state, run: state.run + 1, open: true, completedActionIds: [] };
      events.push({ type: 'ChallengeStarted', data: { ...who, customEventId: event.eventId, challengeId, run: state.run } });
    }

    const completed = new Set(state.completedActionIds);
    const outcome: AttemptOutcome = completed.has(action.actionId)
      ? 'already-completed'
      : !criteriaMet
        ? 'criteria-not-met'
        : challenge.isLinear && !inOrder(challenge.actions, stepIndex, completed)
          ? 'out-of-order'
          : 'completed';
    events.push(attempt(outcome));
    if (outcome !== 'completed') {
      progress.set(challengeId, state);
      continue;
    }

    completedSomething = true;
    completed.add(action.actionId);
    state = { ...state, completedActionIds: [...state.completedActionIds, action.actionId] };
    events.push({
      type: 'ActionCompleted',
      data: {
        ...who,
        customEventId: event.eventId,
        challengeId,
        actionId: action.actionId,
        actionKey: action.key,
        stepIndex,
        category: action.category,
        run: state.run,
      },
    });
    const actionSource: PayoutSource = { kind: 'action', challengeId, actionId: action.actionId, customEventId: event.eventId };
    const distribution = action.distribution;
    events.push(
      ...ledgerEvents(who, distribution?.pointsToDistribute ?? 0, action.xp + (distribution?.bonusXpToDistribute ?? 0), action.category, actionSource),
    );
    if (distribution) distributions.push(...distributeEntry(allocations, distribution, who, actionSource));

    if (challenge.actions.every((candidate) => candidate.isSkippable || completed.has(candidate.actionId))) {
      state = {
        ...state,
        open: false,
        completionsByPeriod: { ...state.completionsByPeriod, [periodKey]: (state.completionsByPeriod[periodKey] ?? 0) + 1 },
      };
      events.push({ type: 'ChallengeCompleted', data: { ...who, customEventId: event.eventId, challengeId, run: state.run } });
      const reward = challenge.rewardDistribution;
      const challengeSource: PayoutSource = { kind: 'challenge', challengeId, customEventId: event.eventId };
      events.push(...ledgerEvents(who, reward.points, reward.xp, CHALLENGE_XP_CATEGORY, challengeSource));
      distributions.push(
        ...payFirst(
          allocations,
          reward.rewardAllocations.map((allocation) => ({ allocationId: allocation.allocationId, amount: allocation.amountToDistribute })),
          reward.numberOfRewardsToReceive,
          who,
          challengeSource,
        ),
      );
    }
    progress.set(challengeId, state);
  }

  if (completedSomething) {
    const extended = extendStreak(streak, localDate(event.occurredAt, timeZone));
    if (extended) {
      streak = extended;
      events.push({ type: 'StreakExtended', data: { ...who, day: extended.lastDay!, currentStreak: extended.current, longestStreak: extended.longest } });
    }
  }
  return { events, distributions, progress, allocations, streak };
}
