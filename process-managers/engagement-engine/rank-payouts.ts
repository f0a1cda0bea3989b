import { LEADERBOARD_XP_CATEGORY, distributeEntry, ledgerEvents } from '../../domain/engagement.ts';
import type { AllocationDistributedEvent, EngagementEvent, LeaderboardWindowEvent, PayoutSource } from '../../domain/engagement-events.ts';
import type { RankDistribution } from '../../domain/leaderboard.ts';
import type { BatchContext, Recorded } from '../process-manager.ts';
import { OutcomeAppends } from './appends.ts';
import { lastActiveCommunities, loadAllocations, loadLeaderboard, ownedBy, supplies, type EngineDb } from './state.ts';

/**
 * Rank rewards once per (leaderboard, window, user, tier): the window closes once, and this applies once.
 * Each rewarded user is paid in the leaderboard's community, else where they were last active.
 */
export async function payRankRewards(db: EngineDb, cause: Recorded<LeaderboardWindowEvent>, context: BatchContext): Promise<void> {
  const closed = cause.data;
  const leaderboard = await loadLeaderboard(db, closed.leaderboardId);
  if (!leaderboard) return;
  const tiers = leaderboard.rewards;
  const rows = await loadAllocations(
    db,
    tiers.flatMap((tier) => tier.rewardsConfig.allocations.map((a) => a.id)),
  );
  const allocations = supplies(ownedBy(rows, closed.organisationId));
  const rewarded = (tier: RankDistribution) => closed.standings.filter((s) => s.rank >= tier.startRank && s.rank <= tier.endRank);
  const userIds = tiers.flatMap((tier) => rewarded(tier).map((standing) => standing.userId));
  const leaderboardCommunity = leaderboard.communityId;
  const communities = leaderboardCommunity ? new Map(userIds.map((userId) => [userId, leaderboardCommunity])) : await lastActiveCommunities(db, userIds);
  const facts: EngagementEvent[] = [];
  const distributions: AllocationDistributedEvent[] = [];
  for (const tier of tiers) {
    for (const standing of rewarded(tier)) {
      const communityId = communities.get(standing.userId);
      if (!communityId) continue;
      const who = { organisationId: closed.organisationId, communityId, userId: standing.userId, occurredAt: closed.windowEnd };
      const source: PayoutSource = {
        kind: 'leaderboard',
        leaderboardId: closed.leaderboardId,
        windowStart: closed.windowStart,
        startRank: tier.startRank,
        endRank: tier.endRank,
        rank: standing.rank,
      };
      facts.push(...ledgerEvents(who, tier.pointsToDistribute, tier.bonusXpToDistribute, LEADERBOARD_XP_CATEGORY, source));
      distributions.push(...distributeEntry(allocations, tier, who, source));
    }
  }
  const outcome = new OutcomeAppends(rows);
  outcome.add(cause, `leaderboardpayout-${closed.leaderboardId}-${Date.parse(closed.windowStart)}`, facts, distributions, cause.id);
  await outcome.appendAndRecord(db, context);
}
