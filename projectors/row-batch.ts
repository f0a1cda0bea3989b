import { sql, type RawBuilder } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';
import { keyOf } from './counters.ts';
import { recordsetOf } from './recordset.ts';

/**
 * The load–fold–save shape of a set-based batch: read every row the batch touches in one query, apply the
 * batch's events to those rows in memory in log order (the same pure step a single event takes), then write
 * what changed back with one multi-row upsert and one delete. A batch of N events costs three statements a
 * table, not N.
 *
 * Rows are keyed by their primary key columns, in the order given; values are compared as strings.
 */
export class RowBatch<Row extends object> {
  private readonly rows = new Map<string, Row>();
  private readonly changed = new Set<string>();
  private readonly deleted = new Map<string, Row>();

  constructor(
    private readonly table: string,
    private readonly keyColumns: readonly (keyof Row & string)[],
  ) {}

  keyOf(row: Partial<Row>): string {
    return keyOf(row, this.keyColumns);
  }

  /** Loads the rows with these keys (one query). Rows already held are kept. */
  async load(db: UntypedDb, keys: readonly Partial<Row>[]): Promise<void> {
    const wanted = new Map<string, Partial<Row>>();
    for (const key of keys) {
      const id = this.keyOf(key);
      if (!this.rows.has(id) && !this.deleted.has(id)) wanted.set(id, key);
    }
    if (wanted.size === 0) return;
    const rows = await db
      .selectFrom(this.table)
      .selectAll()
      .where(this.keyIn([...wanted.values()]))
      .execute();
    for (const row of rows as Row[]) this.rows.set(this.keyOf(row), row);
  }

  /** `(key columns) in (the keys given)`, the keys as one JSON parameter read with the table's row type. */
  private keyIn(keys: readonly Partial<Row>[]): RawBuilder<boolean> {
    const columns = sql.join(this.keyColumns.map((column) => sql.ref(column)));
    const values = keys.map((key) => Object.fromEntries(this.keyColumns.map((column) => [column, key[column]])));
    return sql<boolean>`(${columns}) in (${recordsetOf(this.table, this.keyColumns, values)})`;
  }

  get(key: Partial<Row>): Row | undefined {
    return this.rows.get(this.keyOf(key));
  }

  /** Every row held (loaded or written in this batch). */
  values(): IterableIterator<Row> {
    return this.rows.values();
  }

  set(row: Row): void {
    const id = this.keyOf(row);
    this.deleted.delete(id);
    this.rows.set(id, row);
    this.changed.add(id);
  }

  delete(key: Partial<Row>): void {
    const id = this.keyOf(key);
    const row = this.rows.get(id);
    this.rows.delete(id);
    this.changed.delete(id);
    this.deleted.set(id, (row ?? key) as Row);
  }

  /**
   * Writes the batch: deletes first, then one upsert of every changed row (all of its columns). `serialise`
   * turns a row into column values (JSON columns to text, say).
   */
  async save(db: UntypedDb, serialise: (row: Row) => Record<string, unknown> = (row) => ({ ...(row as Record<string, unknown>) })): Promise<void> {
    if (this.deleted.size > 0) {
      await db
        .deleteFrom(this.table)
        .where(this.keyIn([...this.deleted.values()]))
        .execute();
    }
    const rows = [...this.changed].map((id) => serialise(this.rows.get(id)!));
    for (let start = 0; start < rows.length; start += 1000) {
      const chunk = rows.slice(start, start + 1000);
      const columns = Object.keys(chunk[0]!).filter((column) => !this.keyColumns.includes(column as keyof Row & string));
      await db
        .insertInto(this.table)
        .values(chunk)
        .onConflict((oc) => {
          const target = oc.columns([...this.keyColumns]);
          return columns.length === 0
            ? target.doNothing()
            : target.doUpdateSet(Object.fromEntries(columns.map((column) => [column, sql.ref(`excluded.${column}`)])));
        })
        .execute();
    }
    this.changed.clear();
    this.deleted.clear();
  }
}
