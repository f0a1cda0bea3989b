import { sql, type RawBuilder } from 'kysely';

/** A column's type as the rows carry it (a jsonb column takes its values as JSON text). */
export type ArrayElement = 'text' | 'integer' | 'double precision' | 'timestamptz' | 'jsonb';

/**
 * Rows for `insert into t (columns) select ... from json_to_recordset($1) as r(column type, ...)`: the rows as
 * one JSON parameter (one native `JSON.stringify`), read back with the types given, so a statement has one
 * parameter however many rows it writes (no chunking under PostgreSQL's 65,535 parameters, one short
 * statement to parse, no escaped array per column to build). `null` and missing values are SQL nulls.
 * Use as `db.insertInto(table).columns(rows.columns).expression(rows.select)`.
 */
export function unnestRows<Row extends object>(
  rows: readonly Row[],
  types: { readonly [Column in keyof Row & string]: ArrayElement },
): { columns: (keyof Row & string)[]; select: RawBuilder<unknown> } {
  const columns = Object.keys(types) as (keyof Row & string)[];
  // A jsonb column's values are JSON text: read as text, then cast (a JSON string read as jsonb stays a string).
  const definitions = columns.map((column) => sql`${sql.id(column)} ${sql.raw(types[column] === 'jsonb' ? 'text' : types[column])}`);
  const values = columns.map((column) => (types[column] === 'jsonb' ? sql`${sql.id(column)}::jsonb` : sql.id(column)));
  return {
    columns,
    select: sql`select ${sql.join(values)} from json_to_recordset(${JSON.stringify(rows)}::json) as r(${sql.join(definitions)})`,
  };
}
