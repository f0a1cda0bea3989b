import type { DomainEvent } from './decider.ts';
import type { ActionCategory } from './challenge.ts';
import type { Redeemable } from './reward.ts';
import type { DetailsBlock } from './localised-details.ts';

/**
 * What the engagement engine records. Every fact carries the organisation, community and user it is about
 * and `occurredAt`: the time of the custom event (or window close, or draw) that caused it, which is the
 * time leaderboards and streaks count it at, whenever the engine got to it.
 *
 * Streams:
 * - `engagement-<customEventId>`: everything one custom event caused (attempts, completions, ledgers,
 *   streak), appended once, atomically with the allocations it drew from;
 * - `allocation-<allocationId>`: `AllocationDistributed`, appended at the revision the engine read, so a
 *   supply is never exceeded;
 * - `rewardasset-<assetId>`: `RewardAssetGranted`, then the user's claim and redemption;
 * - `leaderboardwindow-<leaderboardId>-<windowStartMillis>`: the frozen standings and the rank rewards;
 * - `reward-<rewardId>`: `GiveawayDrawn`, once.
 */
interface Fact {
  organisationId: string;
  communityId: string;
  userId: string;
  occurredAt: string;
}

/** Why points, XP or a reward were paid: leaderboard pay-outs are told apart so `total-xp` can leave them out. */
export type PayoutSource =
  | { kind: 'action'; challengeId: string; actionId: string; customEventId: string }
  | { kind: 'challenge'; challengeId: string; customEventId: string }
  | { kind: 'leaderboard'; leaderboardId: string; windowStart: string; startRank: number; endRank: number; rank: number }
  | { kind: 'giveaway'; rewardId: string };

export type AttemptOutcome = 'completed' | 'criteria-not-met' | 'out-of-order' | 'already-completed' | 'limit-reached';

export type EngagementEvent =
  | DomainEvent<
      'ActionAttempted',
      Fact & {
        customEventId: string;
        challengeId: string;
        actionId: string;
        actionKey: string;
        stepIndex: number;
        criteriaMet: boolean;
        outcome: AttemptOutcome;
      }
    >
  /** The first attempt of a run; `run` counts from 1 and grows each time a repeatable challenge restarts. */
  | DomainEvent<'ChallengeStarted', Fact & { customEventId: string; challengeId: string; run: number }>
  | DomainEvent<
      'ActionCompleted',
      Fact & { customEventId: string; challengeId: string; actionId: string; actionKey: string; stepIndex: number; category: ActionCategory; run: number }
    >
  | DomainEvent<'ChallengeCompleted', Fact & { customEventId: string; challengeId: string; run: number }>
  | DomainEvent<'PointsEarned', Fact & { amount: number; source: PayoutSource }>
  | DomainEvent<'XpEarned', Fact & { category: ActionCategory; amount: number; source: PayoutSource }>
  /** The user's daily streak in the community moved to `day` (a local date in the organisation's timezone). */
  | DomainEvent<'StreakExtended', Fact & { day: string; currentStreak: number; longestStreak: number }>;

export type AllocationDistributedEvent = DomainEvent<
  'AllocationDistributed',
  Fact & {
    allocationId: string;
    rewardId: string;
    rewardKind: 'entries' | 'asset';
    /** Units handed out: entries into the draw, or assets (one `RewardAssetGranted` each). */
    amount: number;
    /** `distributed` before this hand-out: units [firstUnit, firstUnit + amount) are this user's. */
    firstUnit: number;
    source: PayoutSource;
  }
>;

export interface RewardAssetGrant extends Fact {
  assetId: string;
  rewardId: string;
  allocationId: string | null;
  /** The custom event, window or draw that earned it (the contract's `eventSourceId`). */
  eventSourceId: string;
  /** The reward's details by language, as they were when the asset was granted. */
  details: Record<string, DetailsBlock>;
  tags: string[];
  campaigns: string[];
  additionalCommunityIds: string[];
  metadata: Record<string, unknown>;
  redeemable: Redeemable;
  /** The reward code of this unit, for a reward with codes. */
  code: string | null;
  expiresAt: string | null;
}

export type RewardAssetEvent =
  | DomainEvent<'RewardAssetGranted', RewardAssetGrant>
  | DomainEvent<'RewardAssetClaimed', { assetId: string; organisationId: string; userId: string; claimedAt: string }>
  | DomainEvent<
      'RewardAssetRedeemed',
      { assetId: string; organisationId: string; userId: string; redeemedAt: string; information: { variableConfigId: string; value: string }[] }
    >;

export interface FrozenStanding {
  rank: number;
  userId: string;
  score: number;
  reachedAt: string;
}

export type LeaderboardWindowEvent = DomainEvent<
  'LeaderboardWindowClosed',
  {
    leaderboardId: string;
    organisationId: string;
    windowStart: string;
    windowEnd: string;
    closedAt: string;
    /** Every ranked user (score > 0), rank 1 first. */
    standings: FrozenStanding[];
  }
>;

export type GiveawayDrawnEvent = DomainEvent<
  'GiveawayDrawn',
  {
    rewardId: string;
    organisationId: string;
    communityId: string;
    drawnAt: string;
    /** Recorded so the draw can be recomputed and audited: drawWinners(entrants, supply, seed). */
    seed: string;
    entrants: { userId: string; entries: number }[];
    winners: { userId: string; assetId: string }[];
  }
>;

/** The stream a leaderboard window's frozen standings go to: one per (leaderboard, window), so it closes once. */
export function leaderboardWindowStream(leaderboardId: string, windowStart: string): string {
  return `leaderboardwindow-${leaderboardId}-${Date.parse(windowStart)}`;
}
