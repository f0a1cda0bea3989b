import { Router } from 'express';
import { leaderboardDecider, type LeaderboardConfig, type LeaderboardEvent } from '../domain/leaderboard.ts';
import { tenantOf } from '../infra/auth.ts';
import type { ApiDescription } from '../infra/http/api-description.ts';
import { createLeaderboardBody, leaderboardConfigSchema } from '../infra/contract/leaderboards.ts';
import { eventMetadata, parse } from '../infra/http/request-context.ts';
import { newId } from '../infra/ids.ts';
import type { ServiceContext } from './context.ts';
import { runCommand } from './run-command.ts';

export const idempotencyKeyHeader = {
  name: 'Idempotency-Key',
  description: 'Retrying with the same key returns the first answer and changes nothing; reusing it for a different body is a 409',
};

export function leaderboardCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/leaderboards',
      tag: 'Leaderboards',
      summary: 'Create a leaderboard config',
      description:
        'Appends `LeaderboardCreated` on `leaderboard-<id>`. The response carries `x-event-position`; send it as `x-min-position` to read your write.',
      body: createLeaderboardBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The created leaderboard config', schema: leaderboardConfigSchema } },
    },
    async (req, res) => {
      const body = parse(createLeaderboardBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const leaderboardId = newId();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `leaderboard-${leaderboardId}`,
            decider: leaderboardDecider,
            command: {
              type: 'CreateLeaderboard',
              data: {
                ...body,
                description: body.description ?? null,
                expiresAt: body.expiresAt ?? null,
                leaderboardId,
                organisationId,
                actor: actor!,
                now: occurredAt!,
              },
            },
          },
        ],
        respond: ([events]) => ({ status: 200, body: configFromCreated((events as LeaderboardEvent[])[0]!) }),
      });
    },
  );

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
