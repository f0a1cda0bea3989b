import { sql } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';

/**
 * Counters folded in memory over a batch, then written with one multi-row upsert: rows with the same key add
 * up before they reach the database (a batch of 5,000 attempts on 40 steps writes 40 rows).
 */
export class CounterBatch<Key extends string, Amount extends string> {
  private readonly rows = new Map<string, { key: Record<Key, unknown>; fixed: Record<string, unknown>; amounts: Record<Amount, number> }>();

  constructor(
    private readonly table: string,
    private readonly keyColumns: readonly Key[],
    private readonly amountColumns: readonly Amount[],
  ) {}

  /** Adds `amounts` to the row `key` names; `fixed` columns are written when the row is created and never change. */
  add(key: Record<Key, unknown>, amounts: Partial<Record<Amount, number>>, fixed: Record<string, unknown> = {}): void {
    const id = JSON.stringify(this.keyColumns.map((column) => key[column]));
    let row = this.rows.get(id);
    if (!row) {
      row = { key, fixed, amounts: Object.fromEntries(this.amountColumns.map((column) => [column, 0])) as Record<Amount, number> };
      this.rows.set(id, row);
    }
    for (const column of this.amountColumns) row.amounts[column] += amounts[column] ?? 0;
  }

  get size(): number {
    return this.rows.size;
  }

  /** One statement per 2,000 rows: insert the new rows, add to the existing ones. */
  async write(db: UntypedDb): Promise<void> {
    const rows = [...this.rows.values()].map((row) => ({ ...row.key, ...row.fixed, ...row.amounts }));
    this.rows.clear();
    for (let start = 0; start < rows.length; start += 2000) {
      await db
        .insertInto(this.table)
        .values(rows.slice(start, start + 2000))
        .onConflict((oc) =>
          oc
            .columns([...this.keyColumns])
            .doUpdateSet(Object.fromEntries(this.amountColumns.map((column) => [column, sql`${sql.id(this.table, column)} + excluded.${sql.id(column)}`]))),
        )
        .execute();
    }
  }
}
