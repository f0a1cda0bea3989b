import { z } from 'zod';
import { ACHIEVEMENT_TYPES, STREAK_MILESTONES } from '../../domain/achievements.ts';
import { pagination } from '../../infra/http/pagination.ts';
import { hexId } from './common.ts';

export const achievementsQuery = pagination.extend({
  type: z.enum(ACHIEVEMENT_TYPES).optional().describe('achievements of this type only'),
  communityId: hexId
    .transform((id) => id.toLowerCase())
    .optional()
    .describe('achievements earned in this community only (404 if the organisation has no such community)'),
});

const earned = {
  id: hexId.describe('stable: derived from the fact that earned it'),
  organisationId: hexId,
  userId: hexId,
  communityId: hexId.describe('the community where it was earned'),
  earnedAt: z.string().describe('ISO date-time it was earned: the time of the custom event, or the end of the leaderboard window'),
};

const challengeCompleted = z
  .object({
    type: z.literal('challenge-completed'),
    ...earned,
    challengeId: hexId,
    run: z.number().int().min(1).describe('which completion of the challenge by this user: 1, then 2 for a repeatable challenge done again, ...'),
  })
  .meta({ id: 'ChallengeCompletedAchievement', description: 'Each completion of a challenge.' });

const streakMilestone = z
  .object({
    type: z.literal('streak-milestone'),
    ...earned,
    streakDays: z
      .number()
      .int()
      .describe(`the current daily streak reached: one of ${STREAK_MILESTONES.join(', ')} (earned again by a streak that broke and grew back)`),
  })
  .meta({ id: 'StreakMilestoneAchievement', description: "The user's daily streak in the community reaching a milestone." });

const leaderboardPlacing = z
  .object({
    type: z.literal('leaderboard-placing'),
    ...earned,
    leaderboardId: hexId,
    leaderboardName: z.string().describe('as it was when the window closed'),
    windowStart: z.string().describe('the window, half-open [windowStart, windowEnd)'),
    windowEnd: z.string(),
    rank: z.number().int().min(1),
    score: z.number(),
  })
  .meta({
    id: 'LeaderboardPlacingAchievement',
    description:
      "A rank inside one of the leaderboard's rank-reward ranges when a window closed (once per window, however many ranges hold it), in the community its rank rewards went to.",
  });

export const achievementSchema = z.discriminatedUnion('type', [challengeCompleted, streakMilestone, leaderboardPlacing]).meta({
  id: 'Achievement',
  description: 'Something the user earned, by `type`; the fields after `earnedAt` depend on the type. Every field of its type is present.',
});

export type AchievementView = z.infer<typeof achievementSchema>;
