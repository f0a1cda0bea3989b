import { sql, type RawBuilder } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';
import { columnsAsRows } from './unnest.ts';

/** From this many rows on, a statement takes them as one array per column. */
const COLUMNS_FROM_ROWS = 100;

/**
 * Rows for `insert into t (columns) select ...`, in one of two shapes, whichever PostgreSQL reads faster:
 *
 * - fewer than 100 rows (a live batch): one JSON array of row objects read with the table's own row type,
 *   `json_populate_recordset(null::t, $1)`: one parameter, one function to plan;
 * - 100 or more (a rebuild's batch): one JSON array per column, each read with the column's type,
 *   `rows from (json_array_elements_text($1), ...)`: PostgreSQL hashes every object's keys to read a row
 *   from it, where a flat array is one pass.
 *
 * Measured on reward_assets' upsert (19 columns, 2026-11-29): 3 rows cost 0.54-0.69 ms a statement (Node and
 * PostgreSQL) as objects against 0.94-0.95 as columns, 100 rows about the same, 300 rows 9.4-9.9 ms against
 * 7.6-8.4, 1,000 rows 59-73 ms against 25-35.
 *
 * Either way a statement has one parameter, or one per column, however many rows it writes. Values must be
 * JSON-ready: strings, numbers, booleans, null, Dates (their ISO text); a json or jsonb column takes the value
 * itself (an object, an array, a string), not JSON text, and an array column (`text[]`) a JSON array. A column
 * missing from a row, and a JSON null, are SQL nulls. A too long value fails the insert as any value does.
 *
 * The column types are read from the catalog once per table (and generation: the name is qualified by the
 * Kysely's schema) and process. A column is cast to its type without modifier (`character varying`), so the
 * insert's assignment checks a length.
 * Use as `db.insertInto(table).columns(columns).expression(await recordsetOf(db, table, columns, rows))`;
 * `columnsFrom` moves the switch between the shapes (tests write each shape).
 */
export async function recordsetOf(
  db: UntypedDb,
  table: string,
  columns: readonly string[],
  rows: readonly object[],
  columnsFrom = COLUMNS_FROM_ROWS,
): Promise<RawBuilder<unknown>> {
  if (rows.length < columnsFrom) {
    return sql`select ${sql.join(columns.map((column) => sql.id(column)))} from json_populate_recordset(null::${sql.table(table)}, ${JSON.stringify(rows)}::json)`;
  }
  const types = await columnTypesOf(db, table);
  for (const column of columns) if (!types.has(column)) throw new Error(`${table} has no column ${column}`);
  return columnsAsRows(rows, columns, (column) => {
    const type = types.get(column)!;
    const value = sql.id(column);
    if (type === 'json' || type === 'jsonb')
      return { elements: 'json', value: sql`case when json_typeof(${value}) <> 'null' then ${value}::${sql.raw(type)} end` };
    if (type.endsWith('[]'))
      return {
        elements: 'json',
        value: sql`case when json_typeof(${value}) = 'array' then array(select json_array_elements_text(${value}))::${sql.raw(type)} end`,
      };
    // A string's contents, any other value's JSON text (a number, true), null as null.
    return { elements: 'text', value: sql`${value}::${sql.raw(type)}` };
  });
}

/** Per qualified table name: column name → its type without modifier, as SQL names it (`timestamp with time zone`). */
const columnTypes = new Map<string, Promise<ReadonlyMap<string, string>>>();

function columnTypesOf(db: UntypedDb, table: string): Promise<ReadonlyMap<string, string>> {
  const qualified = qualifiedName(db, table);
  let types = columnTypes.get(qualified);
  if (!types) {
    types = readColumnTypes(db, qualified);
    columnTypes.set(qualified, types);
    // A failed read (an aborted transaction, a table not there yet) is not remembered.
    types.catch(() => columnTypes.delete(qualified));
  }
  return types;
}

/** The table's name as the Kysely writes it in a query (`"rm_users_g2"."users"`): its schema plugin qualifies query tables only. */
function qualifiedName(db: UntypedDb, table: string): string {
  const prefix = 'select * from ';
  const text = db.selectFrom(table).selectAll().compile().sql;
  if (!text.startsWith(prefix)) throw new Error(`unexpected SQL for a table's name: ${text}`);
  return text.slice(prefix.length);
}

async function readColumnTypes(db: UntypedDb, qualified: string): Promise<ReadonlyMap<string, string>> {
  const { rows } = await sql<{ name: string; type: string }>`
    select attname as name, format_type(atttypid, null) as type
    from pg_attribute where attrelid = to_regclass(${qualified}) and attnum > 0 and not attisdropped`.execute(db);
  if (rows.length === 0) throw new Error(`no columns found for ${qualified}`);
  return new Map(rows.map((row) => [row.name, row.type]));
}
