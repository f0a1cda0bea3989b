import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { openEmbeddedPostgres } from '../../infra/embedded-postgres.ts';
import { adminUrl } from './databases.ts';

/**
 * Runs once before the suites. Where the test server (TEST_DATABASE_URL, else the local PostgreSQL) does
 * not answer, the run uses an embedded PostgreSQL of its own (the one embedded mode runs, in a folder of
 * the temporary directory kept between runs) and says so; under REQUIRE_SERVICES=1 (CI) it does not, and
 * the suites fail naming the server they could not reach.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const client = new pg.Client({ connectionString: adminUrl(), connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    if (process.env.REQUIRE_SERVICES === '1') return undefined;
    const dataDir = join(tmpdir(), `engage-test-postgres-${process.getuid?.() ?? 'user'}`);
    console.warn(`[test] PostgreSQL unreachable at ${adminUrl()} (${String(error)}); the suites use an embedded PostgreSQL in ${dataDir}`);
    const embedded = await openEmbeddedPostgres(dataDir, { logger: pino({ level: 'warn' }) });
    // The suites run in processes started after this, which inherit it.
    process.env.TEST_DATABASE_URL = embedded.url;
    return () => embedded.release();
  } finally {
    await client.end().catch(() => undefined);
  }
}
