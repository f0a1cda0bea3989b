import { z } from 'zod';
import {
  EDITABLE_FIELDS,
  LEADERBOARD_STATUSES,
  LEGAL_TRANSITIONS,
  METRIC_TYPES,
  PERIODS,
  distributionProblems,
  metricFitsPeriod,
} from '../../domain/leaderboard.ts';
import { dateTime, hexId, whenValid } from './common.ts';
import { distributionInput, distributionOutput } from './distribution.ts';

export const conditionSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('community'), communityId: hexId.describe('filters participants by community') }),
    z.object({
      type: z.literal('variable-config'),
      variableConfigId: hexId,
      value: z.union([z.string().max(1000), z.number(), z.boolean()]).describe('the value the user variable must match'),
    }),
  ])
  .meta({ id: 'LeaderboardCondition' });

const leaderboardName = z.string().trim().min(1).max(200);
const leaderboardDescription = z.string().max(2000).nullable();
const leaderboardExpiry = dateTime.nullable().describe('must be after startsAt');
const leaderboardConditions = z.array(conditionSchema).max(50);

export const createLeaderboardBody = z
  .object({
    name: leaderboardName,
    description: leaderboardDescription.optional(),
    metricType: z.enum(METRIC_TYPES),
    startsAt: dateTime.describe('ISO 8601 date-time (Z or offset) or date; the first window starts here'),
    expiresAt: leaderboardExpiry.optional(),
    status: z.enum(LEADERBOARD_STATUSES),
    period: z.enum(PERIODS),
    conditions: leaderboardConditions.default([]),
  })
  .superRefine((body, ctx) => {
    if (!metricFitsPeriod(body.metricType, body.period)) {
      ctx.addIssue({ code: 'custom', path: ['metricType'], message: `${body.metricType} cannot vary within a ${body.period} period` });
    }
    if (body.expiresAt && Date.parse(body.expiresAt) <= Date.parse(body.startsAt)) {
      ctx.addIssue({ code: 'custom', path: ['expiresAt'], message: 'must be after startsAt' });
    }
  }, whenValid)
  .meta({
    id: 'CreateLeaderboard',
    description: 'A metric that cannot vary within its period (consistent-weeks with daily or weekly, qualifying-active-days with daily) is rejected with 400.',
  });

export const leaderboardConfigSchema = z
  .object({
    id: hexId,
    organisationId: hexId,
    name: z.string().min(1),
    description: z.string().nullable(),
    metricType: z.enum(METRIC_TYPES),
    period: z.enum(PERIODS),
    startsAt: z.string(),
    expiresAt: z.string().nullable(),
    status: z.enum(LEADERBOARD_STATUSES),
    conditions: z.array(conditionSchema),
    rewardsConfig: z
      .array(z.object({ startRank: z.number().int().min(1), endRank: z.number().int().min(1), distributionEventId: hexId }))
      .describe('one entry per rank range of the distribution, by startRank'),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
    updatedBy: z.string().describe('id of the API token that last changed it'),
  })
  .meta({ id: 'LeaderboardConfig' });

const transitions = Object.entries(LEGAL_TRANSITIONS)
  .map(([from, to]) => `${from} → ${to.length ? to.join(' | ') : 'nothing'}`)
  .join('; ');

export const updateLeaderboardBody = z
  .strictObject({
    status: z.enum(LEADERBOARD_STATUSES).optional().describe(`legal moves: ${transitions}`),
    name: leaderboardName.optional(),
    description: leaderboardDescription.optional(),
    expiresAt: leaderboardExpiry.optional(),
    conditions: leaderboardConditions.optional(),
  })
  .refine((body) => Object.values(body).some((value) => value !== undefined), { message: `send at least one of status, ${EDITABLE_FIELDS.join(', ')}` })
  .meta({
    id: 'UpdateLeaderboard',
    description:
      `Changes the status (${transitions}; an illegal move is a 409, the current status again changes nothing) and, only while the ` +
      'leaderboard is draft or scheduled, name, description, expiresAt and conditions (otherwise 409). A field sent with its current ' +
      'value is not a change. metricType, period and startsAt cannot be changed: sending them, or any other field, is a 400.',
  });

const rank = z.number().int().min(1);

export const rankDistributionInput = distributionInput
  .extend({ startRank: rank.describe('first rank of the range, inclusive'), endRank: rank.describe('last rank of the range, inclusive; >= startRank') })
  .meta({ id: 'LeaderboardRankDistributionInput' });

export const assignLeaderboardRewardsBody = z
  .strictObject({ rewards: z.array(rankDistributionInput).max(100) })
  .superRefine((body, ctx) => {
    for (const problem of distributionProblems(body.rewards)) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message });
  }, whenValid)
  .meta({
    id: 'AssignLeaderboardRewards',
    description:
      'Replaces the whole distribution of the leaderboard (an empty array removes it). Rank ranges must not overlap; an allocation id ' +
      'may appear once. Each range gets a new distributionEventId, each allocation without an id gets one. An archived or expired ' +
      'leaderboard refuses new distributions (409).',
  });

export const leaderboardDistributionSchema = z
  .object({
    leaderboardConfigId: hexId,
    rewards: z.array(
      distributionOutput.extend({
        startRank: z.number(),
        endRank: z.number(),
        distributionEventId: hexId.describe('identifies this rank range in the config’s rewardsConfig'),
      }),
    ),
  })
  .meta({
    id: 'LeaderboardDistribution',
    description: 'Rank ranges by startRank. `distributed` counts what the engine has paid at window ends; `isLive` is distributed < supply.',
  });
