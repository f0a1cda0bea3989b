import { createHash, randomBytes } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import type { Kysely } from 'kysely';
import type { ApiFamily, RateLimitOverrides } from '../domain/organisation.ts';
import type { OrganisationTables } from '../projectors/organisations.ts';
import { forbidden, unauthorized } from './http/errors.ts';

/**
 * API tokens are opaque: `eng_<prefix>_<secret>`. Only the SHA-256 of the whole token is stored (it has
 * 256 bits of entropy, so a slow hash adds nothing); the prefix lets people tell tokens apart.
 */
export function generateApiToken(): { token: string; prefix: string; secretHash: string } {
  const prefix = randomBytes(4).toString('hex');
  const token = `eng_${prefix}_${randomBytes(32).toString('base64url')}`;
  return { token, prefix, secretHash: hashToken(token) };
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export interface Tenant {
  organisationId: string;
  domain: string;
  tokenId: string;
  families: ApiFamily[];
  /** The organisation's own rate limits (null: the platform default), read with the token. */
  rateLimits: RateLimitOverrides;
}

/** The request's hostname, lowercased, without port or trailing dot. */
export function hostnameOf(hostHeader: string | undefined): string | null {
  if (!hostHeader) return null;
  const host = hostHeader.trim().toLowerCase();
  const withoutPort = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d+$/, '');
  return withoutPort.replace(/\.$/, '') || null;
}

/**
 * Resolves the organisation that owns the `Host` domain and checks the `x-api-token` against it: the
 * token must exist, be unrevoked, belong to that organisation and be scoped to that very domain (401
 * otherwise), and carry the API family (403 otherwise).
 */
export function requireApiToken(db: Kysely<OrganisationTables>, family: ApiFamily): RequestHandler {
  return async (req, res, next) => {
    const raw = req.get('x-api-token');
    if (!raw) throw unauthorized('Missing x-api-token header');
    const token = raw.replace(/^Bearer\s+/i, '').trim();
    const hostname = hostnameOf(req.get('host'));
    if (!hostname) throw unauthorized('Unknown domain');
    const row = await db
      .selectFrom('api_tokens as t')
      .innerJoin('organisation_domains as d', (join) => join.onRef('d.hostname', '=', 't.domain').onRef('d.organisation_id', '=', 't.organisation_id'))
      .innerJoin('organisations as o', 'o.id', 't.organisation_id')
      .select(['t.id', 't.organisation_id', 't.domain', 't.families', 't.revoked_at', 'd.status', 'o.api_token_rate_limit', 'o.user_token_rate_limit'])
      .where('t.secret_hash', '=', hashToken(token))
      .executeTakeFirst();
    if (!row || row.revoked_at !== null || row.status !== 'active') throw unauthorized('Invalid or revoked API token');
    if (row.domain !== hostname) throw unauthorized('This token is not valid for this domain');
    const families = row.families;
    if (!families.includes(family)) throw forbidden(`This token does not grant the ${family} API`);
    const rateLimits = { apiTokenRequests: row.api_token_rate_limit, userTokenRequests: row.user_token_rate_limit };
    const tenant: Tenant = { organisationId: row.organisation_id, domain: row.domain, tokenId: row.id, families, rateLimits };
    res.locals.tenant = tenant;
    // The request's log lines from here on name the organisation (the last one does through pino-http's customProps).
    req.log = req.log.child({ organisationId: tenant.organisationId });
    next();
  };
}

export function tenantOf(res: Response): Tenant {
  const tenant = res.locals.tenant as Tenant | undefined;
  if (!tenant) throw unauthorized();
  return tenant;
}
