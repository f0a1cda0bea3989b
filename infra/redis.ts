import { Redis } from 'ioredis';
import { redactedUrl, waitUntilReachable } from './database.ts';
import type { Logger } from './logging.ts';

export interface RedisOptions {
  /** Opening a connection (REDIS_CONNECT_TIMEOUT_MS). */
  connectMs: number;
  /** Wait for Redis to answer (the server process); otherwise one attempt, and a failure throws. */
  wait: boolean;
}

/**
 * The job queue's connection. It first makes sure Redis answers; with `wait`, it waits for it (with backoff
 * and a log line per attempt), so a process started before its Redis, or pointed at a wrong REDIS_URL, says
 * so and starts once Redis answers.
 *
 * Afterwards its commands wait for a reconnection instead of failing (`maxRetriesPerRequest: null`, as
 * BullMQ requires of its connections, which duplicate this one): jobs resume by themselves once Redis is
 * back. Nothing that answers a request waits on it; `/readyz` asks through `openRedisProbe`.
 */
export async function openRedis(url: string, logger: Logger, options: RedisOptions): Promise<Redis> {
  const attempt = async () => {
    // One try per attempt: this client neither reconnects nor queues commands.
    const once = new Redis(url, {
      lazyConnect: true,
      connectTimeout: options.connectMs,
      commandTimeout: options.connectMs,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    // Its 'error' event says why (refused, unknown host); connect() only says the connection closed.
    let cause: unknown;
    once.on('error', (error) => (cause = error));
    try {
      await once.connect();
      await once.ping();
    } catch (error) {
      throw cause ?? error;
    } finally {
      once.disconnect();
    }
  };
  try {
    if (options.wait) await waitUntilReachable('Redis', redactedUrl(url), logger, attempt);
    else await attempt();
  } catch (error) {
    throw new Error(`REDIS_URL: cannot use Redis at ${redactedUrl(url)}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const redis = new Redis(url, { maxRetriesPerRequest: null, connectTimeout: options.connectMs });
  redis.on('error', () => undefined);
  return redis;
}

/**
 * A connection of its own for health checks: a command fails at once while Redis is away (no offline
 * queue) and after `commandMs` when it does not answer, where the job queue's connection would wait.
 */
export function openRedisProbe(redis: Redis, commandMs: number): Redis {
  const probe = redis.duplicate({ enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: commandMs });
  probe.on('error', () => undefined);
  return probe;
}
