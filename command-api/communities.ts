import { Router } from 'express';
import { communityDecider, communityView } from '../domain/community.ts';
import { tenantOf } from '../infra/auth.ts';
import { communitySchema, createCommunityBody, updateCommunityBody } from '../api/contract/communities.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { ID_PATTERN, newId } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import { withDecidedState } from './decided-state.ts';
import { runCommand } from './run-command.ts';

export function communityCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/communities',
      operationId: 'createCommunity',
      tag: 'Communities',
      summary: 'Create a community',
      description: 'Appends `CommunityCreated` on `community-<id>`. The response carries `x-event-position`; send it as `x-min-position` to read your write.',
      body: createCommunityBody,
      example: { name: 'Coffee club', description: 'Regulars of our coffee bars' },
      headers: [idempotencyKeyHeader],
      responses: { 201: { description: 'The created community', schema: communitySchema } },
    },
    async (req, res) => {
      const body = parse(createCommunityBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const communityId = newId();
      const community = withDecidedState(communityDecider);
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `community-${communityId}`,
            newStream: true,
            decider: community.decider,
            command: { type: 'CreateCommunity', data: { ...body, communityId, organisationId, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: ([events]) => ({ status: 201, body: communityView(community.after(events!)) }),
      });
    },
  );

  admin.route(
    router,
    {
      method: 'patch',
      path: '/communities/:communityId',
      operationId: 'updateCommunity',
      tag: 'Communities',
      summary: 'Change a community',
      description: 'Appends `CommunityUpdated` with the fields that changed (nothing when nothing changes). 404 for an unknown id or another organisation’s.',
      body: updateCommunityBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The community after the change', schema: communitySchema } },
    },
    async (req, res) => {
      const communityId = String(req.params.communityId).toLowerCase();
      if (!ID_PATTERN.test(communityId)) throw notFound('Community not found');
      const changes = parse(updateCommunityBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const community = withDecidedState(communityDecider);
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: `community-${communityId}`,
            decider: community.decider,
            command: { type: 'UpdateCommunity', data: { communityId, organisationId, changes, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: ([events]) => ({ status: 200, body: communityView(community.after(events!)) }),
      });
    },
  );

  return router;
}
