import { Router } from 'express';
import { challengeDecider, type ActionReplacement, type ChallengeEvent, type ChallengeRecord, type ChallengeState } from '../domain/challenge.ts';
import { freshDistributionView } from '../domain/distribution-entry.ts';
import type { Decider } from '../domain/decider.ts';
import { tenantOf } from '../infra/auth.ts';
import {
  actionDistributionBody,
  actionDistributionSchema,
  challengeSchema,
  challengeView,
  createChallengeBody,
  updateChallengeBody,
} from '../api/contract/challenges.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse, pathId } from '../api/routes.ts';
import { newId } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import { challengeOfAction, recordActionOwner } from './id-lookups.ts';
import { runCommand } from './run-command.ts';
import { allocationsOf, distributionChecks, foreignCommunityChecks } from './reference-checks.ts';

const images = { primaryImageUrl: '', secondaryImageUrl: '' };

export function challengeCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/challenges',
      operationId: 'createChallenge',
      tag: 'Challenges',
      summary: 'Create a challenge: an ordered list of actions',
      description:
        'Appends `ChallengeCreated` on `challenge-<id>`; each action gets an id, recorded on `challengeaction-<actionId>` in the same append. Answers 201 with the challenge and `x-event-position` (send it as `x-min-position` to read your write).',
      body: createChallengeBody,
      example: {
        communityId: '6b039d2d3be9a23a28e68a12',
        details: {
          en: {
            title: 'Coffee week',
            description: 'Visit, then buy',
            light: { primaryImageUrl: '', secondaryImageUrl: '' },
            dark: { primaryImageUrl: '', secondaryImageUrl: '' },
          },
        },
        actions: [
          {
            key: 'visit',
            category: 'participation',
            xp: 10,
            criteria: [],
            details: { en: { title: 'Visit a bar', description: '', light: images, dark: images } },
          },
          {
            key: 'purchase',
            category: 'loyalty',
            xp: 20,
            criteria: [{ field: 'total', operator: 'gte', value: 10 }],
            details: { en: { title: 'Buy for 10 or more', description: '', light: images, dark: images } },
          },
        ],
        isLinear: true,
        maxCompletionsPerPeriod: 1,
        period: 'daily',
        startsAt: '2026-03-01T00:00:00Z',
        expiresAt: '2026-04-01T00:00:00Z',
        rewardDistribution: { points: 50, xp: 15 },
      },
      headers: [idempotencyKeyHeader],
      responses: { 201: { description: 'The created challenge', schema: challengeSchema } },
    },
    async (req, res) => {
      const body = parse(createChallengeBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const challengeId = newId();
      const actions = body.actions.map((action) => ({ ...action, actionId: newId(), distribution: action.distribution ?? null }));
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `challenge-${challengeId}`,
            newStream: true,
            decider: challengeDecider,
            command: { type: 'CreateChallenge', data: { ...body, actions, challengeId, organisationId, actor: actor!, now: occurredAt! } },
          },
          ...actions.map(({ actionId }) => recordActionOwner(actionId, challengeId, organisationId)),
          ...foreignCommunityChecks(organisationId, [body.communityId]),
          ...distributionChecks(organisationId, [...allocationsOf(actions.map((action) => action.distribution)), ...body.rewardDistribution.rewardAllocations]),
        ],
        respond: ([events]) => ({ status: 201, body: challengeView(recordAfter(challengeDecider.initialState, events as ChallengeEvent[])) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'patch',
      path: '/challenges/:challengeId',
      operationId: 'updateChallenge',
      tag: 'Challenges',
      summary: 'Change a challenge',
      description:
        'Appends `ChallengeUpdated`. Each field given replaces the current value whole. `actions`, `isLinear` and `startsAt` change only while the challenge has not started (its startsAt is still ahead), else 409. An action that carries the `id` of one of the challenge’s actions keeps that id (and its distribution unless it gives one); the others get new ids, and actions left out are removed.',
      body: updateChallengeBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The challenge as changed', schema: challengeSchema }, 404: { description: 'No such challenge in this organisation' } },
    },
    async (req, res) => {
      const challengeId = pathId(req.params.challengeId, 'Challenge');
      const { actions, ...changes } = parse(updateChallengeBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const replacement: ActionReplacement[] | undefined = actions?.map(({ id, distribution, ...action }) => ({
        ...action,
        distribution,
        actionId: id ?? newId(),
        kept: id !== undefined,
      }));
      const seen = capturing(challengeDecider);
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `challenge-${challengeId}`,
            decider: seen.decider,
            command: {
              type: 'UpdateChallenge',
              data: { challengeId, organisationId, changes: { ...changes, ...(replacement ? { actions: replacement } : {}) }, actor: actor!, now: occurredAt! },
            },
          },
          // New actions are recorded as the challenge's in the same append (refused with it, if it is refused).
          ...(replacement ?? []).filter(({ kept }) => !kept).map(({ actionId }) => recordActionOwner(actionId, challengeId, organisationId)),
          ...distributionChecks(organisationId, [
            ...allocationsOf((replacement ?? []).map((action) => action.distribution)),
            ...(changes.rewardDistribution?.rewardAllocations ?? []),
          ]),
        ],
        respond: ([events]) => ({ status: 200, body: challengeView(recordAfter(seen.state(), events as ChallengeEvent[])) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/actions/:actionId/distribution',
      operationId: 'assignActionDistribution',
      tag: 'Challenges',
      summary: "Assign an action's distribution (points, bonus XP, reward allocations)",
      description:
        "Replaces the action's distribution; appends `ActionDistributionAssigned` on its challenge's stream. Allocations without an id get one. The action's challenge is found on `challengeaction-<actionId>`, written with the action: an action created a moment ago is found at once.",
      body: actionDistributionBody,
      headers: [idempotencyKeyHeader],
      responses: {
        200: { description: 'The distribution, with the action id; nothing is distributed yet', schema: actionDistributionSchema },
        404: { description: 'No such action in this organisation' },
      },
    },
    async (req, res) => {
      const actionId = pathId(req.params.actionId, 'Action');
      const distribution = parse(actionDistributionBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const challengeId = await challengeOfAction(ctx.store, organisationId, actionId);
      if (!challengeId) throw notFound('Action not found');
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `challenge-${challengeId}`,
            decider: challengeDecider,
            command: { type: 'AssignActionDistribution', data: { challengeId, organisationId, actionId, distribution, actor: actor!, now: occurredAt! } },
          },
          ...distributionChecks(organisationId, allocationsOf([distribution])),
        ],
        respond: () => ({ status: 200, body: { ...freshDistributionView(distribution), actionId } }),
      });
    },
  );

  return router;
}

/** A decider that remembers the state it last decided on, so a response can show the whole result. */
export function capturing<Command, Event, State>(decider: Decider<Command, Event, State>) {
  let seen = decider.initialState;
  return {
    decider: {
      ...decider,
      decide(command: Command, state: State) {
        seen = state;
        return decider.decide(command, state);
      },
    },
    state: () => seen,
  };
}

function recordAfter(state: ChallengeState, events: ChallengeEvent[]): ChallengeRecord {
  const after = events.reduce(challengeDecider.evolve, state);
  if (!after.exists) throw new Error('a challenge command decided events that leave no challenge');
  const { exists: _exists, ...record } = after;
  return record;
}
