import { sql } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';

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
    return JSON.stringify(this.keyColumns.map((column) => String(row[column])));
  }

  /** Loads the rows with these keys (one query; 2,000 keys a statement). Rows already held are kept. */
  async load(db: UntypedDb, keys: readonly Partial<Row>[]): Promise<void> {
    const wanted = new Map<string, Partial<Row>>();
    for (const key of keys) {
      const id = this.keyOf(key);
      if (!this.rows.has(id) && !this.deleted.has(id)) wanted.set(id, key);
    }
    const list = [...wanted.values()];
    for (let start = 0; start < list.length; start += 2000) {
      const chunk = list.slice(start, start + 2000);
      const columns = sql.join(this.keyColumns.map((column) => sql.ref(column)));
      const tuples = sql.join(chunk.map((key) => sql`(${sql.join(this.keyColumns.map((column) => key[column]))})`));
      const rows = await db
        .selectFrom(this.table)
        .selectAll()
        .where(sql<boolean>`(${columns}) in (${tuples})`)
        .execute();
      for (const row of rows as Row[]) this.rows.set(this.keyOf(row), row);
    }
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
    const deleted = [...this.deleted.values()];
    for (let start = 0; start < deleted.length; start += 2000) {
      const chunk = deleted.slice(start, start + 2000);
      const columns = sql.join(this.keyColumns.map((column) => sql.ref(column)));
      const tuples = sql.join(chunk.map((key) => sql`(${sql.join(this.keyColumns.map((column) => key[column]))})`));
      await db
        .deleteFrom(this.table)
        .where(sql<boolean>`(${columns}) in (${tuples})`)
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
