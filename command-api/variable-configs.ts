import { createHash } from 'node:crypto';
import { Router } from 'express';
import { variableConfigDecider, variableKeyDecider, type VariableConfig, type VariableConfigEvent } from '../domain/variable-config.ts';
import { tenantOf } from '../infra/auth.ts';
import { variableConfigBody, variableConfigSchema } from '../api/contract/communities.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import { newId } from '../infra/ids.ts';
import type { ServiceContext } from '../api/context.ts';
import { runCommand } from './run-command.ts';

/** The stream that claims a variable key for one organisation (keys compare case-insensitively). */
export function variableKeyStream(organisationId: string, key: string): string {
  return `variablekey-${organisationId}-${createHash('sha256').update(key.toLowerCase()).digest('hex').slice(0, 32)}`;
}

export function variableConfigCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/variable-configs',
      operationId: 'createVariableConfig',
      tag: 'Variable configs',
      summary: 'Declare a user variable (what leaderboard variable-config conditions refer to)',
      description:
        'Appends `VariableConfigCreated` on `variableconfig-<id>` and, atomically, claims the key for the organisation: a key already used (case-insensitively) is a 409.',
      body: variableConfigBody,
      headers: [idempotencyKeyHeader],
      responses: {
        201: { description: 'The created variable config', schema: variableConfigSchema },
        409: { description: 'The organisation already has a variable config with this key (`CONFLICT`)' },
      },
    },
    async (req, res) => {
      const body = parse(variableConfigBody, req.body);
      const { organisationId } = tenantOf(res);
      const { actor, occurredAt } = eventMetadata(req, res);
      const variableConfigId = newId();
      await runCommand(ctx, req, res, {
        parts: [
          {
            stream: variableKeyStream(organisationId, body.key),
            decider: variableKeyDecider,
            command: { type: 'ClaimVariableKey', data: { organisationId, key: body.key, variableConfigId } },
          },
          {
            stream: `variableconfig-${variableConfigId}`,
            newStream: true,
            decider: variableConfigDecider,
            command: { type: 'CreateVariableConfig', data: { ...body, variableConfigId, organisationId, actor: actor!, now: occurredAt! } },
          },
        ],
        respond: ([, events]) => ({ status: 201, body: configFromCreated((events as VariableConfigEvent[])[0]!) }),
      });
    },
  );

  return router;
}

function configFromCreated({ data }: VariableConfigEvent): VariableConfig {
  return {
    id: data.variableConfigId,
    organisationId: data.organisationId,
    key: data.key,
    type: data.type,
    description: data.description,
    createdAt: data.createdAt,
    createdBy: data.createdBy,
  };
}
