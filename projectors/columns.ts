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
 * what an event wrote (timestamps as the event's ISO strings); `RowBatch` writes it as it is (`recordsetOf`).
 */
export type Held<Table> = { [C in keyof Table]: HeldValue<Table[C]> };

type HeldValue<V> =
  V extends ColumnType<infer Select, infer Insert, unknown> ? Select | Exclude<Insert, string | undefined> | (Date extends Select ? string : never) : V;
