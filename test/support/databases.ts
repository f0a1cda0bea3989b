import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPostgres, type Database, type PostgresOptions } from '../../infra/database.ts';

export interface TestDatabase {
  database: Database;
  /** The database's URL, for a second pool or another process. */
  url: string;
  drop(): Promise<void>;
}

/**
 * The server the suites make their databases on: TEST_DATABASE_URL, else the local PostgreSQL; where that
 * does not answer (and REQUIRE_SERVICES is not 1), test/support/global-setup.ts started an embedded
 * PostgreSQL for the run and set TEST_DATABASE_URL to it.
 */
export const adminUrl = () => process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A database of this test file's own on the test server (`options`: its pool's, e.g. longer timeouts). */
export async function freshDatabase(options: PostgresOptions = {}): Promise<TestDatabase> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`PostgreSQL is required but unreachable at ${adminUrl()}: ${String(error)}`);
  }
  const name = `engage_test_${randomBytes(6).toString('hex')}`;
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  const database = await openPostgres(url.toString(), options);
  return {
    database,
    url: url.toString(),
    async drop() {
      await database.close();
      const cleanup = new pg.Client({ connectionString: adminUrl() });
      await cleanup.connect();
      await cleanup.query(`drop database if exists ${name} with (force)`);
      await cleanup.end();
    },
  };
}
