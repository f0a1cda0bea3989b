import { sql, type Kysely } from 'kysely';

/**
 * Adds `amounts` to the counters of the row `key` names, creating the row (with those amounts and the
 * `fixed` columns, which never change afterwards) when it is missing: one statement. `key` must be the
 * table's primary key.
 */
export async function addTo(
  db: Kysely<any>,
  table: string,
  key: Record<string, unknown>,
  amounts: Record<string, number>,
  fixed: Record<string, unknown> = {},
): Promise<void> {
  await db
    .insertInto(table)
    .values({ ...key, ...fixed, ...amounts })
    .onConflict((oc) =>
      oc
        .columns(Object.keys(key))
        .doUpdateSet(Object.fromEntries(Object.keys(amounts).map((column) => [column, sql`${sql.id(table, column)} + excluded.${sql.id(column)}`]))),
    )
    .execute();
}
