import { sql } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';
import { recordsetOf } from './recordset.ts';

/**
 * Counters folded in memory over a batch, then written with one upsert: rows with the same key add up before
 * they reach the database (a batch of 5,000 attempts on 40 steps writes 40 rows). The rows travel as JSON read
 * with the table's own types (`recordsetOf`), in one or a few parameters however many there are.
 */
export class CounterBatch<Key extends string, Amount extends string> {
  private readonly rows = new Map<string, Record<string, unknown>>();

  constructor(
    private readonly table: string,
    private readonly keyColumns: readonly Key[],
    private readonly amountColumns: readonly Amount[],
  ) {}

  /** Adds `amounts` to the row `key` names; `fixed` columns are written when the row is created and never change. */
  add(key: Record<Key, string | number>, amounts: Partial<Record<Amount, number>>, fixed?: Record<string, unknown>): void {
    const id = keyOf(key, this.keyColumns);
    let row = this.rows.get(id);
    if (!row) {
      row = { ...key, ...fixed };
      for (const column of this.amountColumns) row[column] = amounts[column] ?? 0;
      this.rows.set(id, row);
      return;
    }
    for (const column of this.amountColumns) (row[column] as number) += amounts[column] ?? 0;
  }

  get size(): number {
    return this.rows.size;
  }

  /** One statement: insert the new rows, add to the existing ones. */
  async write(db: UntypedDb): Promise<void> {
    if (this.rows.size === 0) return;
    const rows = [...this.rows.values()];
    this.rows.clear();
    const columns = Object.keys(rows[0]!);
    await db
      .insertInto(this.table)
      .columns(columns)
      .expression(await recordsetOf(db, this.table, columns, rows))
      .onConflict((oc) =>
        oc
          .columns([...this.keyColumns])
          .doUpdateSet(Object.fromEntries(this.amountColumns.map((column) => [column, sql`${sql.id(this.table, column)} + excluded.${sql.id(column)}`]))),
      )
      .execute();
  }
}

/** A map key for a row's key values (strings and numbers): joined with a separator no identifier holds. */
export function keyOf(row: object, columns: readonly string[]): string {
  const values = row as Record<string, unknown>;
  let key = String(values[columns[0]!]);
  for (let index = 1; index < columns.length; index++) key += `\u0000${String(values[columns[index]!])}`;
  return key;
}
