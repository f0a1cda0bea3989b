import { hash, randomBytes } from 'node:crypto';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { ApiFamily, RateLimitOverrides } from '../domain/organisation.ts';
import type { OrganisationTables } from '../projectors/organisations.ts';
import type { Database } from './database.ts';
import { AppendGuardError, type AppendGuard } from './event-store/append-guard.ts';
import { forbidden, serviceUnavailable, unauthorized } from './http/errors.ts';
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

/** SHA-256 of the token (one-shot `crypto.hash`: every authenticated request hashes its token). */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
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

  /**
   * The token with this hash as the cache holds it, without `find`'s counter read, and the counter value the
   * cache is exact at: for a request that proves the cache later, by its append (`TokenCheck`). Undefined when
   * there is no cache or it does not hold the token.
   */
  cached(secretHash: string): { row: TokenRow; heard: bigint } | undefined {
    if (!this.database || this.heard === null) return undefined;
    const row = this.cache.get(secretHash);
    return row ? { row, heard: this.heard } : undefined;
  }

  /** The cache, exact at `heard`, still is: a counter read that starts now shows no change past it. */
  async unchangedSince(heard: bigint): Promise<boolean> {
    const current = await this.counter();
    return current !== null && current <= heard;
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
 *
 * A request `checkedByAppend` says (a custom event's: it appends, and answers through `answerCheckedByAppend`)
 * with a token the cache holds as valid goes on without the counter read that proves the cache exact: its
 * first append proves it in its own statement (`TokenCheck`), one round trip to PostgreSQL fewer per event.
 */
export function requireApiToken(
  tokens: ApiTokens,
  family: ApiFamily,
  /** Runs before a token is read from the database (not for one the cache holds): may refuse the request. */
  beforeTokenRead?: (req: Request, res: Response) => Promise<void>,
  checkedByAppend?: (req: Request) => boolean,
): RequestHandler {
  return async (req, res, next) => {
    const raw = req.get('x-api-token');
    if (!raw) throw unauthorized('Missing x-api-token header');
    const token = raw.replace(/^Bearer\s+/i, '').trim();
    const hostname = hostnameOf(req.get('host'));
    if (!hostname) throw unauthorized('Unknown domain');
    const secretHash = hashToken(token);
    if (checkedByAppend?.(req)) {
      const cached = tokens.cached(secretHash);
      // Only a token the cache holds as valid: any other goes the ordinary way, to its ordinary answer.
      if (cached && refusalOf(cached.row, hostname, family) === null) {
        const check = new TokenCheck(tokens, secretHash, hostname, family, cached.heard);
        res.locals.tenant = tenantFrom(cached.row);
        // The route's appends carry the check as their guard (`answerCheckedByAppend`, append-guard.ts).
        res.locals[TOKEN_CHECK] = check;
        next();
        return;
      }
    }
    const row = await tokens.find(secretHash, beforeTokenRead && (() => beforeTokenRead(req, res)));
    const refusal = refusalOf(row, hostname, family);
    if (refusal) throw refusal;
    // The request's log lines from here on name the organisation (infra/http/plumbing.ts reads it from here).
    res.locals.tenant = tenantFrom(row!);
    next();
  };
}

/** Why a token is refused for this domain and family: null when it is not. */
function refusalOf(row: TokenRow | undefined, hostname: string, family: ApiFamily): Error | null {
  if (!row || row.revoked_at !== null || row.status !== 'active') return unauthorized('Invalid or revoked API token');
  if (row.domain !== hostname) return unauthorized('This token is not valid for this domain');
  if (!row.families.includes(family)) return forbidden(`This token does not grant the ${family} API`);
  return null;
}

function tenantFrom(row: TokenRow): Tenant {
  const rateLimits = { apiTokenRequests: row.api_token_rate_limit, userTokenRequests: row.user_token_rate_limit };
  return { organisationId: row.organisation_id, domain: row.domain, tokenId: row.id, families: row.families, rateLimits };
}

const TOKEN_CHECK = 'tokenCheck';

/** The guard's key and condition for the tenancy version a request's token was heard at: made once per version, not per request. */
let tenancyGuard: { heard: bigint; key: string; condition: RawBuilder<boolean> } | null = null;

function tenancyGuardFor(heard: bigint): { key: string; condition: RawBuilder<boolean> } {
  if (tenancyGuard?.heard !== heard)
    tenancyGuard = {
      heard,
      key: `tenancy_version <= ${heard}`,
      condition: sql<boolean>`(select version from public.tenancy_version) <= ${heard.toString()}::bigint`,
    };
  return tenancyGuard;
}

/**
 * A request's token taken from the cache without the counter read (`requireApiToken`), until something proves
 * the cache was exact: the request's first append, whose statement commits only if the counter shows no
 * change past `heard` in its own snapshot (an `AppendGuard`), or `check()`, `find`'s counter read (and, if the
 * cache was not exact, the token read again and judged afresh). A revocation that completed before the
 * request arrived moved the counter before that snapshot or that read: the request writes nothing and is refused.
 */
export class TokenCheck implements AppendGuard {
  readonly key: string;
  readonly condition: RawBuilder<boolean>;
  private proven = false;
  private proving: Promise<void> | null = null;

  constructor(
    private readonly tokens: ApiTokens,
    private readonly secretHash: string,
    private readonly hostname: string,
    private readonly family: ApiFamily,
    private readonly heard: bigint,
  ) {
    const guard = tenancyGuardFor(heard);
    this.key = guard.key;
    this.condition = guard.condition;
  }

  get held(): boolean {
    return this.proven;
  }

  committed(): void {
    this.proven = true;
  }

  check(): Promise<void> {
    if (this.proven) return Promise.resolve();
    this.proving ??= this.prove().finally(() => (this.proving = null));
    return this.proving;
  }

  private async prove(): Promise<void> {
    if (!(await this.tokens.unchangedSince(this.heard))) {
      const refusal = refusalOf(await this.tokens.find(this.secretHash), this.hostname, this.family);
      if (refusal) throw refusal;
    }
    this.proven = true;
  }
}

/**
 * A route `checkedByAppend` runs its work through this, and gives every append of it the guard `work` is
 * given (`Caller.appendGuard`): an append refused by the token check proves the token the ordinary way (a
 * 401 when it is no longer valid) and the work runs once more; an answer no append proved waits for
 * `check()`. Its errors reach `proveTokenBeforeErrors` likewise.
 */
export async function answerCheckedByAppend<T>(res: Response, work: (guard: AppendGuard | undefined) => Promise<T>): Promise<T> {
  const check = res.locals[TOKEN_CHECK] as TokenCheck | undefined;
  if (!check) return work(undefined);
  let result: T;
  try {
    result = await work(check);
  } catch (error) {
    if (!(error instanceof AppendGuardError)) throw error;
    await check.check();
    result = await work(check);
  }
  await check.check();
  return result;
}

/**
 * Error middleware, before any other: a request whose token is not proven yet (`TokenCheck`) is refused as
 * its token now says (a 401 for a token revoked meanwhile), not answered with its error.
 */
export const proveTokenBeforeErrors: ErrorRequestHandler = async (error, _req, res, next) => {
  const check = res.locals[TOKEN_CHECK] as TokenCheck | undefined;
  if (check && !check.held) {
    try {
      await check.check();
    } catch (refusal) {
      return next(refusal);
    }
  }
  // Only a route that answers through answerCheckedByAppend takes the check as its guard; any other that
  // met it is told to try again, never a 500.
  next(error instanceof AppendGuardError ? serviceUnavailable('The request met a change of its organisation; send it again') : error);
};

export function tenantOf(res: Response): Tenant {
  const tenant = res.locals.tenant as Tenant | undefined;
  if (!tenant) throw unauthorized();
  return tenant;
}
