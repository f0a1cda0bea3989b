import { idFrom } from './ids.ts';
import type { FrozenStanding } from './engagement-events.ts';
import type { Condition, RankReward } from './leaderboard.ts';

/**
 * Achievements: milestones a user earned in a community, read from the engine's facts (DESIGN §6).
 * - `challenge-completed`: each completion of a challenge (every run of a repeatable one counts);
 * - `streak-milestone`: the user's current daily streak in the community reaching one of `STREAK_MILESTONES`
 *   days (a streak that breaks and grows again earns its milestones again);
 * - `leaderboard-placing`: a rank inside one of the leaderboard's rank-reward ranges when a window closed,
 *   in the community the rank rewards go to (the leaderboard's community condition, else the community the
 *   user was last active in; none: no placing, as no pay-out either).
 */
export const ACHIEVEMENT_TYPES = ['challenge-completed', 'streak-milestone', 'leaderboard-placing'] as const;
export type AchievementType = (typeof ACHIEVEMENT_TYPES)[number];

export const STREAK_MILESTONES = [3, 7, 14, 30, 60, 100, 365] as const;

interface Earned {
  id: string;
  organisationId: string;
  userId: string;
  communityId: string;
  earnedAt: string;
}

export type Achievement = Earned &
  (
    | { type: 'challenge-completed'; challengeId: string; run: number }
    | { type: 'streak-milestone'; streakDays: number }
    | {
        type: 'leaderboard-placing';
        leaderboardId: string;
        leaderboardName: string;
        windowStart: string;
        windowEnd: string;
        rank: number;
        score: number;
      }
  );

/** A streak moves one day at a time (or back to 1), so it reaches a milestone exactly when it equals one. */
export function isStreakMilestone(currentStreak: number): boolean {
  return (STREAK_MILESTONES as readonly number[]).includes(currentStreak);
}

/** The ranked users of a closed window inside any rank-reward range (once each, even where ranges overlap). */
export function placings(standings: readonly FrozenStanding[], ranges: readonly Pick<RankReward, 'startRank' | 'endRank'>[]): FrozenStanding[] {
  return standings.filter((standing) => ranges.some((range) => standing.rank >= range.startRank && standing.rank <= range.endRank));
}

/** The community a leaderboard's conditions restrict it to, if any: where its pay-outs (and placings) land. */
export function leaderboardCommunity(conditions: readonly Condition[]): string | null {
  return conditions.find((condition) => condition.type === 'community')?.communityId ?? null;
}

/** An achievement's id, derived from the fact that earned it (and the user, for a window's placings). */
export function achievementId(eventId: string, userId?: string): string {
  return idFrom(userId === undefined ? `achievement:${eventId}` : `achievement:${eventId}:${userId}`);
}
