import { z } from 'zod';
import { LEADERBOARD_STATUSES, METRIC_TYPES, PERIODS, metricFitsPeriod } from '../../domain/leaderboard.ts';
import { dateTime, hexId } from './common.ts';

export const conditionSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('community'), communityId: hexId.describe('filters participants by community') }),
    z.object({
      type: z.literal('variable-config'),
      variableConfigId: hexId,
      value: z.union([z.string(), z.number(), z.boolean()]).describe('the value the user variable must match'),
    }),
  ])
  .meta({ id: 'LeaderboardCondition' });

export const createLeaderboardBody = z
  .object({
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    metricType: z.enum(METRIC_TYPES),
    startsAt: dateTime.describe('ISO 8601 date-time (Z or offset) or date; the first window starts here'),
    expiresAt: dateTime.nullable().optional().describe('must be after startsAt'),
    status: z.enum(LEADERBOARD_STATUSES),
    period: z.enum(PERIODS),
    conditions: z.array(conditionSchema).max(50).default([]),
  })
  .superRefine((body, ctx) => {
    if (!metricFitsPeriod(body.metricType, body.period)) {
      ctx.addIssue({ code: 'custom', path: ['metricType'], message: `${body.metricType} cannot vary within a ${body.period} period` });
    }
    if (body.expiresAt && Date.parse(body.expiresAt) <= Date.parse(body.startsAt)) {
      ctx.addIssue({ code: 'custom', path: ['expiresAt'], message: 'must be after startsAt' });
    }
  })
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
    rewardsConfig: z.array(z.object({ startRank: z.number().int().min(1), endRank: z.number().int().min(1), distributionEventId: hexId })),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().describe('id of the API token that created it'),
    updatedBy: z.string().describe('id of the API token that last changed it'),
  })
  .meta({ id: 'LeaderboardConfig' });
