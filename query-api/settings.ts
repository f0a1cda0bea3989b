import { Router } from 'express';
import type { Kysely } from 'kysely';
import type { ServiceContext } from '../api/context.ts';
import { tenantOf } from '../infra/auth.ts';
import type { RateLimitDefaults } from '../infra/config.ts';
import { domainListSchema, settingsSchema } from '../api/contract/domains.ts';
import type { ApiDescription } from '../api/api-description.ts';
import { notFound } from '../infra/http/errors.ts';
import { minPositionHeader, readYourWrites } from './read-your-writes.ts';
import { verificationRecordName } from '../domain/organisation.ts';
import type { OrganisationTables } from '../projectors/organisations.ts';
import { withTableTypes } from '../infra/database.ts';

/** The settings as they are now; `rateLimits` are the ones in force (the organisation's own, else `defaults`). */
export async function readSettings(db: Kysely<OrganisationTables>, organisationId: string, defaults: RateLimitDefaults) {
  const row = await db.selectFrom('organisations').selectAll().where('id', '=', organisationId).executeTakeFirst();
  if (!row) throw notFound('Organisation not found');
  return {
    organisationId: row.id,
    name: row.name,
    slug: row.slug,
    domain: row.domain,
    defaultLanguage: row.default_language,
    timezone: row.timezone,
    rateLimits: {
      windowSeconds: defaults.windowSeconds,
      apiTokenRequests: row.api_token_rate_limit ?? defaults.apiTokenRequests,
      userTokenRequests: row.user_token_rate_limit ?? defaults.userTokenRequests,
    },
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at ?? row.created_at),
  };
}

/** The organisation's own records: its settings and its domains. */
export function organisationQueries(ctx: ServiceContext, admin: ApiDescription): Router {
  const router = Router();
  const db: Kysely<OrganisationTables> = withTableTypes(ctx.database.db);
  const fresh = readYourWrites(db, ['organisations'], ctx.config.readYourWritesTimeoutMs);

  admin.route(
    router,
    {
      method: 'get',
      path: '/settings',
      operationId: 'getSettings',
      tag: 'Organisation',
      summary: 'Read the organisation’s settings',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The settings', schema: settingsSchema } },
    },
    fresh,
    async (_req, res) => {
      res.json(await readSettings(db, tenantOf(res).organisationId, ctx.config.rateLimits));
    },
  );

  admin.route(
    router,
    {
      method: 'get',
      path: '/domains',
      operationId: 'listDomains',
      tag: 'Domains',
      summary: 'List every domain of the organisation, the standard one first, then by registration',
      description: 'Not paginated (an organisation has a handful of domains); the shape is the usual `{totalCount, edges}`.',
      headers: [minPositionHeader],
      responses: { 200: { description: 'The domains with their status', schema: domainListSchema } },
    },
    fresh,
    async (_req, res) => {
      const rows = await db
        .selectFrom('organisation_domains')
        .selectAll()
        .where('organisation_id', '=', tenantOf(res).organisationId)
        .orderBy('created_at')
        .orderBy('hostname')
        .execute();
      const edges = rows
        .map((row) => ({
          hostname: row.hostname,
          kind: row.kind,
          status: row.status,
          verification: row.verification_token ? { type: 'TXT', name: verificationRecordName(row.hostname), value: row.verification_token } : null,
          failureReason: row.failure_reason ?? null,
          createdAt: iso(row.created_at),
          updatedAt: iso(row.updated_at ?? row.created_at),
        }))
        .sort((a, b) => Number(b.kind === 'standard') - Number(a.kind === 'standard'));
      res.json({ totalCount: edges.length, edges });
    },
  );

  return router;
}

function iso(value: Date | string): string {
  return new Date(value).toISOString();
}
