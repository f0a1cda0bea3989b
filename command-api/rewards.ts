import { Router, type Request } from 'express';
import { allocationDecider, isLive, type AllocationEvent, type RewardAllocation } from '../domain/allocation.ts';
import { rewardDecider, type RewardCommand, type RewardDefinition, type RewardEvent, type RewardState } from '../domain/reward.ts';
import { tenantOf } from '../infra/auth.ts';
import { allocationOutput } from '../api/contract/distribution.ts';
import { createAllocationBody, createRewardBody, rewardSchema, updateRewardBody, type CreateRewardBody } from '../api/contract/rewards.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import { runCommand } from './run-command.ts';
import { foreignCommunityChecks, foreignVariableConfigChecks } from './reference-checks.ts';

export function rewardCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/rewards',
      operationId: 'createReward',
      tag: 'Rewards',
      summary: 'Create a reward (an entries reward for a giveaway, or an asset reward)',
      description: 'Appends `RewardCreated` on `reward-<id>`. The response carries `x-event-position`; send it as `x-min-position` to read your write.',
      body: createRewardBody,
      example: {
        kind: 'asset',
        communityId: '6b039d2d3be9a23a28e68a12',
        details: {
          en: {
            title: 'Free coffee',
            description: 'Any size',
            light: { primaryImageUrl: '', secondaryImageUrl: '' },
            dark: { primaryImageUrl: '', secondaryImageUrl: '' },
          },
        },
        redeemable: { redeemByDate: '2026-12-31T00:00:00Z' },
        codes: ['COFFEE-1', 'COFFEE-2'],
      },
      headers: [idempotencyKeyHeader],
      responses: { 201: { description: 'The created reward', schema: rewardSchema } },
    },
    async (req, res) => {
      const body = parse(createRewardBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const rewardId = newId();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `reward-${rewardId}`,
            newStream: true,
            decider: rewardDecider,
            command: { type: 'CreateReward', data: { ...definitionOf(body), rewardId, organisationId, actor: actor!, now: occurredAt! } },
          },
          ...foreignCommunityChecks(organisationId, [body.communityId, ...body.additionalCommunityIds]),
          ...foreignVariableConfigChecks(
            organisationId,
            body.kind === 'asset' ? body.redeemable.additionalInformation.map((item) => item.variableConfigId) : [],
          ),
        ],
        respond: ([events]) => ({ status: 201, body: rewardAfter(rewardDecider.initialState, events as RewardEvent[]) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'patch',
      path: '/rewards/:rewardId',
      operationId: 'updateReward',
      tag: 'Rewards',
      summary: "Change a reward's details, tags or dates",
      description:
        'Appends `RewardUpdated` with the fields that differ (nothing when none does). An entries reward whose draw is due or done refuses a new `drawsAt` with 409.',
      body: updateRewardBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The reward as changed', schema: rewardSchema }, 404: { description: 'No such reward in this organisation' } },
    },
    async (req, res) => {
      const rewardId = rewardIdOf(req);
      const changes = parse(updateRewardBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      // The answer is the whole reward, which the new events alone do not carry: keep the state each attempt decided on.
      let decidedOn: RewardState = rewardDecider.initialState;
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `reward-${rewardId}`,
            decider: {
              ...rewardDecider,
              decide(command: RewardCommand, state: RewardState) {
                decidedOn = state;
                return rewardDecider.decide(command, state);
              },
            },
            command: { type: 'UpdateReward', data: { rewardId, organisationId, changes, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: ([events]) => ({ status: 200, body: rewardAfter(decidedOn, events as RewardEvent[]) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/rewards/:rewardId/allocations',
      operationId: 'createRewardAllocation',
      tag: 'Rewards',
      summary: 'Add an allocation (a supply) to a reward',
      description:
        'Appends `RewardAllocationAdded` on `reward-<id>` and `AllocationCreated` on `allocation-<id>` atomically. An asset reward with codes cannot have allocations supplying more assets than it has codes (400); an entries reward whose draw is due or done takes no more allocations (409).',
      body: createAllocationBody,
      headers: [idempotencyKeyHeader],
      responses: {
        201: { description: 'The allocation, nothing distributed yet', schema: allocationOutput },
        404: { description: 'No such reward in this organisation' },
      },
    },
    async (req, res) => {
      const rewardId = rewardIdOf(req);
      const { supply, amountToDistribute } = parse(createAllocationBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const allocationId = newId();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `reward-${rewardId}`,
            decider: rewardDecider,
            command: { type: 'AddAllocation', data: { rewardId, organisationId, allocationId, supply, amountToDistribute, now: occurredAt! } },
          },
          {
            stream: `allocation-${allocationId}`,
            newStream: true,
            decider: allocationDecider,
            command: {
              type: 'CreateAllocation',
              data: { allocationId, rewardId, organisationId, supply, amountToDistribute, actor: actor!, now: occurredAt! },
            },
          },
        ],
        respond: ([, events]) => ({ status: 201, body: allocationFromCreated((events as AllocationEvent[])[0]!) }),
      });
    },
  );

  return router;
}

/** A path id that cannot be a reward id names no reward: 404, like an unknown one. */
function rewardIdOf(req: Request): string {
  const rewardId = String(req.params.rewardId);
  if (!ID_PATTERN.test(rewardId)) throw notFound('Reward not found');
  return rewardId.toLowerCase();
}

function definitionOf(body: CreateRewardBody): RewardDefinition {
  const common = {
    communityId: body.communityId,
    details: body.details,
    tags: body.tags,
    campaigns: body.campaigns,
    additionalCommunityIds: body.additionalCommunityIds,
    metadata: body.metadata,
  };
  if (body.kind === 'entries') return { ...common, kind: 'entries', drawsAt: body.drawsAt, supply: body.supply };
  return { ...common, kind: 'asset', redeemable: body.redeemable, codes: body.codes, expiresAt: body.expiresAt };
}

function rewardAfter(state: RewardState, events: RewardEvent[]) {
  const after = events.reduce(rewardDecider.evolve, state);
  if (!after.exists) throw new Error('a reward command decided on a reward that does not exist');
  return after.reward;
}

function allocationFromCreated({ data }: AllocationEvent): RewardAllocation {
  return {
    id: data.allocationId,
    rewardId: data.rewardId,
    supply: data.supply,
    amountToDistribute: data.amountToDistribute,
    distributed: 0,
    isLive: isLive({ supply: data.supply, distributed: 0 }),
  };
}
