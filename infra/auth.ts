import { createHash, randomBytes } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { sql, type Kysely } from 'kysely';
import type { ApiFamily, RateLimitOverrides } from '../domain/organisation.ts';
import type { OrganisationTables } from '../projectors/organisations.ts';
import type { Database } from './database.ts';
import { forbidden, unauthorized } from './http/errors.ts';
import { TENANCY_CHANNEL } from './tenancy-channel.ts';

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

interface TokenRow {
  id: string;
  organisation_id: string;
  domain: string;
  families: ApiFamily[];
  revoked_at: unknown;
  status: string;
  api_token_rate_limit: number | null;
  user_token_rate_limit: number | null;
}

/** Tokens held at most; past it the cache starts afresh (a token is one read away). */
const CACHE_LIMIT = 10_000;

/**
 * API tokens by hash, from an in-process cache kept exact by the tenancy read model's announcements
 * (`TENANCY_CHANNEL`, one per change of `public.tenancy_version`, in commit order; see
 * projectors/organisations.ts):
 *
 * - every announcement drops the whole cache (changes are rare: revocations, domain status, rate limits);
 * - a request is answered from the cache only after a read of the counter, on the process's LISTEN
 *   connection, that started after the request arrived, shows a value this process has already heard of: a
 *   revocation that completed before the request (its command waits for the read model) moved the counter
 *   first, so the request waits for its announcement or reads the token from the database;
 * - a token read from the database is kept only if no announcement came while it was read;
 * - while the LISTEN connection is down (or before it has read the counter) there is no cache at all, and a
 *   reconnection starts with an empty one.
 * The counter reads of concurrent requests are shared: one runs at a time, and requests that arrive while it
 * runs wait for the next one. No pool connection is used for them.
 */
export class ApiTokens {
  private readonly cache = new Map<string, TokenRow>();
  /** The highest counter value heard of since the LISTEN was (re)established; null: no cache. */
  private heard: bigint | null = null;
  private heardSinceListening: bigint | null = null;
  /** Moves on every announcement and every change of the LISTEN's state. */
  private changes = 0;
  private listening: Promise<() => Promise<void>> | null = null;
  private running: Promise<bigint | null> | null = null;
  private queued: Promise<bigint | null> | null = null;

  constructor(
    private readonly db: Kysely<OrganisationTables>,
    private readonly database?: Pick<Database, 'listen' | 'queryOnListener'>,
  ) {}

  /**
   * The token with this hash. `beforeRead` runs before a read from the database (a token the cache does not
   * hold, or no cache): where the caller refuses what must not cost a database read (a blocked address's guesses).
   */
  async find(secretHash: string, beforeRead?: () => Promise<void>): Promise<TokenRow | undefined> {
    if (!this.database) {
      await beforeRead?.();
      return this.read(secretHash);
    }
    this.listening ??= this.database.listen(
      TENANCY_CHANNEL,
      (payload) => this.announced(payload),
      (listening) => this.listeningChanged(listening),
    );
    if (this.heard !== null) {
      const current = await this.counter();
      if (current !== null && this.heard !== null && current <= this.heard) {
        const cached = this.cache.get(secretHash);
        if (cached) return cached;
      }
    }
    await beforeRead?.();
    const changes = this.changes;
    const cacheable = this.heard !== null;
    const row = await this.read(secretHash);
    if (row && cacheable && this.changes === changes && this.heard !== null) {
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      this.cache.set(secretHash, row);
    }
    return row;
  }

  async close(): Promise<void> {
    const listening = this.listening;
    this.listening = null;
    this.forget();
    if (listening) await (await listening.catch(() => () => Promise.resolve()))();
  }

  private read(secretHash: string): Promise<TokenRow | undefined> {
    return this.db
      .selectFrom('api_tokens as t')
      .modifyFront(sql`/* engage:auth */`)
      .innerJoin('organisation_domains as d', (join) => join.onRef('d.hostname', '=', 't.domain').onRef('d.organisation_id', '=', 't.organisation_id'))
      .innerJoin('organisations as o', 'o.id', 't.organisation_id')
      .select(['t.id', 't.organisation_id', 't.domain', 't.families', 't.revoked_at', 'd.status', 'o.api_token_rate_limit', 'o.user_token_rate_limit'])
      .where('t.secret_hash', '=', secretHash)
      .executeTakeFirst();
  }

  private announced(payload: string | undefined): void {
    // A (re)connection's wake-up carries nothing: `listeningChanged` handles it.
    if (payload === undefined || !/^\d+$/.test(payload)) return;
    this.changes++;
    this.cache.clear();
    const version = BigInt(payload);
    if (this.heardSinceListening === null || version > this.heardSinceListening) this.heardSinceListening = version;
    if (this.heard !== null && version > this.heard) this.heard = version;
  }

  private listeningChanged(listening: boolean): void {
    this.forget();
    if (!listening) return;
    const changes = this.changes;
    // Announcements from here on reach us; what came before is in the counter's current value.
    void this.readCounter().then((current) => {
      if (current === null || this.changes !== changes) return;
      this.heard = this.heardSinceListening !== null && this.heardSinceListening > current ? this.heardSinceListening : current;
    });
  }

  private forget(): void {
    this.changes++;
    this.cache.clear();
    this.heard = null;
    this.heardSinceListening = null;
  }

  /** A read of the counter that starts after this call: the running one if none, else the next one. */
  private counter(): Promise<bigint | null> {
    if (this.queued) return this.queued;
    if (!this.running) return this.launch();
    this.queued = this.running.then(() => {
      this.queued = null;
      return this.launch();
    });
    return this.queued;
  }

  private launch(): Promise<bigint | null> {
    const running = this.readCounter();
    this.running = running;
    void running.then(() => {
      if (this.running === running) this.running = null;
    });
    return running;
  }

  private async readCounter(): Promise<bigint | null> {
    try {
      const [row] = await this.database!.queryOnListener<{ version: string }>('/* engage:auth-version */ select version from public.tenancy_version');
      return row ? BigInt(row.version) : null;
    } catch {
      return null;
    }
  }
}

/**
 * Resolves the organisation that owns the `Host` domain and checks the `x-api-token` against it: the
 * token must exist, be unrevoked, belong to that organisation and be scoped to that very domain (401
 * otherwise), and carry the API family (403 otherwise).
 */
export function requireApiToken(
  tokens: ApiTokens,
  family: ApiFamily,
  /** Runs before a token is read from the database (not for one the cache holds): may refuse the request. */
  beforeTokenRead?: (req: Request, res: Response) => Promise<void>,
): RequestHandler {
  return async (req, res, next) => {
    const raw = req.get('x-api-token');
    if (!raw) throw unauthorized('Missing x-api-token header');
    const token = raw.replace(/^Bearer\s+/i, '').trim();
    const hostname = hostnameOf(req.get('host'));
    if (!hostname) throw unauthorized('Unknown domain');
    const row = await tokens.find(hashToken(token), beforeTokenRead && (() => beforeTokenRead(req, res)));
    if (!row || row.revoked_at !== null || row.status !== 'active') throw unauthorized('Invalid or revoked API token');
    if (row.domain !== hostname) throw unauthorized('This token is not valid for this domain');
    const families = row.families;
    if (!families.includes(family)) throw forbidden(`This token does not grant the ${family} API`);
    const rateLimits = { apiTokenRequests: row.api_token_rate_limit, userTokenRequests: row.user_token_rate_limit };
    const tenant: Tenant = { organisationId: row.organisation_id, domain: row.domain, tokenId: row.id, families, rateLimits };
    // The request's log lines from here on name the organisation (infra/http/plumbing.ts reads it from here).
    res.locals.tenant = tenant;
    next();
  };
}

export function tenantOf(res: Response): Tenant {
  const tenant = res.locals.tenant as Tenant | undefined;
  if (!tenant) throw unauthorized();
  return tenant;
}
