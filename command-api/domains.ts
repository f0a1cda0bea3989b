import { randomBytes } from 'node:crypto';
import { Router } from 'express';
import { domainNameDecider, organisationDecider, verificationRecordName, type OrganisationEvent } from '../domain/organisation.ts';
import { tenantOf } from '../infra/auth.ts';
import { registerDomainBody, registeredDomainSchema, removeDomainBody, removedDomainSchema } from '../infra/contract/domains.ts';
import type { ApiDescription } from '../infra/http/api-description.ts';
import { eventMetadata, parse } from '../infra/http/request-context.ts';
import { aggregateStream } from './command-handling.ts';
import type { ServiceContext } from './context.ts';
import { idempotencyKeyHeader } from './leaderboards.ts';
import { runCommand } from './run-command.ts';
import { runSettledCommand } from './settled-command.ts';

export function domainCommands(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();

  admin.route(
    router,
    {
      method: 'post',
      path: '/domains',
      operationId: 'registerDomain',
      tag: 'Domains',
      summary: 'Register a custom subdomain or a white-label domain',
      description:
        'Claims the hostname (`domain-<hostname>`; 409 when any organisation has it) and appends `DomainRegistered`. A white-label domain is `pending` until the TXT record in `verification` is found (checked by a job, retried; after 5 attempts it is `failed` with a reason); a custom subdomain (`<label>.<platform domain>`) is `verified` at once. Provisioning then makes it `active`, and tokens can be issued for it.',
      body: registerDomainBody,
      headers: [idempotencyKeyHeader],
      responses: {
        201: { description: 'The registered domain, with the TXT record that proves control of it', schema: registeredDomainSchema },
        409: { description: 'The hostname is already registered (`CONFLICT`)' },
      },
    },
    async (req, res) => {
      const { hostname, kind } = parse(registerDomainBody, req.body);
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const verificationToken = `engage-verification=${randomBytes(16).toString('hex')}`;
      await runCommand(ctx, req, res, {
        parts: [
          { stream: `domain-${hostname}`, decider: domainNameDecider, command: { type: 'ClaimDomain', data: { hostname, organisationId, kind } } },
          {
            stream: `organisation-${organisationId}`,
            decider: organisationDecider,
            command: { type: 'RegisterDomain', data: { hostname, kind, platformDomain: ctx.config.platformDomain, verificationToken, now: occurredAt! } },
          },
        ],
        respond: ([, events]) => {
          const decided = events as OrganisationEvent[];
          return {
            status: 201,
            body: {
              hostname,
              kind,
              status: decided.some((event) => event.type === 'DomainVerified') ? 'verified' : 'pending',
              verification: { type: 'TXT', name: verificationRecordName(hostname), value: verificationToken },
              createdAt: occurredAt!,
            },
          };
        },
      });
    },
  );

  admin.route(
    router,
    {
      method: 'post',
      path: '/domains/remove',
      operationId: 'removeDomain',
      tag: 'Domains',
      summary: 'Remove a custom or white-label domain',
      description:
        'Appends `DomainRemoved` and `ApiTokenRevoked` for every token scoped to the domain, and releases the hostname (anyone may register it again). Answers once the tenancy read model has caught up: the very next request with such a token gets 401. The standard domain cannot be removed (409); a hostname that is not this organisation’s → 404.',
      body: removeDomainBody,
      headers: [idempotencyKeyHeader],
      responses: {
        200: { description: 'The domain is gone, with the tokens that were revoked', schema: removedDomainSchema },
        404: { description: 'Not one of this organisation’s domains (`NOT_FOUND`)' },
        409: { description: 'The standard domain cannot be removed (`CONFLICT`)' },
      },
    },
    async (req, res) => {
      const { hostname } = parse(removeDomainBody, req.body);
      const { organisationId } = tenantOf(res);
      const { occurredAt } = eventMetadata(req, res);
      const { tokens } = await aggregateStream(ctx.store, `organisation-${organisationId}`, organisationDecider);
      await runSettledCommand(ctx, req, res, [
        { stream: `organisation-${organisationId}`, decider: organisationDecider, command: { type: 'RemoveDomain', data: { hostname, now: occurredAt! } } },
        { stream: `domain-${hostname}`, decider: domainNameDecider, command: { type: 'ReleaseDomain', data: { hostname, organisationId } } },
      ]);
      const revokedTokenIds = [...tokens].filter(([, token]) => token.domain === hostname && !token.revoked).map(([tokenId]) => tokenId);
      res.status(200).json({ hostname, removed: true, revokedTokenIds });
    },
  );

  return router;
}
