import { sql, type RawBuilder } from 'kysely';

/** The element type of a column's array parameter (a jsonb column takes its values as JSON text). */
export type ArrayElement = 'text' | 'integer' | 'double precision' | 'timestamptz' | 'jsonb';

/**
 * Rows for `insert into t (columns) select * from unnest($1::text[], $2::integer[], ...)`: one array
 * parameter per column, so a statement has as many parameters as the table has columns however many rows
 * it writes (no chunking under PostgreSQL's 65,535 parameters, and one short statement to parse).
 * `null` elements are SQL nulls. Use as `db.insertInto(table).columns(rows.columns).expression(rows.select)`.
 */
export function unnestRows<Row extends object>(
  rows: readonly Row[],
  types: { readonly [Column in keyof Row & string]: ArrayElement },
): { columns: (keyof Row & string)[]; select: RawBuilder<unknown> } {
  const columns = Object.keys(types) as (keyof Row & string)[];
  const arrays = columns.map((column) => {
    const values = rows.map((row) => row[column] ?? null);
    return sql`${values}::${sql.raw(types[column])}[]`;
  });
  return { columns, select: sql`select * from unnest(${sql.join(arrays)})` };
}
