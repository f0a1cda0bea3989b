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
  /** Rows `add`ed without their key loaded: written only where the table has none (`on conflict do nothing`). */
  private readonly unread = new Set<string>();

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
      .where(await this.keyIn(db, [...wanted.values()]))
      .execute();
    for (const row of rows as Row[]) this.rows.set(this.keyOf(row), row);
  }

  /** `(key columns) in (the keys given)`, the keys as JSON read with the table's types (`recordsetOf`). */
  private async keyIn(db: UntypedDb, keys: readonly Partial<Row>[]): Promise<RawBuilder<boolean>> {
    const columns = sql.join(this.keyColumns.map((column) => sql.ref(column)));
    const values = keys.map((key) => Object.fromEntries(this.keyColumns.map((column) => [column, key[column]])));
    return sql<boolean>`(${columns}) in (${await recordsetOf(db, this.table, this.keyColumns, values)})`;
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

  /**
   * A row its event says is new, its key not loaded: saved with `on conflict do nothing`, so a row the table
   * holds already stays as it is, as a load and `if (get(key)) skip` would have left it, without the load's read.
   * It stays so whatever `set` puts under its key later in the batch: load a key a batch may change instead.
   */
  add(row: Row): void {
    this.set(row);
    this.unread.add(this.keyOf(row));
  }

  delete(key: Partial<Row>): void {
    const id = this.keyOf(key);
    const row = this.rows.get(id);
    this.rows.delete(id);
    this.changed.delete(id);
    this.unread.delete(id);
    this.deleted.set(id, (row ?? key) as Row);
  }

  /**
   * Writes the batch: deletes first, then one upsert of every changed row (all of its columns) and one insert
   * of the rows `add`ed, the rows as JSON read with the table's own types (`recordsetOf`): a jsonb column takes
   * the value held (an object, an array; null is SQL null), a Date its ISO text. Kysely's multi-row `values` sent
   * a parameter per column per row, a fifth of a rebuild's Node time went into building and sending them.
   */
  async save(db: UntypedDb): Promise<void> {
    if (this.deleted.size > 0) {
      await db
        .deleteFrom(this.table)
        .where(await this.keyIn(db, [...this.deleted.values()]))
        .execute();
    }
    const upserted = [...this.changed].filter((id) => !this.unread.has(id));
    const added = [...this.changed].filter((id) => this.unread.has(id));
    if (upserted.length > 0) await this.insert(db, upserted, 'upsert');
    if (added.length > 0) await this.insert(db, added, 'if absent');
    this.changed.clear();
    this.deleted.clear();
    this.unread.clear();
  }

  private async insert(db: UntypedDb, ids: readonly string[], mode: 'upsert' | 'if absent'): Promise<void> {
    const rows = ids.map((id) => this.rows.get(id)!);
    const columns = Object.keys(rows[0]!);
    const updated = mode === 'upsert' ? columns.filter((column) => !this.keyColumns.includes(column as keyof Row & string)) : [];
    await db
      .insertInto(this.table)
      .columns(columns)
      .expression(await recordsetOf(db, this.table, columns, rows))
      .onConflict((oc) => {
        const target = oc.columns([...this.keyColumns]);
        return updated.length === 0
          ? target.doNothing()
          : target.doUpdateSet(Object.fromEntries(updated.map((column) => [column, sql.ref(`excluded.${column}`)])));
      })
      .execute();
  }
}
