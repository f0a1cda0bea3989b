import { Router } from 'express';
import { gameDecider, type GameEvent } from '../domain/game.ts';
import { tenantOf } from '../infra/auth.ts';
import { createGameBody, gameConfigSchema, gameDistributionBody, gameDistributionView, gameDistributionsResponse, gameView } from '../api/contract/games.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { eventMetadata, idempotencyKeyHeader, parse, pathId } from '../api/routes.ts';
import { newId } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import { runCommand } from './run-command.ts';
import { allocationsOf, distributionChecks, foreignCommunityChecks } from './reference-checks.ts';

export function gameCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/games',
      operationId: 'createGame',
      tag: 'Games',
      summary: 'Create a game config',
      description: 'Appends `GameCreated` on `game-<id>`. Answers 201 with the game config (no prizes yet) and `x-event-position`.',
      body: createGameBody,
      headers: [idempotencyKeyHeader],
      responses: { 201: { description: 'The created game config', schema: gameConfigSchema } },
    },
    async (req, res) => {
      const body = parse(createGameBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const gameId = newId();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `game-${gameId}`,
            newStream: true,
            decider: gameDecider,
            command: {
              type: 'CreateGame',
              data: { ...body, communityId: body.communityId ?? null, gameId, organisationId, actor: actor!, now: occurredAt! },
            },
          },
          ...foreignCommunityChecks(organisationId, body.communityId ? [body.communityId] : []),
        ],
        respond: ([events]) => {
          const state = (events as GameEvent[]).reduce(gameDecider.evolve, gameDecider.initialState);
          if (!state.exists) throw new Error('CreateGame decided no GameCreated');
          const { exists: _exists, ...record } = state;
          return { status: 201, body: gameView(record) };
        },
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/games/:gameConfigId/distribution',
      operationId: 'assignGameDistribution',
      tag: 'Games',
      summary: 'Assign the prizes (distribution details) of a game config',
      description:
        "Replaces the game's whole set of distributions; each gets a new `id`, allocations without an id get one. Appends `GameDistributionsAssigned` on `game-<id>`.",
      body: gameDistributionBody,
      headers: [idempotencyKeyHeader],
      responses: {
        200: { description: 'The game config id and its distributions; nothing is distributed yet', schema: gameDistributionsResponse },
        404: { description: 'No such game in this organisation' },
      },
    },
    async (req, res) => {
      const gameId = pathId(req.params.gameConfigId, 'Game');
      const body = parse(gameDistributionBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const distributions = body.distributions.map((entry) => ({ id: newId(), ...entry }));
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `game-${gameId}`,
            decider: gameDecider,
            command: { type: 'AssignGameDistributions', data: { gameId, organisationId, distributions, actor: actor!, now: occurredAt! } },
          },
          ...distributionChecks(organisationId, allocationsOf(distributions)),
        ],
        respond: () => ({ status: 200, body: { gameConfigId: gameId, distributions: distributions.map(gameDistributionView) } }),
      });
    },
  );

  return router;
}
