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
  /** Per address and key counted, the counts waiting for the one in flight (see `countTogether`). */
  private readonly coalesced = new Map<string, CountWaiting[]>();
  /** Per address and key counted, the places taken ahead of its requests and its recent rate (see `countTogether`). */
  private readonly ahead = new Map<string, Ahead>();
  /** Counts of API tokens sent to Redis, and the requests that waited for one (the others took places ahead). */
  readonly stats = { counts: 0, requestsWaited: 0 };

  private constructor(
    private readonly counter: RateLimiterLike,
    private readonly memory: RateLimiterLike,
    readonly defaults: RateLimitDefaults,
    private readonly logger: Logger,
    private readonly redis: Redis | null,
    private readonly keyPrefix = '',
  ) {}

  static async open(options: { redisUrl: string | undefined; keyPrefix: string; defaults: RateLimitDefaults; logger: Logger }): Promise<RateLimits> {
    const { redisUrl, keyPrefix, defaults, logger } = options;
    const counting = { keyPrefix, points: Number.MAX_SAFE_INTEGER, duration: defaults.windowSeconds };
    const memory = new RateLimiterMemory(counting);
    if (!redisUrl) return new RateLimits(memory, memory, defaults, logger, null, keyPrefix);
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
    redis.defineCommand(ADDRESS_AND_COUNT, { numberOfKeys: 2, lua: ADDRESS_AND_COUNT_SCRIPT });
    return new RateLimits(counter, memory, defaults, logger, redis, keyPrefix);
  }

  /**
   * Where the API token is checked: an address with too many refused credentials gets 429, whatever it sends.
   * The address is looked at with the request's first count, in the same round trip to Redis: the token's
   * (`limitApiToken`), or, when the request fails before it (a refused or missing token, a family the token
   * lacks), in `countFailedAuthentication`. So a request that passes costs one count, not two. A token that
   * must be read from the database waits for the address's check (`checkAddressBeforeTokenRead`).
   */
  readonly refuseBlockedAddresses: RequestHandler = (_req, res, next) => {
    res.locals[ADDRESS_UNCHECKED] = true;
    next();
  };

  /**
   * Before an API token is read from the database (one the token cache does not hold: a guess always is):
   * the address is looked at first, alone, so a refused address's guesses cost no database read. A token
   * from the cache leaves it to the token's count (`limitApiToken`), one round trip for both.
   */
  readonly checkAddressBeforeTokenRead = async (req: Request, res: Response): Promise<void> => {
    if (res.locals[ADDRESS_UNCHECKED] !== true) return;
    res.locals[ADDRESS_UNCHECKED] = false;
    const counted = await this.countChecked(addressKey(req), null, this.defaults.failedAuthentications);
    if (counted?.blocked) throw refusal(res, counted.blocked, BLOCKED_ADDRESS);
  };

  /**
   * After the API token is checked: refuses a blocked address (see `refuseBlockedAddresses`), else counts the
   * request against the token's limit (its organisation's, else the default).
   */
  readonly limitApiToken: RequestHandler = async (req, res, next) => {
    const tenant = tenantOf(res);
    const limit = tenant.rateLimits.apiTokenRequests ?? this.defaults.apiTokenRequests;
    const checkAddress = res.locals[ADDRESS_UNCHECKED] === true;
    res.locals[ADDRESS_UNCHECKED] = false;
    const counted = await this.countChecked(checkAddress ? addressKey(req) : null, `token:${tenant.tokenId}`, limit);
    if (!counted) return next();
    if (counted.blocked) throw refusal(res, counted.blocked, BLOCKED_ADDRESS);
    if (counted.quota.used > counted.quota.limit) throw refusal(res, counted.quota, 'for this API token');
    show(res, counted.quota);
    next();
  };

  /**
   * Error middleware: a refused credential (401) counts against the client's address, unless the address is
   * refused already (then the answer is that 429); any other error before the token's count is a 429 for a
   * refused address too. The error goes on as it was otherwise.
   */
  readonly countFailedAuthentication: ErrorRequestHandler = async (error, req, res, next) => {
    const unauthenticated = error instanceof HttpError && error.status === 401;
    const checkAddress = res.locals[ADDRESS_UNCHECKED] === true;
    res.locals[ADDRESS_UNCHECKED] = false;
    if (!unauthenticated && !checkAddress) return next(error);
    const counted = await this.countChecked(addressKey(req), unauthenticated ? addressKey(req) : null, this.defaults.failedAuthentications);
    if (counted?.blocked) return next(refusal(res, counted.blocked, BLOCKED_ADDRESS));
    if (counted && unauthenticated) show(res, counted.quota);
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
    const quota = await this.count(key, limit);
    if (!quota) return;
    if (quota.used > quota.limit) throw refusal(res, quota, what);
    show(res, quota);
  }

  /**
   * One round trip: whether `address` (when given) has reached the failed-authentication limit (then nothing
   * is counted), else a count of `key` (when given) against `limit`. Null when nothing could be counted.
   */
  private async countChecked(address: string | null, key: string | null, limit: number): Promise<{ blocked: Quota | null; quota: Quota } | null> {
    const windowSeconds = this.defaults.windowSeconds;
    const failedLimit = this.defaults.failedAuthentications;
    const started = Date.now();
    if (this.redis && started >= this.storeSkippedUntil) {
      try {
        const addressKey = address ? `${this.keyPrefix}:${address}` : '';
        const countKey = key ? `${this.keyPrefix}:${key}` : '';
        // A request's count of its token goes with the counts of the same token (and address) that wait for
        // the one in flight; a failed credential's count of its address is checked and counted on its own.
        const [blocked, used, ttl] =
          key !== null && key !== address
            ? await this.countTogether(addressKey, countKey, windowSeconds, failedLimit, limit)
            : await (this.redis as Redis & CountCommand)[ADDRESS_AND_COUNT](addressKey, countKey, windowSeconds, failedLimit, 1);
        const quota = { limit: blocked ? failedLimit : limit, used, resetSeconds: ttl >= 0 ? Math.ceil(ttl / 1000) : windowSeconds, windowSeconds };
        return { blocked: blocked ? quota : null, quota };
      } catch (error) {
        // As the limiter's insurance does for its own counts: this process's memory counts instead, and a Redis
        // that took the whole timeout is skipped a while. Unavailability is logged by the connection's handler;
        // an error Redis answered (the script's) is logged here.
        if (Date.now() - started >= STORE_TIMEOUT_MS) this.storeSkippedUntil = Date.now() + STORE_RETRY_MS;
        if (error instanceof Error && error.name === 'ReplyError')
          this.logger.warn({ err: error, key }, 'rate limits: Redis refused the count; counting in memory');
      }
    }
    return this.countCheckedInMemory(address, key, limit);
  }

  /**
   * Counts of one key (with one address looked at) that arrive while such a count is in flight wait for it,
   * then go together as one count of as many: one round trip to Redis for a burst instead of one per request
   * (0.3 scripts a request at 16 concurrent requests of one token: less work for the Redis every process
   * shares, fewer socket writes). Each still gets its own place in the window, as if counted one after the
   * other in arrival order; an address refused is refused to all of them. A failed count fails every count
   * waiting on it, so none waits longer than one command's timeout beyond its own turn.
   *
   * Under a steady load a count also takes places ahead (`Ahead`): as many as a quarter of the requests the
   * pair saw in the last 100 to 200 ms (at most `MAX_AHEAD`, and at most half of what the limit has left as last
   * seen), which the next requests take in this process without a round trip, for `AHEAD_MS` at most and
   * within the window. Places are counted in Redis when taken, so no more requests than the limit ever pass, in
   * all processes together; a place taken and not used by the end of its time is counted all the same (a
   * token's remaining count is short by that much, never more than half of what it had left). A request
   * served from places taken ahead is not looked at for its address meanwhile: an address refused since is
   * refused within `AHEAD_MS`. A burst at the limit, or a pair seen for the first time, takes none: every
   * request is counted in its own place, as before.
   *
   * The next places are taken before these run out: the request that leaves half of the last ones taken (or
   * fewer) sends the count for the next ones and goes on; they wait behind those left, and requests take them
   * when those are gone. Taken only when the last ones ran out, every request that arrived during the round trip
   * waited for it, and a request that waits before its append misses the group commit about to leave (one
   * statement at a time): at 16 connections of the bench's command API, 0.10 ms spent in the count on average
   * but 4.3 ms from first middleware to answer, against 0.017 ms and 3.5-3.8 ms taken before they ran out. What
   * goes unused is still at most half of what the token had left: places left count as taken.
   */
  private countTogether(address: string, key: string, windowSeconds: number, failedLimit: number, limit: number): Promise<[number, number, number]> {
    const pair = `${address}\n${key}`;
    const now = Date.now();
    const ahead = this.aheadOf(pair, now);
    const taken = placeAhead(ahead, now);
    if (taken) {
      // The next places are taken before these run out, so a steady load does not wait on the round trip.
      if (!this.coalesced.has(pair) && ahead.queued === null && placesLeft(ahead.places, now) <= ahead.refillBelow) {
        this.coalesced.set(pair, []);
        this.sendCounts(pair, address, key, windowSeconds, failedLimit, limit, []);
      }
      return Promise.resolve(taken);
    }
    this.stats.requestsWaited++;
    return new Promise((resolve, reject) => {
      const queue = this.coalesced.get(pair);
      if (queue) return void queue.push({ resolve, reject });
      this.coalesced.set(pair, []);
      this.sendCounts(pair, address, key, windowSeconds, failedLimit, limit, [{ resolve, reject }]);
    });
  }

  /** The pair's places taken ahead, with this request counted in its rate. */
  private aheadOf(pair: string, now: number): Ahead {
    let ahead = this.ahead.get(pair);
    if (!ahead) {
      if (this.ahead.size >= MAX_PAIRS) this.ahead.clear();
      ahead = { places: NO_PLACES, queued: null, refillBelow: 0, lastUsed: null, bucketStart: now, bucketCount: 0, previousCount: 0 };
      this.ahead.set(pair, ahead);
    }
    if (now - ahead.bucketStart >= RATE_BUCKET_MS) {
      ahead.previousCount = now - ahead.bucketStart < 2 * RATE_BUCKET_MS ? ahead.bucketCount : 0;
      ahead.bucketStart = now;
      ahead.bucketCount = 0;
    }
    ahead.bucketCount++;
    return ahead;
  }

  private sendCounts(pair: string, address: string, key: string, windowSeconds: number, failedLimit: number, limit: number, counts: CountWaiting[]): void {
    const command = (this.redis as Redis & CountCommand)[ADDRESS_AND_COUNT].bind(this.redis);
    const ahead = this.ahead.get(pair);
    const lastUsed = ahead?.lastUsed ?? null;
    // Places still left count as used already (they were), and as the token's own: whatever goes unused stays
    // within half of what it had left.
    const outstanding = ahead ? placesLeft(ahead.places, Date.now()) : 0;
    const left = lastUsed === null ? 0 : limit - lastUsed - counts.length - outstanding;
    const extra = ahead ? Math.max(0, Math.min(MAX_AHEAD, Math.floor((ahead.previousCount + ahead.bucketCount) / 4), Math.floor(left / 2))) : 0;
    if (counts.length + extra === 0) {
      // A refill with nothing to take (the limit nearly reached): the requests take their places one by one.
      this.coalesced.delete(pair);
      return;
    }
    this.stats.counts++;
    command(address, key, windowSeconds, failedLimit, counts.length + extra).then(
      ([blocked, used, ttl]) => {
        const first = used - counts.length - extra + 1;
        for (const [index, count] of counts.entries()) count.resolve(blocked ? [blocked, used, ttl] : [0, first + index, ttl]);
        if (ahead) {
          ahead.lastUsed = blocked ? null : used;
          const now = Date.now();
          if (!blocked && extra > 0 && ttl > 0) {
            const taken: Places = { next: first + counts.length, last: used, until: now + Math.min(AHEAD_MS, ttl), windowEndsAt: now + ttl };
            // Places still left go first; the new ones wait behind them.
            if (placesLeft(ahead.places, now) > 0) ahead.queued = taken;
            else Object.assign(ahead, { places: taken, queued: null });
            // The next refill leaves when about as many places are left as requests arrive during a round trip.
            ahead.refillBelow = Math.floor(extra / 2);
          } else if (blocked) {
            // A refused address takes back every place ahead; a count that took none left the places as they were (spent).
            Object.assign(ahead, { places: NO_PLACES, queued: null });
          }
        }
        // The counts that waited meanwhile take the places just taken ahead first; the rest go to Redis.
        const next: CountWaiting[] = [];
        for (const count of this.coalesced.get(pair) ?? []) {
          const taken = ahead && placeAhead(ahead, Date.now());
          if (taken) count.resolve(taken);
          else next.push(count);
        }
        if (next.length === 0) return void this.coalesced.delete(pair);
        this.coalesced.set(pair, []);
        this.sendCounts(pair, address, key, windowSeconds, failedLimit, limit, next);
      },
      (error: unknown) => {
        const waiting = this.coalesced.get(pair) ?? [];
        this.coalesced.delete(pair);
        for (const count of [...counts, ...waiting]) count.reject(error);
      },
    );
  }

  private async countCheckedInMemory(address: string | null, key: string | null, limit: number): Promise<{ blocked: Quota | null; quota: Quota } | null> {
    const windowSeconds = this.defaults.windowSeconds;
    const counter = this.memory;
    try {
      if (address) {
        const seen = await counter.get(address);
        const failedLimit = this.defaults.failedAuthentications;
        if (seen && seen.consumedPoints >= failedLimit) {
          const blocked = { limit: failedLimit, used: seen.consumedPoints, resetSeconds: Math.max(0, Math.ceil(seen.msBeforeNext / 1000)), windowSeconds };
          return { blocked, quota: blocked };
        }
      }
      if (!key) return { blocked: null, quota: { limit, used: 0, resetSeconds: windowSeconds, windowSeconds } };
      const counted = await counter.consume(key);
      return {
        blocked: null,
        quota: { limit, used: counted.consumedPoints, resetSeconds: Math.max(0, Math.ceil(counted.msBeforeNext / 1000)), windowSeconds },
      };
    } catch (error) {
      this.logger.warn({ err: error, key }, 'rate limits: could not count; the request goes on');
      return null;
    }
  }

  private async count(key: string, limit: number): Promise<Quota | null> {
    const windowSeconds = this.defaults.windowSeconds;
    const started = Date.now();
    const counter = started < this.storeSkippedUntil ? this.memory : this.counter;
    try {
      const counted = await counter.consume(key);
      if (counter !== this.memory && Date.now() - started >= STORE_TIMEOUT_MS) this.storeSkippedUntil = Date.now() + STORE_RETRY_MS;
      if (!counted) return { limit, used: 0, resetSeconds: windowSeconds, windowSeconds };
      return { limit, used: counted.consumedPoints, resetSeconds: Math.max(0, Math.ceil(counted.msBeforeNext / 1000)), windowSeconds };
    } catch (error) {
      this.logger.warn({ err: error, key }, 'rate limits: could not count; the request goes on');
      return null;
    }
  }
}

/** Set on a request that reached `refuseBlockedAddresses` until its address has been looked at. */
const ADDRESS_UNCHECKED = 'rateLimitAddressUnchecked';
/** What a refused address's 429 says it is for. */
const BLOCKED_ADDRESS = 'refused credentials from this address';

const ADDRESS_AND_COUNT = 'engageRateAddressAndCount';

/** Places of one address and key's window taken in Redis ahead of its requests. */
interface Places {
  /** The next place a request takes, and the last one taken ahead (none left when next > last). */
  next: number;
  last: number;
  /** Until when (epoch ms) the places may be used: `AHEAD_MS` after they were taken, within the window. */
  until: number;
  windowEndsAt: number;
}

const NO_PLACES: Places = Object.freeze({ next: 1, last: 0, until: 0, windowEndsAt: 0 });

/** The places of one address and key taken ahead of its requests, and the pair's recent rate. */
interface Ahead {
  /** The places requests take now, and those taken since, which they take next (a refill that came back early). */
  places: Places;
  queued: Places | null;
  /** A request that leaves this many places or fewer sends the refill (half of the last one taken ahead). */
  refillBelow: number;
  /** What Redis last said the window had used; null before it said (no places are taken ahead then). */
  lastUsed: number | null;
  /** Requests of the pair in the current `RATE_BUCKET_MS` and in the one before. */
  bucketStart: number;
  bucketCount: number;
  previousCount: number;
}

/** The next place taken ahead, as a count's answer (not blocked, used, ttl ms); null when none is left or they expired. */
function placeAhead(ahead: Ahead, now: number): [number, number, number] | null {
  if (placesLeft(ahead.places, now) === 0 && ahead.queued) {
    ahead.places = ahead.queued;
    ahead.queued = null;
  }
  const places = ahead.places;
  return placesLeft(places, now) > 0 ? [0, places.next++, places.windowEndsAt - now] : null;
}

/** How many places are left to take (none once they expired). */
function placesLeft(places: Places, now: number): number {
  return now < places.until ? Math.max(0, places.last - places.next + 1) : 0;
}

/** How long places taken ahead may be used, and how many may be taken at once. */
const AHEAD_MS = 50;
const MAX_AHEAD = 64;
const RATE_BUCKET_MS = 100;
/** Pairs followed at most; past it the followed pairs start again (none then takes places ahead at once). */
const MAX_PAIRS = 10_000;

/** A request's count waiting for its answer from Redis: blocked (0 or 1), used, ttl in ms. */
interface CountWaiting {
  resolve(answer: [number, number, number]): void;
  reject(error: unknown): void;
}

interface CountCommand {
  [ADDRESS_AND_COUNT](address: string, key: string, windowSeconds: number, failedLimit: number, requests: number): Promise<[number, number, number]>;
}

/**
 * KEYS[1]: the address's key, or '' (not looked at); KEYS[2]: the key to count, or ''. ARGV: the window in
 * seconds, the failed-authentication limit, the requests to count. Answers {1, used, ttl ms} for an address
 * at its limit (nothing counted), else {0, used, ttl ms} of the count (used 0 when nothing was counted). The
 * count is rate-limiter-flexible's own (the same keys and values: a fixed window from the key's first count).
 */
const ADDRESS_AND_COUNT_SCRIPT = `
if KEYS[1] ~= '' then
  local failed = tonumber(redis.call('get', KEYS[1]) or '0')
  if failed >= tonumber(ARGV[2]) then return {1, failed, redis.call('pttl', KEYS[1])} end
end
if KEYS[2] == '' then return {0, 0, -1} end
redis.call('set', KEYS[2], 0, 'EX', ARGV[1], 'NX')
local consumed = redis.call('incrby', KEYS[2], tonumber(ARGV[3]))
local ttl = redis.call('pttl', KEYS[2])
if ttl == -1 then
  redis.call('expire', KEYS[2], ARGV[1])
  ttl = 1000 * ARGV[1]
end
return {0, consumed, ttl}
`;

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
