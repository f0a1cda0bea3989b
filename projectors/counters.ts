import { sql, type InsertQueryBuilder } from 'kysely';
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
    await (await this.upsert(db))?.execute();
  }

  /** The table this batch counts in. */
  get tableName(): string {
    return this.table;
  }

  /** The rows added, which leave the batch; null when none were. */
  private take(): Record<string, unknown>[] | null {
    if (this.rows.size === 0) return null;
    const rows = [...this.rows.values()];
    this.rows.clear();
    return rows;
  }

  /** A plain insert of the rows into `table` (a rebuild's staging, whose rows are added up at its end); null when none. */
  async insert(db: UntypedDb, table = this.table): Promise<InsertQueryBuilder<any, any, any> | null> {
    const rows = this.take();
    if (!rows) return null;
    const columns = Object.keys(rows[0]!);
    return db
      .insertInto(table)
      .columns(columns)
      .expression(await recordsetOf(db, table, columns, rows));
  }

  /** The upsert `write` runs (null when nothing was added); the batch is empty afterwards. */
  async upsert(db: UntypedDb): Promise<InsertQueryBuilder<any, any, any> | null> {
    const rows = this.take();
    if (!rows) return null;
    const columns = Object.keys(rows[0]!);
    return db
      .insertInto(this.table)
      .columns(columns)
      .expression(await recordsetOf(db, this.table, columns, rows))
      .onConflict((oc) =>
        oc
          .columns([...this.keyColumns])
          .doUpdateSet(Object.fromEntries(this.amountColumns.map((column) => [column, sql`${sql.id(this.table, column)} + excluded.${sql.id(column)}`]))),
      );
  }
}

/**
 * Counter batches of different tables written in one statement, each upsert a data-modifying CTE: one round
 * trip instead of one each, inside a batch's transaction where every round trip waits on a busy machine. The
 * upserts run together and none sees another's rows, which counters in tables of their own never need (two
 * batches of one table are refused: one statement may not change a row twice).
 */
export async function writeCounters(db: UntypedDb, batches: readonly CounterBatch<string, string>[]): Promise<void> {
  const tables = new Set(batches.map((batch) => batch.tableName));
  if (tables.size !== batches.length) throw new Error('writeCounters: one batch per table');
  const upserts: (InsertQueryBuilder<any, any, any> | null)[] = [];
  for (const batch of batches) upserts.push(await batch.upsert(db));
  await writeTogether(db, upserts);
}

/** Inserts (of tables of their own) in one statement, each a data-modifying CTE; the nulls are left out. */
export async function writeTogether(db: UntypedDb, inserts: readonly (InsertQueryBuilder<any, any, any> | null)[]): Promise<void> {
  const statements = inserts.filter((insert) => insert !== null);
  if (statements.length <= 1) {
    await statements[0]?.execute();
    return;
  }
  let statement = db.with('counted_0', () => statements[0]!);
  for (let index = 1; index < statements.length; index++) statement = statement.with(`counted_${index}`, () => statements[index]!);
  await statement.selectNoFrom(sql<number>`1`.as('written')).execute();
}

/** A map key for a row's key values (strings and numbers): joined with a separator no identifier holds. */
export function keyOf(row: object, columns: readonly string[]): string {
  const values = row as Record<string, unknown>;
  let key = String(values[columns[0]!]);
  for (let index = 1; index < columns.length; index++) key += `\u0000${String(values[columns[index]!])}`;
  return key;
}
