import { setTimeout as delay } from 'node:timers/promises';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RLWrapperTimeouts, type RateLimiterLike } from 'rate-limiter-flexible';
import { tenantOf } from '../auth.ts';
import type { RateLimitDefaults } from '../config.ts';
import type { Logger } from '../logging.ts';
import type { UserTokenClaims } from '../user-tokens.ts';
import { HttpError } from './errors.ts';

/** How long a count may take in Redis before this process's memory counts instead. */
const STORE_TIMEOUT_MS = 500;
/** After a count that took that long, how long counts stay in memory before Redis is tried again. */
const STORE_RETRY_MS = 5000;

/** Where one client stands against one limit, in the window that started with its first request. */
interface Quota {
  limit: number;
  used: number;
  resetSeconds: number;
  windowSeconds: number;
}

/**
 * Requests per window (fixed, starting at a key's first request) per API token, per signed-in user and,
 * for refused credentials, per client address. Counted by rate-limiter-flexible: on Redis when there is
 * one (every process shares the counts), with this process's memory as insurance when Redis fails or
 * takes longer than `STORE_TIMEOUT_MS`; in memory otherwise. Organisations choose their own token limits,
 * so the library only counts (its own ceiling is never reached) and each request's limit is compared here.
 * A count that fails lets the request through: the limiter never turns a request into a 5xx.
 */
export class RateLimits {
  /** Until when counts skip a Redis that has just been too slow (a hung Redis would cost every request the timeout). */
  private storeSkippedUntil = 0;

  private constructor(
    private readonly counter: RateLimiterLike,
    private readonly memory: RateLimiterLike,
    readonly defaults: RateLimitDefaults,
    private readonly logger: Logger,
    private readonly redis: Redis | null,
  ) {}

  static async open(options: { redisUrl: string | undefined; keyPrefix: string; defaults: RateLimitDefaults; logger: Logger }): Promise<RateLimits> {
    const { redisUrl, keyPrefix, defaults, logger } = options;
    const counting = { keyPrefix, points: Number.MAX_SAFE_INTEGER, duration: defaults.windowSeconds };
    const memory = new RateLimiterMemory(counting);
    if (!redisUrl) return new RateLimits(memory, memory, defaults, logger, null);
    // Its own connection: fail fast (no offline queue, no retries, a command timeout) where the job queue's waits.
    const redis = new Redis(redisUrl, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: STORE_TIMEOUT_MS,
      connectTimeout: 1000,
    });
    let healthy = true;
    redis.on('error', (error: Error) => {
      if (healthy) logger.warn({ err: error }, 'rate limits: Redis unavailable; counting in this process’s memory until it is back');
      healthy = false;
    });
    redis.on('ready', () => {
      if (!healthy) logger.info('rate limits: Redis is back');
      healthy = true;
    });
    // Bounded: a Redis that takes the connection but never answers must not hold up start-up.
    await Promise.race([redis.connect().catch(() => undefined), delay(2 * STORE_TIMEOUT_MS, undefined, { ref: false })]);
    // The insurance belongs to the wrapper alone, so a count that times out and then fails is counted once.
    const counter = new RLWrapperTimeouts({
      limiter: new RateLimiterRedis({ ...counting, storeClient: redis, rejectIfRedisNotReady: true }),
      timeoutMs: STORE_TIMEOUT_MS,
      insuranceLimiter: memory,
    });
    return new RateLimits(counter, memory, defaults, logger, redis);
  }

  /** Before the API token is checked: an address with too many refused credentials gets 429, whatever it sends. */
  readonly refuseBlockedAddresses: RequestHandler = async (req, res, next) => {
    const quota = await this.count('get', addressKey(req), this.defaults.failedAuthentications);
    if (quota && quota.used >= quota.limit) throw refusal(res, quota, 'refused credentials from this address');
    next();
  };

  /** After the API token is checked: counts the request against the token's limit (its organisation's, else the default). */
  readonly limitApiToken: RequestHandler = async (_req, res, next) => {
    const tenant = tenantOf(res);
    await this.limit(res, `token:${tenant.tokenId}`, tenant.rateLimits.apiTokenRequests ?? this.defaults.apiTokenRequests, 'for this API token');
    next();
  };

  /** Error middleware: a refused credential (401) counts against the client's address; the error goes on as it was. */
  readonly countFailedAuthentication: ErrorRequestHandler = async (error, req, res, next) => {
    if (error instanceof HttpError && error.status === 401) {
      const quota = await this.count('consume', addressKey(req), this.defaults.failedAuthentications);
      if (quota) show(res, quota);
    }
    next(error);
  };

  /** Counts a signed-in user's request against the user limit (its organisation's, else the default). */
  async limitUser(res: Response, user: UserTokenClaims): Promise<void> {
    const limit = tenantOf(res).rateLimits.userTokenRequests ?? this.defaults.userTokenRequests;
    await this.limit(res, `user:${user.organisationId}:${user.userId}`, limit, 'for this user');
  }

  close(): void {
    this.redis?.disconnect();
  }

  private async limit(res: Response, key: string, limit: number, what: string): Promise<void> {
    const quota = await this.count('consume', key, limit);
    if (!quota) return;
    if (quota.used > quota.limit) throw refusal(res, quota, what);
    show(res, quota);
  }

  private async count(operation: 'consume' | 'get', key: string, limit: number): Promise<Quota | null> {
    const windowSeconds = this.defaults.windowSeconds;
    const started = Date.now();
    const counter = started < this.storeSkippedUntil ? this.memory : this.counter;
    try {
      const counted = operation === 'consume' ? await counter.consume(key) : await counter.get(key);
      if (counter !== this.memory && Date.now() - started >= STORE_TIMEOUT_MS) this.storeSkippedUntil = Date.now() + STORE_RETRY_MS;
      if (!counted) return { limit, used: 0, resetSeconds: windowSeconds, windowSeconds };
      return { limit, used: counted.consumedPoints, resetSeconds: Math.max(0, Math.ceil(counted.msBeforeNext / 1000)), windowSeconds };
    } catch (error) {
      this.logger.warn({ err: error, key }, 'rate limits: could not count; the request goes on');
      return null;
    }
  }
}

/** The composed app's limits (absent where an app has none, such as the operations app). */
export function rateLimitsOf(req: Request): RateLimits | undefined {
  return req.app.locals.rateLimits as RateLimits | undefined;
}

function addressKey(req: Request): string {
  return `address:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}`;
}

/**
 * The IETF RateLimit headers (draft-ietf-httpapi-ratelimit-headers): of the limits a request counted
 * against, the one with the fewest requests left.
 */
function show(res: Response, quota: Quota): void {
  const remaining = Math.max(0, quota.limit - quota.used);
  const shown = res.locals.rateLimitRemaining as number | undefined;
  if (res.headersSent || (shown !== undefined && shown < remaining)) return;
  res.locals.rateLimitRemaining = remaining;
  res.set({
    'RateLimit-Limit': String(quota.limit),
    'RateLimit-Remaining': String(remaining),
    'RateLimit-Reset': String(quota.resetSeconds),
    'RateLimit-Policy': `${quota.limit};w=${quota.windowSeconds}`,
  });
}

function refusal(res: Response, quota: Quota, what: string): HttpError {
  show(res, quota);
  const retryAfter = Math.max(1, quota.resetSeconds);
  return new HttpError(
    429,
    'TOO_MANY_REQUESTS',
    `Too many requests ${what}: ${quota.limit} per ${quota.windowSeconds} s; retry in ${retryAfter} s`,
    undefined,
    { 'Retry-After': String(retryAfter) },
  );
}
