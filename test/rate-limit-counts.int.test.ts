import { randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HttpError } from '../infra/http/errors.ts';
import { RateLimits } from '../infra/http/rate-limits.ts';

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const WINDOW = 3600;
const LIMIT = 5;

/**
 * Counts of one API token that reach Redis while one is in flight go together as one count of as many
 * (`RateLimits.countTogether`): each request must still get a place of its own in the window, as if counted
 * one after the other. The requests here start in one tick, so the first goes alone and the rest together.
 */
describe('rate limits on Redis: concurrent counts of one token', () => {
  const suite = limitsOnRedis(LIMIT, 'burst');
  const request = () => throughLimit(suite.limits, 'burst');

  it('gives each of a burst a place of its own: the limit passes, the rest are refused, and every one is counted', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, () => request()));
    const passed = answers.filter((answer) => answer.remaining !== undefined).map((answer) => answer.remaining!);
    expect(passed.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4]);
    expect(answers.filter((answer) => answer.refused === 429)).toHaveLength(12 - LIMIT);
    expect(await suite.counted()).toBe(12);
    expect(await request()).toEqual({ refused: 429 });
  });
});

describe('rate limits on Redis: places taken ahead under a steady load', () => {
  const limit = 400;
  const suite = limitsOnRedis(limit, 'steady');

  it('serves most requests from places counted ahead, each place once, and never lets more than the limit pass', async () => {
    const answers: { remaining?: number; refused?: number }[] = [];
    // Waves of 8 concurrent requests, one after the other, until well past the limit.
    for (let wave = 0; wave < 70; wave++) answers.push(...(await Promise.all(Array.from({ length: 8 }, () => throughLimit(suite.limits, 'steady')))));
    const passed = answers.filter((answer) => answer.remaining !== undefined).map((answer) => answer.remaining!);
    // Never more than the limit, each in a place of its own; the rest refused.
    expect(passed.length).toBeLessThanOrEqual(limit);
    expect(new Set(passed).size).toBe(passed.length);
    expect(passed.every((remaining) => remaining >= 0 && remaining < limit)).toBe(true);
    expect(answers.filter((answer) => answer.refused === 429)).toHaveLength(answers.length - passed.length);
    // Far fewer trips to Redis than requests (61 for 560 on an idle machine; the count depends on the rate).
    expect(suite.limits.stats.counts).toBeLessThan(answers.length / 2);
    // Every place handed out was counted in Redis, and what was taken ahead and not used is at most half of
    // what was left when it was taken: the limit's last places went one by one.
    const counted = await suite.counted();
    expect(counted).toBeGreaterThanOrEqual(answers.length);
    expect(passed.length).toBeGreaterThan(limit / 2);
  });
});

describe('rate limits on Redis: places taken again before they run out', () => {
  const suite = limitsOnRedis(100_000, 'refilled');
  const inFlight: Promise<unknown>[] = [];

  beforeAll(() => {
    // Each count's answer (on the limiter's own connection, a private field), so that the test can let them all
    // arrive, as they would between requests that come apart, before its next requests.
    const connection = (suite.limits as unknown as { redis: Record<string, (...args: unknown[]) => Promise<unknown>> }).redis;
    const script = connection.engageRateAddressAndCount!;
    connection.engageRateAddressAndCount = (...args: unknown[]) => {
      const answer = script.apply(connection, args);
      inFlight.push(answer.catch(() => undefined));
      return answer;
    };
  });

  it('under a steady load, no request waits for Redis once places are taken ahead: the next ones are taken while some are left', async () => {
    const answers: { remaining?: number; refused?: number }[] = [];
    let waitedAtStart = 0;
    // The clock stands still, so the pair's rate (and the places a count takes ahead) does not depend on how
    // fast this machine runs the waves, and places taken ahead never expire.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      for (let wave = 0; wave < 120; wave++) {
        answers.push(...(await Promise.all(Array.from({ length: 8 }, () => throughLimit(suite.limits, 'refilled')))));
        // Every count sent meanwhile has its answer before the next wave (and its callbacks have run).
        while (inFlight.length > 0) await Promise.all(inFlight.splice(0));
        await new Promise((resolve) => setImmediate(resolve));
        if (wave === 19) waitedAtStart = suite.limits.stats.requestsWaited;
      }
    } finally {
      vi.useRealTimers();
    }
    // Requests waited only while the pair's rate was being learnt; from then on every one took a place ahead.
    expect(suite.limits.stats.requestsWaited).toBe(waitedAtStart);
    expect(suite.limits.stats.counts).toBeLessThan(answers.length / 4);
    // Each request in a place of its own, every place counted in Redis, unused ones within half of what was left.
    const passed = answers.map((answer) => answer.remaining);
    expect(passed.every((remaining) => remaining !== undefined)).toBe(true);
    expect(new Set(passed).size).toBe(answers.length);
    const counted = await suite.counted();
    expect(counted).toBeGreaterThanOrEqual(answers.length);
    expect(counted - answers.length).toBeLessThanOrEqual(2 * 64);
  });
});

/**
 * A suite's limiter on Redis (a key prefix of its own) and what Redis counted for one token; closed and the
 * count removed after the suite.
 */
function limitsOnRedis(limit: number, tokenId: string): { readonly limits: RateLimits; counted(): Promise<number> } {
  const keyPrefix = `engage-rate-test-${randomBytes(4).toString('hex')}`;
  let limits: RateLimits | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    limits = await openLimits(keyPrefix, limit);
    redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, commandTimeout: 2000 });
  });
  afterAll(async () => {
    limits?.close();
    await redis?.del(`${keyPrefix}:token:${tokenId}`);
    redis?.disconnect();
  });
  return {
    get limits() {
      return limits!;
    },
    counted: async () => Number(await redis!.get(`${keyPrefix}:token:${tokenId}`)),
  };
}

function openLimits(keyPrefix: string, limit: number): Promise<RateLimits> {
  return RateLimits.open({
    redisUrl,
    keyPrefix,
    defaults: { windowSeconds: WINDOW, apiTokenRequests: limit, userTokenRequests: limit, failedAuthentications: 3 },
    logger: pino({ level: 'silent' }),
  });
}

/** One request through `limitApiToken`: the remaining count it was shown, or the status it was refused with. */
function throughLimit(limits: RateLimits, tokenId: string): Promise<{ remaining?: number; refused?: number }> {
  const headers: Record<string, string> = {};
  const res = {
    locals: {
      tenant: { organisationId: 'o', domain: 'd', tokenId, families: ['admin'], rateLimits: { apiTokenRequests: null, userTokenRequests: null } },
    },
    headersSent: false,
    set(values: Record<string, string>) {
      Object.assign(headers, values);
      return res;
    },
  };
  return new Promise((resolve, reject) => {
    const next = () => resolve({ remaining: Number(headers['RateLimit-Remaining']) });
    void Promise.resolve(limits.limitApiToken({} as Request, res as unknown as Response, next)).catch((error: unknown) => {
      if (error instanceof HttpError) resolve({ refused: error.status });
      else reject(error instanceof Error ? error : new Error(String(error)));
    });
  });
}
