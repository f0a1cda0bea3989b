import type { Kysely } from 'kysely';

/**
 * What a projection reads again and again within one batch (an organisation's time zone, a community's
 * challenges), kept for that batch's transaction only: the key is the batch's scoped Kysely, so a
 * rolled-back batch takes its cache with it. A projection forgets what its own writes change.
 */
const caches = new WeakMap<Kysely<any>, Map<string, unknown>>();

function cacheOf(db: Kysely<any>): Map<string, unknown> {
  let cache = caches.get(db);
  if (!cache) caches.set(db, (cache = new Map()));
  return cache;
}

export async function perBatch<T>(db: Kysely<any>, key: string, load: () => Promise<T>): Promise<T> {
  const cache = cacheOf(db);
  if (cache.has(key)) return cache.get(key) as T;
  const value = await load();
  cache.set(key, value);
  return value;
}

export function forgetInBatch(db: Kysely<any>, key: string): void {
  cacheOf(db).delete(key);
}
