import { sql, type RawBuilder } from 'kysely';

/** A column's type as the rows carry it (a jsonb column takes its values as JSON text, or as the value itself). */
export type ArrayElement = 'text' | 'integer' | 'double precision' | 'timestamptz' | 'jsonb';

/**
 * Rows for `insert into t (columns) select ... from rows from (json_array_elements_text($1::json), ...) as r(...)`:
 * each column as one JSON array of its values (one native `JSON.stringify` per column), zipped back into rows
 * and cast to the types given, so a statement has one parameter per column however many rows it writes (no
 * chunking under PostgreSQL's 65,535 parameters, one short statement to parse, no escaped array literal to build).
 * `null` and missing values are SQL nulls.
 *
 * Why columns and not one array of row objects (`json_to_recordset`): PostgreSQL builds a hash table of every
 * object's keys to read a row from it; reading a flat array is a single pass. Measured on a batch of 10,000
 * of the standings' moves (seven columns): 43-53 ms of the server's CPU against 71-73, the same in Node;
 * PostgreSQL arrays (`unnest($1::text[], ...)`) cost it 30-43 ms but Node 12-19 ms more to escape them.
 * But a live batch of a few rows goes faster as row objects (one parameter, one function to plan): below
 * 20 rows (`columnsFrom`), `json_to_recordset($1) as r(c1 text, ...)`, each column read as text and cast the
 * same way, so the values are the same whichever shape a batch takes.
 * Use as `db.insertInto(table).columns(rows.columns).expression(rows.select)`.
 */
export function unnestRows<Row extends object>(
  rows: readonly Row[],
  types: { readonly [Column in keyof Row & string]: ArrayElement },
  columnsFrom = COLUMNS_FROM_ROWS,
): { columns: (keyof Row & string)[]; select: RawBuilder<unknown> } {
  const columns = Object.keys(types) as (keyof Row & string)[];
  const cast = (column: string) => sql`${sql.id(column)}::${sql.raw(types[column as keyof Row & string])}`;
  if (rows.length < columnsFrom) {
    // Each column read as text, as json_array_elements_text reads it below: the same values either way.
    const asText = sql.join(columns.map((column) => sql`${sql.id(column)} text`));
    return { columns, select: sql`select ${sql.join(columns.map(cast))} from json_to_recordset(${JSON.stringify(rows)}::json) as r(${asText})` };
  }
  // json_array_elements_text gives a string's contents and any other value's JSON text: a jsonb column's JSON
  // text, or its value as it is, reads back as that value.
  return { columns, select: columnsAsRows(rows, columns, (column) => ({ elements: 'text', value: cast(column) })) };
}

/** How `columnsAsRows` reads a column: its array's elements as JSON values or as text, and the value selected from them. */
export interface ColumnRead {
  elements: 'json' | 'text';
  value: RawBuilder<unknown>;
}

/**
 * `select <each column's value> from rows from (<one JSON array per column>) as r(<columns>)`: the rows sent as
 * one JSON array per column (a missing value is null) and zipped back into rows; `read` says how each is read.
 */
export function columnsAsRows(rows: readonly object[], columns: readonly string[], read: (column: string) => ColumnRead): RawBuilder<unknown> {
  const arrays: RawBuilder<unknown>[] = [];
  const values: RawBuilder<unknown>[] = [];
  for (const column of columns) {
    const { elements, value } = read(column);
    const json = JSON.stringify(rows.map((row) => (row as Record<string, unknown>)[column] ?? null));
    arrays.push(elements === 'json' ? sql`json_array_elements(${json}::json)` : sql`json_array_elements_text(${json}::json)`);
    values.push(value);
  }
  return sql`select ${sql.join(values)} from rows from (${sql.join(arrays)}) as r(${sql.join(columns.map((column) => sql.id(column)))})`;
}

/**
 * From this many rows on, the rows go as one array per column. The custom events' insert (12 columns,
 * 2026-11-29): 3 rows cost PostgreSQL 180-230 µs a statement as objects against 240-270 as columns, 50 rows
 * 770-880 against 710-750.
 */
const COLUMNS_FROM_ROWS = 20;
