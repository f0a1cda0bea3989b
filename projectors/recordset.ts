import { sql, type RawBuilder } from 'kysely';

/**
 * Rows written as one JSON parameter: `insert into t (columns) select columns from
 * json_populate_recordset(null::t, $1::json)`. The table's own row type reads each column from its JSON value
 * (text to timestamptz, a number to integer, ...), so a statement has one parameter however many rows and
 * columns it writes, and turning the rows into it is one `JSON.stringify` (native) instead of an escaped array
 * per column. Values must be JSON-ready: strings, numbers, booleans, null, Dates (their ISO text); a jsonb
 * column takes the value itself, not JSON text. A column missing from a row is null.
 * Use as `db.insertInto(table).columns(columns).expression(recordsetOf(table, columns, rows))`; the table is
 * qualified by the Kysely's schema like any other.
 */
export function recordsetOf(table: string, columns: readonly string[], rows: readonly object[]): RawBuilder<unknown> {
  return sql`select ${sql.join(columns.map((column) => sql.id(column)))} from json_populate_recordset(null::${sql.table(table)}, ${JSON.stringify(rows)}::json)`;
}
