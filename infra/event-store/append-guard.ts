import { sql, type Migration, type RawBuilder } from 'kysely';

/**
 * A condition the PostgreSQL store checks inside an append's own statement: the append commits only if it
 * holds in that statement's snapshot, else nothing is written and the caller gets `AppendGuardError`. What
 * it is for: a request whose API token came from the cache without the counter read that proves the cache
 * still exact (infra/auth.ts) lets its first append prove it instead, in the same round trip, and atomically
 * with the write.
 *
 * A request's appends are given its guard (`AppendOptions.guard`) until one of them, or a check, proved it.
 * Appends that cannot carry it (a store that is not PostgreSQL, an append in a transaction of the caller's
 * own) `check()` it first instead.
 */
export interface AppendGuard {
  /** Two guards with the same key test the same condition: a batch of appends checks it once. */
  readonly key: string;
  /** The condition, as SQL; evaluated in the append's statement. */
  readonly condition: RawBuilder<boolean>;
  /** True once an append carrying it committed, or `check()` passed: appends carry it no more. */
  readonly held: boolean;
  /** An append carrying it committed: it held in that statement's snapshot. */
  committed(): void;
  /** Proves the condition without an append (a round trip of its own); throws what the caller must answer. */
  check(): Promise<void>;
}

/** The guard an append must carry: the one it was given, until one of the request's appends or a check proved it. */
export function pendingAppendGuard(guard: AppendGuard | undefined): AppendGuard | undefined {
  return guard && !guard.held ? guard : undefined;
}

/** The append was not written: its guard did not hold in the append's snapshot. */
export class AppendGuardError extends Error {
  constructor(readonly key: string) {
    super(`the append's guard (${key}) no longer holds`);
    this.name = 'AppendGuardError';
  }
}

/** The SQLSTATE `es_guard` raises. */
export const APPEND_GUARD_FAILED = 'ESG01';

/**
 * `es_guard(ok, key)`: true, or an error with APPEND_GUARD_FAILED that rolls the statement back. An append
 * statement filters its answer rows with it, so the condition is read after the append ran, in the same
 * snapshot as every other uncorrelated subquery of the statement.
 */
export const APPEND_GUARD_MIGRATION: Migration = {
  async up(db) {
    await sql`
      create or replace function es_guard(p_ok boolean, p_key text) returns boolean language plpgsql volatile as $fn$
      begin
        if p_ok is not true then
          raise exception 'append guard % does not hold', p_key using errcode = '${sql.raw(APPEND_GUARD_FAILED)}';
        end if;
        return true;
      end $fn$`.execute(db);
  },
};

/** The guards of a batch of appends, each once: `es_guard(<all of them>)`, or null when there is none. */
export function guardFilter(guards: readonly (AppendGuard | undefined)[]): RawBuilder<boolean> | null {
  const distinct = new Map<string, AppendGuard>();
  for (const guard of guards) if (guard) distinct.set(guard.key, guard);
  if (distinct.size === 0) return null;
  const all = [...distinct.values()];
  return sql<boolean>`es_guard(${sql.join(
    all.map((guard) => sql`(${guard.condition})`),
    sql` and `,
  )}, ${all.map((guard) => guard.key).join(', ')})`;
}

export function isAppendGuardFailure(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === APPEND_GUARD_FAILED;
}
