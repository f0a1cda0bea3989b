import { sql, type Kysely, type Migration } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scopedMigrator } from '../infra/migrator.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';

/** Two migrations that create tables (unqualified: in the Kysely's schema, or the search path's first). */
const migrations = (schema?: string): Record<string, Migration> => {
  const scoped = (db: Kysely<any>) => (schema ? db.withSchema(schema) : db);
  return {
    '0001_first': {
      up: (db) =>
        scoped(db)
          .schema.createTable('first_table')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .execute(),
    },
    '0002_second': {
      up: (db) =>
        scoped(db)
          .schema.createTable('second_table')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .execute(),
    },
  };
};

async function tablesOf(db: Kysely<any>, schema: string): Promise<string[]> {
  const rows = await sql<{ name: string }>`select tablename as name from pg_tables where schemaname = ${schema} order by tablename`.execute(db);
  return rows.rows.map((row) => row.name);
}

describe('a migrator that looks only at its own schema', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await freshDatabase();
  });
  afterAll(async () => {
    await test.drop();
  });

  it('migrates a schema of its own once, and finds its bookkeeping there the next time', async () => {
    const db = test.database.db;
    await sql`create schema scoped_a`.execute(db);
    const run = () =>
      scopedMigrator({ db, provider: { getMigrations: async () => migrations('scoped_a') }, migrationTableSchema: 'scoped_a' }).migrateToLatest();
    const first = await run();
    expect(first.error).toBeUndefined();
    expect(first.results?.map((result) => [result.migrationName, result.status])).toEqual([
      ['0001_first', 'Success'],
      ['0002_second', 'Success'],
    ]);
    expect(await tablesOf(db, 'scoped_a')).toEqual(['first_table', 'kysely_migration', 'kysely_migration_lock', 'second_table']);
    const second = await run();
    expect(second.error).toBeUndefined();
    expect(second.results).toEqual([]);
  });

  it('creates its schema when it is missing', async () => {
    const db = test.database.db;
    const { error } = await scopedMigrator({
      db,
      provider: { getMigrations: async () => migrations('scoped_new') },
      migrationTableSchema: 'scoped_new',
    }).migrateToLatest();
    expect(error).toBeUndefined();
    expect(await tablesOf(db, 'scoped_new')).toEqual(['first_table', 'kysely_migration', 'kysely_migration_lock', 'second_table']);
  });

  it('without a schema, keeps its tables in the search path’s first schema, whatever other schemas hold', async () => {
    const db = test.database.db;
    // Tables of the same names elsewhere: Kysely's own look would have taken them for its own, then failed to
    // write to them through the search path.
    await sql`create schema elsewhere`.execute(db);
    await sql`create table elsewhere.app_migrations (name varchar(255) primary key, timestamp varchar(255) not null)`.execute(db);
    await sql`create table elsewhere.app_migrations_lock (id varchar(255) primary key, is_locked integer not null default 0)`.execute(db);
    const run = () =>
      scopedMigrator({
        db,
        provider: { getMigrations: async () => migrations() },
        migrationTableName: 'app_migrations',
        migrationLockTableName: 'app_migrations_lock',
      }).migrateToLatest();
    const first = await run();
    expect(first.error).toBeUndefined();
    expect(first.results?.map((result) => result.migrationName)).toEqual(['0001_first', '0002_second']);
    expect(await tablesOf(db, 'public')).toEqual(['app_migrations', 'app_migrations_lock', 'first_table', 'second_table']);
    expect((await sql<{ count: string }>`select count(*) as count from elsewhere.app_migrations`.execute(db)).rows[0]!.count).toBe('0');
    expect((await run()).results).toEqual([]);
  });
});
