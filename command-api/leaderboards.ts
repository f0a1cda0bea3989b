import { Router, type Request } from 'express';
import type { Decider } from '../domain/decider.ts';
import {
  evolveLeaderboardConfig,
  leaderboardDecider,
  type LeaderboardCommand,
  type LeaderboardConfig,
  type LeaderboardEvent,
  type LeaderboardState,
  type RankDistribution,
} from '../domain/leaderboard.ts';
import { tenantOf } from '../infra/auth.ts';
import { errorBodySchema, type ApiDescription } from '../api/api-description.ts';
import {
  assignLeaderboardRewardsBody,
  createLeaderboardBody,
  leaderboardConfigSchema,
  leaderboardDistributionSchema,
  updateLeaderboardBody,
} from '../api/contract/leaderboards.ts';
import { notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import { runCommand } from './run-command.ts';
import { allocationsOf, conditionVariables, distributionChecks, foreignCommunityChecks, foreignVariableConfigChecks } from './reference-checks.ts';

const notFoundResponse = { description: 'No leaderboard with this id in the organisation (`NOT_FOUND`)', schema: errorBodySchema };

export function leaderboardCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/leaderboards',
      operationId: 'createLeaderboard',
      tag: 'Leaderboards',
      summary: 'Create a leaderboard config',
      description:
        'Appends `LeaderboardCreated` on `leaderboard-<id>`. The response carries `x-event-position`; send it as `x-min-position` to read your write.',
      body: createLeaderboardBody,
      example: { name: 'Weekly XP', metricType: 'total-xp', startsAt: '2026-01-05T00:00:00Z', status: 'live', period: 'weekly' },
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The created leaderboard config', schema: leaderboardConfigSchema } },
    },
    async (req, res) => {
      const body = parse(createLeaderboardBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const leaderboardId = newId();
      const tracked = trackingConfig();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `leaderboard-${leaderboardId}`,
            newStream: true,
            decider: tracked.decider,
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
            } satisfies LeaderboardCommand,
          },
          ...foreignCommunityChecks(organisationId, conditionCommunities(body.conditions)),
          ...foreignVariableConfigChecks(organisationId, conditionVariables(body.conditions)),
        ],
        respond: ([events]) => ({ status: 200, body: tracked.configAfter(events as LeaderboardEvent[]) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'patch',
      path: '/leaderboards/:leaderboardConfigId',
      operationId: 'updateLeaderboard',
      tag: 'Leaderboards',
      summary: 'Change a leaderboard config: its status, and while draft or scheduled its name, description, expiry and conditions',
      description:
        'Appends `LeaderboardUpdated` (changed fields) and/or `LeaderboardStatusChanged` `{from, to}` on `leaderboard-<id>`; a request ' +
        'that changes nothing appends nothing and answers the config as it is (without `x-event-position`).',
      body: updateLeaderboardBody,
      headers: [idempotencyKeyHeader],
      responses: {
        200: { description: 'The leaderboard config after the change', schema: leaderboardConfigSchema },
        404: notFoundResponse,
        409: { description: 'Illegal status transition, or a field that cannot change in the current status (`CONFLICT`)', schema: errorBodySchema },
      },
    },
    async (req, res) => {
      const leaderboardId = leaderboardIdOf(req);
      const { status, ...edits } = parse(updateLeaderboardBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const tracked = trackingConfig();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `leaderboard-${leaderboardId}`,
            decider: tracked.decider,
            command: {
              type: 'UpdateLeaderboard',
              data: { leaderboardId, organisationId, ...(status ? { status } : {}), edits, actor: actor!, now: occurredAt! },
            } satisfies LeaderboardCommand,
          },
          ...foreignCommunityChecks(organisationId, conditionCommunities(edits.conditions)),
          ...foreignVariableConfigChecks(organisationId, conditionVariables(edits.conditions)),
        ],
        respond: ([events]) => ({ status: 200, body: tracked.configAfter(events as LeaderboardEvent[]) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/leaderboards/:leaderboardConfigId/distribution',
      operationId: 'assignLeaderboardDistribution',
      tag: 'Leaderboards',
      summary: 'Assign rewards per rank range to a leaderboard, replacing its distribution',
      description:
        'Appends `LeaderboardRewardsAssigned` on `leaderboard-<id>`. Every range gets a new `distributionEventId`; the config’s ' +
        '`rewardsConfig` then lists the ranges. Rank rewards are paid by the engine when a window closes, so `distributed` starts at 0.',
      body: assignLeaderboardRewardsBody,
      headers: [idempotencyKeyHeader],
      responses: {
        200: { description: 'The distribution as assigned, by startRank', schema: leaderboardDistributionSchema },
        404: notFoundResponse,
        409: { description: 'The leaderboard is archived or expired, or a concurrent change kept winning (`CONFLICT`)', schema: errorBodySchema },
      },
    },
    async (req, res) => {
      const leaderboardId = leaderboardIdOf(req);
      const body = parse(assignLeaderboardRewardsBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      // Ids are drawn once per request, so a retry after a concurrent write assigns the same ones.
      const rewards: RankDistribution[] = body.rewards.map((reward) => ({
        startRank: reward.startRank,
        endRank: reward.endRank,
        distributionEventId: newId(),
        pointsToDistribute: reward.pointsToDistribute,
        bonusXpToDistribute: reward.bonusXpToDistribute,
        rewardsConfig: {
          amountToDistribute: reward.rewardsConfig.amountToDistribute,
          allocations: reward.rewardsConfig.allocations.map((allocation) => ({
            id: allocation.id ?? newId(),
            rewardId: allocation.rewardId,
            supply: allocation.supply,
            amountToDistribute: allocation.amountToDistribute,
          })),
        },
      }));
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `leaderboard-${leaderboardId}`,
            decider: leaderboardDecider,
            command: {
              type: 'AssignLeaderboardRewards',
              data: { leaderboardId, organisationId, rewards, actor: actor!, now: occurredAt! },
            } satisfies LeaderboardCommand,
          },
          ...distributionChecks(organisationId, allocationsOf(rewards)),
        ],
        respond: ([events]) => {
          const [assigned] = events as LeaderboardEvent[];
          if (assigned?.type !== 'LeaderboardRewardsAssigned') throw new Error('AssignLeaderboardRewards decided no LeaderboardRewardsAssigned');
          return { status: 200, body: distributionView(leaderboardId, assigned.data.rewards) };
        },
      });
    },
  );

  return router;
}

/** The distribution as the admin API shows it: nothing is paid at assignment, so every allocation is live while it has supply. */
export function distributionView(leaderboardConfigId: string, rewards: readonly RankDistribution[]) {
  return {
    leaderboardConfigId,
    rewards: rewards.map((reward) => ({
      ...reward,
      rewardsConfig: {
        amountToDistribute: reward.rewardsConfig.amountToDistribute,
        allocations: reward.rewardsConfig.allocations.map((allocation) => ({ ...allocation, distributed: 0, isLive: 0 < allocation.supply })),
      },
    })),
  };
}

/** A path id that cannot be a leaderboard's is simply not found. */
function leaderboardIdOf(req: Request): string {
  const id = String(req.params.leaderboardConfigId);
  if (!ID_PATTERN.test(id)) throw notFound('Leaderboard not found');
  return id.toLowerCase();
}

interface Tracked {
  state: LeaderboardState;
  config: LeaderboardConfig | null;
}

/**
 * The leaderboard decider with the admin view of the config folded alongside, so a write can answer with the
 * whole config as its events leave it. The view is the one of the attempt that was appended (each retry re-decides).
 */
function trackingConfig() {
  let decidedOn: LeaderboardConfig | null = null;
  const decider: Decider<LeaderboardCommand, LeaderboardEvent, Tracked> = {
    initialState: { state: leaderboardDecider.initialState, config: null },
    evolve: (tracked, event) => ({ state: leaderboardDecider.evolve(tracked.state, event), config: evolveLeaderboardConfig(tracked.config, event) }),
    decide(command, tracked) {
      decidedOn = tracked.config;
      return leaderboardDecider.decide(command, tracked.state);
    },
  };
  return {
    decider,
    configAfter(events: LeaderboardEvent[]): LeaderboardConfig {
      const config = events.reduce(evolveLeaderboardConfig, decidedOn);
      if (!config) throw new Error('a leaderboard write left no config to answer with');
      return config;
    },
  };
}

/** The communities a leaderboard's conditions name. */
function conditionCommunities(conditions: readonly { type: string; communityId?: string }[] | undefined): string[] {
  return (conditions ?? []).flatMap((condition) => (condition.type === 'community' && condition.communityId ? [condition.communityId] : []));
}
