import { Migrator, sql, type DatabaseIntrospector, type Kysely, type MigratorProps, type TableMetadata } from 'kysely';

/**
 * Kysely's `Migrator` on PostgreSQL, looking only at the schema its bookkeeping lives in.
 *
 * Before it migrates, the Migrator asks whether its schema and its two tables exist, and it asks by listing
 * every column of every table of every schema in the database (`db.introspection.getTables()`), three times a
 * run. With a generation schema per read model that list is long: 11 ms a look on the bench's store, 150 ms of
 * every start that has nothing to migrate, and a rebuild of every read model made 100 of them. It also failed
 * now and then, when another process dropped a retired generation's schema while the list was being read.
 * Here the Migrator's `db` answers those questions for its own schema alone (`migrationTableSchema`, or the
 * first schema of the search path), from the catalog, with a single short query each.
 */
export function scopedMigrator(props: MigratorProps): Migrator {
  return new Migrator({ ...props, db: withScopedIntrospection(props.db, props.migrationTableSchema) });
}

function withScopedIntrospection(db: Kysely<any>, schema: string | undefined): Kysely<any> {
  const own = sql`coalesce(${schema ?? null}::text, current_schema())`;
  const introspection: DatabaseIntrospector = {
    async getSchemas() {
      const rows = await sql<{ name: string }>`
        select nspname as name from pg_catalog.pg_namespace where nspname = ${own}`.execute(db);
      return rows.rows;
    },
    async getTables(): Promise<TableMetadata[]> {
      const rows = await sql<{ name: string; schema: string; is_view: boolean }>`
        select c.relname as name, n.nspname as schema, c.relkind in ('v', 'm') as is_view
        from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where n.nspname = ${own} and c.relkind in ('r', 'p', 'v', 'm', 'f')`.execute(db);
      return rows.rows.map((row) => ({ name: row.name, schema: row.schema, isView: row.is_view, columns: [] }));
    },
    async getMetadata() {
      return { tables: await this.getTables() };
    },
  };
  // The Migrator reads `db.introspection` and calls the rest of the instance, which keeps its own private state:
  // methods run on the instance itself.
  return new Proxy(db, {
    get(target, property) {
      if (property === 'introspection') return introspection;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
