import { Router } from 'express';
import { z } from 'zod';
import { LEADERBOARD_STATUSES, METRIC_TYPES, PERIODS, leaderboardDecider, metricFitsPeriod, type LeaderboardConfig, type LeaderboardEvent } from '../domain/leaderboard.ts';
import { tenantOf } from '../infra/auth.ts';
import { eventMetadata, parse, setEventPosition } from '../infra/http/request-context.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import { handleCommand } from './command-handling.ts';
import type { ServiceContext } from './context.ts';

export const hexId = z.string().regex(ID_PATTERN, 'must be 24 hexadecimal characters');

/** An ISO 8601 date-time (with Z or an offset) or a calendar date; stored and returned in UTC ISO form. */
export const dateTime = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], { error: 'must be an ISO 8601 date-time such as 2026-01-05T00:00:00Z' })
  .transform((value) => new Date(value).toISOString());

export const conditionSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('community'), communityId: hexId }),
  z.object({ type: z.literal('variable-config'), variableConfigId: hexId, value: z.union([z.string(), z.number(), z.boolean()]) }),
]);

export const createLeaderboardBody = z
  .object({
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    metricType: z.enum(METRIC_TYPES),
    startsAt: dateTime,
    expiresAt: dateTime.nullable().optional(),
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
  });

export function leaderboardCommands(ctx: ServiceContext): Router {
  const router = Router();

  router.post('/leaderboards', async (req, res) => {
    const body = parse(createLeaderboardBody, req.body);
    const { organisationId } = tenantOf(res);
    const leaderboardId = newId();
    const metadata = eventMetadata(req, res);
    const handled = await handleCommand(
      ctx.store,
      [
        {
          stream: `leaderboard-${leaderboardId}`,
          decider: leaderboardDecider,
          command: {
            type: 'CreateLeaderboard',
            data: { ...body, description: body.description ?? null, expiresAt: body.expiresAt ?? null, leaderboardId, organisationId, actor: metadata.actor!, now: metadata.occurredAt! },
          },
        },
      ],
      metadata,
    );
    const [created] = handled.events[0] as LeaderboardEvent[];
    setEventPosition(res, handled.position);
    res.status(200).json(configFromCreated(created!));
  });

  return router;
}

function configFromCreated({ data }: LeaderboardEvent): LeaderboardConfig {
  return {
    id: data.leaderboardId,
    organisationId: data.organisationId,
    name: data.name,
    description: data.description,
    metricType: data.metricType,
    period: data.period,
    startsAt: data.startsAt,
    expiresAt: data.expiresAt,
    status: data.status,
    conditions: data.conditions,
    rewardsConfig: [],
    createdAt: data.createdAt,
    updatedAt: data.createdAt,
    createdBy: data.createdBy,
    updatedBy: data.createdBy,
  };
}
