import { achievementId, isStreakMilestone, leaderboardCommunity, placings } from './achievements.ts';
import type { CustomEventEvent } from './custom-event.ts';
import type { AllocationDistributedEvent, EngagementEvent, GiveawayDrawnEvent, LeaderboardWindowEvent, RewardAssetEvent } from './engagement-events.ts';
import type { LeaderboardState, RankReward } from './leaderboard.ts';
import type { WebhookEventType, WebhookPayload } from './webhook.ts';

/**
 * What a domain fact tells receivers: each recorded event maps to zero or more messages of the public types,
 * `{type, timestamp, data}`, with the ids and figures a receiver acts on without calling back. The same
 * mapping serves live deliveries (the process manager, on its private copy of the leaderboards and assets)
 * and replays (the log read again, with the same copies folded from their streams), so a replayed event
 * says what its live delivery said.
 */
export type WebhookSourceEvent =
  | CustomEventEvent
  | Extract<EngagementEvent, { type: 'ActionCompleted' | 'ChallengeCompleted' | 'PointsEarned' | 'XpEarned' | 'StreakExtended' }>
  | AllocationDistributedEvent
  | RewardAssetEvent
  | GiveawayDrawnEvent
  | LeaderboardWindowEvent;

export const WEBHOOK_SOURCE_EVENT_TYPES = [
  'CustomEventLogged',
  'ActionCompleted',
  'ChallengeCompleted',
  'PointsEarned',
  'XpEarned',
  'StreakExtended',
  'AllocationDistributed',
  'RewardAssetGranted',
  'RewardAssetClaimed',
  'RewardAssetRedeemed',
  'GiveawayDrawn',
  'LeaderboardWindowClosed',
] as const satisfies readonly WebhookSourceEvent['type'][];

/** A leaderboard as it stood when a window closed: what its placings need. */
export interface LeaderboardTerms {
  name: string;
  communityId: string | null;
  ranges: Pick<RankReward, 'startRank' | 'endRank'>[];
}

/** A granted asset, for its claim and redemption (whose events name only the asset). */
export interface AssetTerms {
  rewardId: string;
  allocationId: string | null;
  communityId: string;
}

export interface MessageLookups {
  leaderboard(leaderboardId: string): LeaderboardTerms | undefined;
  asset(assetId: string): AssetTerms | undefined;
}

export interface WebhookMessage {
  /** Tells the messages of one event apart (a closed window places several users): part of the `webhook-id`. */
  key: string;
  payload: WebhookPayload;
}

/** At most this many standings go into `leaderboard.window_closed`; `rankedCount` says how many there were. */
export const WINDOW_STANDINGS_SENT = 100;

export function leaderboardTermsOf(state: LeaderboardState): LeaderboardTerms | undefined {
  if (!state.exists) return undefined;
  return {
    name: state.name,
    communityId: leaderboardCommunity(state.conditions),
    ranges: state.rewardsConfig.map(({ startRank, endRank }) => ({ startRank, endRank })),
  };
}

/** The leaderboards and assets an event's messages need to look up. */
export function lookupsOf(event: WebhookSourceEvent): { leaderboardId?: string; assetId?: string } {
  if (event.type === 'LeaderboardWindowClosed') return { leaderboardId: event.data.leaderboardId };
  if (event.type === 'RewardAssetClaimed' || event.type === 'RewardAssetRedeemed') return { assetId: event.data.assetId };
  return {};
}

function message(type: WebhookEventType, timestamp: string, data: Record<string, unknown>, key: string = type): WebhookMessage {
  return { key, payload: { type, timestamp, data } };
}

export function webhookMessages(event: WebhookSourceEvent & { id: string }, lookups: MessageLookups): WebhookMessage[] {
  switch (event.type) {
    case 'CustomEventLogged': {
      const { eventId, name, userId, externalUserId, communityId, payload, nonce, source, occurredAt } = event.data;
      return [
        message('custom_event.logged', occurredAt, { id: eventId, name, userId, externalUserId, communityId, payload, nonce, source, createdAt: occurredAt }),
      ];
    }
    case 'ActionCompleted': {
      const { userId, communityId, challengeId, actionId, actionKey, stepIndex, category, run, customEventId, occurredAt } = event.data;
      return [
        message('action.completed', occurredAt, {
          userId,
          communityId,
          challengeId,
          actionId,
          actionKey,
          stepIndex,
          category,
          run,
          customEventId,
          completedAt: occurredAt,
        }),
      ];
    }
    case 'ChallengeCompleted': {
      const { userId, communityId, challengeId, run, customEventId, occurredAt } = event.data;
      return [
        message('challenge.completed', occurredAt, { userId, communityId, challengeId, run, customEventId, completedAt: occurredAt }),
        // The achievement as `GET /integration/achievements` lists it (the same id).
        message('achievement.earned', occurredAt, {
          id: achievementId(event.id),
          type: 'challenge-completed',
          userId,
          communityId,
          earnedAt: occurredAt,
          challengeId,
          run,
        }),
      ];
    }
    case 'PointsEarned': {
      const { userId, communityId, amount, source, occurredAt } = event.data;
      return [message('points.awarded', occurredAt, { userId, communityId, amount, source, awardedAt: occurredAt })];
    }
    case 'XpEarned': {
      const { userId, communityId, category, amount, source, occurredAt } = event.data;
      return [message('xp.awarded', occurredAt, { userId, communityId, category, amount, source, awardedAt: occurredAt })];
    }
    case 'StreakExtended': {
      const { userId, communityId, day, currentStreak, longestStreak, occurredAt } = event.data;
      const streak = message('streak.extended', occurredAt, { userId, communityId, day, currentStreak, longestStreak, extendedAt: occurredAt });
      if (!isStreakMilestone(currentStreak)) return [streak];
      const achievement = { id: achievementId(event.id), type: 'streak-milestone', userId, communityId, earnedAt: occurredAt, streakDays: currentStreak };
      return [streak, message('achievement.earned', occurredAt, achievement)];
    }
    case 'AllocationDistributed': {
      // An asset hand-out is told by `reward_asset.granted`, one per asset.
      if (event.data.rewardKind !== 'entries') return [];
      const { userId, communityId, rewardId, allocationId, amount, source, occurredAt } = event.data;
      return [message('reward_entry.awarded', occurredAt, { userId, communityId, rewardId, allocationId, entries: amount, source, awardedAt: occurredAt })];
    }
    case 'RewardAssetGranted': {
      const { assetId, rewardId, allocationId, userId, communityId, eventSourceId, code, expiresAt, redeemable, tags, metadata, occurredAt } = event.data;
      return [
        message('reward_asset.granted', occurredAt, {
          assetId,
          rewardId,
          allocationId,
          userId,
          communityId,
          eventSourceId,
          code,
          expiresAt,
          redeemByDate: redeemable.redeemByDate,
          tags,
          metadata,
          grantedAt: occurredAt,
        }),
      ];
    }
    case 'RewardAssetClaimed': {
      const { assetId, userId, claimedAt } = event.data;
      return [message('reward_asset.claimed', claimedAt, { assetId, ...assetTerms(lookups, assetId), userId, claimedAt })];
    }
    case 'RewardAssetRedeemed': {
      const { assetId, userId, redeemedAt, information } = event.data;
      return [message('reward_asset.redeemed', redeemedAt, { assetId, ...assetTerms(lookups, assetId), userId, redeemedAt, information })];
    }
    case 'GiveawayDrawn': {
      const { rewardId, communityId, drawnAt, seed, entrants, winners } = event.data;
      return [
        message('giveaway.drawn', drawnAt, {
          rewardId,
          communityId,
          drawnAt,
          entrantCount: entrants.length,
          totalEntries: entrants.reduce((sum, entrant) => sum + entrant.entries, 0),
          winners,
          seed,
        }),
      ];
    }
    case 'LeaderboardWindowClosed': {
      const { leaderboardId, windowStart, windowEnd, closedAt, standings } = event.data;
      const leaderboard = lookups.leaderboard(leaderboardId);
      const closed = message('leaderboard.window_closed', closedAt, {
        leaderboardId,
        leaderboardName: leaderboard?.name ?? null,
        windowStart,
        windowEnd,
        closedAt,
        rankedCount: standings.length,
        standings: standings.slice(0, WINDOW_STANDINGS_SENT).map(({ rank, userId, score, reachedAt }) => ({ rank, userId, score, reachedAt })),
      });
      if (!leaderboard) return [closed];
      // A placing: a rank inside one of the leaderboard's rank-reward ranges when the window closed.
      const placed = placings(standings, leaderboard.ranges).map((standing) =>
        message(
          'achievement.earned',
          windowEnd,
          {
            id: achievementId(event.id, standing.userId),
            type: 'leaderboard-placing',
            userId: standing.userId,
            communityId: leaderboard.communityId,
            earnedAt: windowEnd,
            leaderboardId,
            leaderboardName: leaderboard.name,
            windowStart,
            windowEnd,
            rank: standing.rank,
            score: standing.score,
          },
          `achievement.earned:${standing.userId}`,
        ),
      );
      return [closed, ...placed];
    }
  }
}

function assetTerms(lookups: MessageLookups, assetId: string) {
  const asset = lookups.asset(assetId);
  return { rewardId: asset?.rewardId ?? null, allocationId: asset?.allocationId ?? null, communityId: asset?.communityId ?? null };
}
