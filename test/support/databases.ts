import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPglite, openPostgres, type Database } from '../../infra/database.ts';

export interface TestDatabase {
  database: Database;
  /** The database's URL, or null on the PGlite fallback. */
  url: string | null;
  drop(): Promise<void>;
}

const adminUrl = () => process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A database of this test file's own on the real PostgreSQL server. Where no server answers, the suite
 * falls back to in-process PGlite and says so, except under REQUIRE_SERVICES=1 (CI), where that fails.
 */
export async function freshServerDatabase(): Promise<TestDatabase | null> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  try {
    await admin.connect();
  } catch (error) {
    if (process.env.REQUIRE_SERVICES === '1') throw new Error(`PostgreSQL is required (REQUIRE_SERVICES=1) but unreachable at ${adminUrl()}: ${String(error)}`);
    console.warn(`[test] PostgreSQL unreachable at ${adminUrl()}; this suite falls back to PGlite`);
    return null;
  }
  const name = `engage_test_${randomBytes(6).toString('hex')}`;
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  const database = await openPostgres(url.toString());
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

export async function freshDatabase(): Promise<TestDatabase> {
  const server = await freshServerDatabase();
  if (server) return server;
  const database = await openPglite(undefined);
  return { database, url: null, drop: () => database.close() };
}

export async function freshPglite(): Promise<TestDatabase> {
  const database = await openPglite(undefined);
  return { database, url: null, drop: () => database.close() };
}
