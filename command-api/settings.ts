import { Router } from 'express';
import { organisationDecider } from '../domain/organisation.ts';
import { tenantOf } from '../infra/auth.ts';
import { changeSettingsBody, settingsSchema } from '../api/contract/domains.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { eventMetadata, idempotencyKeyHeader, parse } from '../api/routes.ts';
import type { CommandContext } from './read-port.ts';
import { runSettledCommand } from './settled-command.ts';

export function settingsCommands(ctx: CommandContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'patch',
      path: '/settings',
      operationId: 'updateSettings',
      tag: 'Organisation',
      summary: 'Change the organisation’s name, time zone, default language or rate limits',
      description:
        'Appends `OrganisationSettingsChanged` and, for `rateLimits`, `OrganisationRateLimitsChanged` (nothing when nothing changes). `timezone` is an IANA zone (checked with Intl), `defaultLanguage` a BCP 47 tag stored in canonical form (`nl-be` → `nl-BE`). Leaderboard windows use the time zone; localised reads fall back to the default language. `rateLimits` sets the requests per window each API token and each signed-in user may make (1 to 1,000,000; `null`: the platform default); the next request counts against the new limit.',
      body: changeSettingsBody,
      headers: [idempotencyKeyHeader],
      responses: { 200: { description: 'The settings after the change', schema: settingsSchema } },
    },
    async (req, res) => {
      const change = parse(changeSettingsBody, req.body);
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      await runSettledCommand(ctx, req, res, [
        { stream: `organisation-${organisationId}`, decider: organisationDecider, command: { type: 'ChangeSettings', data: { ...change, now: occurredAt! } } },
      ]);
      res.status(200).json(await ctx.reads.settings(organisationId));
    },
  );

  return router;
}
