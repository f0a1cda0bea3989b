import type { ColumnType } from 'kysely';

/** Column types as PostgreSQL hands them back, for the table interfaces read models declare. */

/** timestamptz: read back as a Date; written as an ISO string (as events carry it) or a Date. */
export type Timestamp = ColumnType<Date, Date | string, Date | string>;

/** A nullable timestamptz. */
export type NullableTimestamp = ColumnType<Date | null, Date | string | null, Date | string | null>;

/** jsonb: read back parsed; written as JSON text (`JSON.stringify`), since `pg` would send an array as a PostgreSQL array. */
export type Json<T> = ColumnType<T, string, string>;

/** bigint: read back as a string (no lossy number by accident); written as a number. */
export type Int8 = ColumnType<string, number | string, number | string>;

/**
 * A row as a batch holds it between load and save: what was read back (JSON parsed, timestamps as Dates) or
 * what an event wrote (timestamps as the event's ISO strings). `columnsOf` turns it back into column values.
 */
export type Held<Table> = { [C in keyof Table]: HeldValue<Table[C]> };

type HeldValue<V> =
  V extends ColumnType<infer Select, infer Insert, unknown> ? Select | Exclude<Insert, string | undefined> | (Date extends Select ? string : never) : V;

/** A held row's column values: the JSON columns named as JSON text (SQL null stays null), Dates as ISO strings. */
export function columnsOf<Row extends object>(row: Row, jsonColumns: readonly (keyof Row & string)[] = []): Record<string, unknown> {
  const columns: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) {
    columns[column] =
      value !== null && (jsonColumns as readonly string[]).includes(column) ? JSON.stringify(value) : value instanceof Date ? value.toISOString() : value;
  }
  return columns;
}
