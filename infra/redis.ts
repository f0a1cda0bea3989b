import { Redis } from 'ioredis';

/** Connects and pings once, so a wrong REDIS_URL stops start-up instead of failing the first job. */
export async function openRedis(url: string): Promise<Redis> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null, connectTimeout: 5000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new Error(`REDIS_URL: cannot reach Redis at ${url}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return redis;
}
