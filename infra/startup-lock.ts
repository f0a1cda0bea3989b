import type { Database } from './database.ts';

/**
 * Runs `work` while holding a session advisory lock shared by every process on the database, so that
 * processes starting together (the roles of a deployment) take turns at migrations and at preparing
 * the read models' schemas and views instead of racing on them.
 */
export async function underStartupLock<T>(database: Database, work: () => Promise<T>): Promise<T> {
  const session = await database.openDedicatedSession();
  try {
    await session.query(`select pg_advisory_lock(hashtextextended('engage:start-up', 0))`);
    return await work();
  } finally {
    // Closing the session releases the lock, also when the unlock itself cannot run.
    await session.query(`select pg_advisory_unlock(hashtextextended('engage:start-up', 0))`).catch(() => undefined);
    await session.close();
  }
}
