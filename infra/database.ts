import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect, type Dialect } from 'kysely';
import pg from 'pg';

/**
 * One handle on PostgreSQL for everything that is not the event store's own wire: read models, tenancy,
 * migrations. The same code runs on a `pg` pool (server mode) and on PGlite (embedded mode).
 */
export interface Database {
  readonly kind: 'postgres' | 'pglite';
  readonly db: Kysely<any>;
  /** Calls `onNotify` for every NOTIFY on `channel`; resolves to an unsubscribe function. */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  /**
   * A session of its own for a session-level advisory lock, or null where the database has a single
   * session (PGlite: one process owns it, so in-process coordination is enough).
   */
  openDedicatedSession(): Promise<DedicatedSession | null>;
  close(): Promise<void>;
}

export interface DedicatedSession {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}

// int8 and numeric come back as strings on both drivers, so code never sees a lossy number by accident.
const INT8 = 20;
const NUMERIC = 1700;

export async function openPostgres(connectionString: string, options: { max?: number } = {}): Promise<Database> {
  const pool = new pg.Pool({ connectionString, max: options.max ?? 10 });
  // A pool emits 'error' for an idle client whose server went away; without a listener Node would crash.
  pool.on('error', () => undefined);
  await pool.query('select 1');
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
  const listeners = new Set<pg.Client>();
  return {
    kind: 'postgres',
    db,
    async listen(channel, onNotify) {
      const client = new pg.Client({ connectionString });
      client.on('error', () => undefined);
      await client.connect();
      listeners.add(client);
      client.on('notification', (message) => {
        if (message.channel === channel) onNotify();
      });
      await client.query(`listen ${quoteIdentifier(channel)}`);
      return async () => {
        listeners.delete(client);
        await client.end().catch(() => undefined);
      };
    },
    async openDedicatedSession() {
      const client = new pg.Client({ connectionString });
      client.on('error', () => undefined);
      await client.connect();
      return {
        async query<R>(text: string, params: unknown[] = []) {
          return (await client.query(text, params)).rows as R[];
        },
        close: () => client.end().catch(() => undefined),
      };
    },
    async close() {
      await Promise.all([...listeners].map((client) => client.end().catch(() => undefined)));
      await db.destroy();
    },
  };
}

export async function openPglite(dataDir: string | undefined): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const pglite = await PGlite.create(dataDir, {
    parsers: { [INT8]: (value: string) => value, [NUMERIC]: (value: string) => value },
  });
  const db = new Kysely<any>({ dialect: pgliteDialect(pglite) });
  return {
    kind: 'pglite',
    db,
    async listen(channel, onNotify) {
      const unlisten = await pglite.listen(channel, () => onNotify());
      return async () => {
        if (!pglite.closed) await unlisten();
      };
    },
    async openDedicatedSession() {
      return null;
    },
    async close() {
      await db.destroy();
      if (!pglite.closed) await pglite.close();
    },
  };
}

/**
 * PGlite is one session. Kysely's pool interface is served by handing that session to one borrower at a
 * time, so a transaction (BEGIN ... COMMIT over several awaits) never interleaves with another caller.
 */
function pgliteDialect(pglite: PGlite): Dialect {
  let queue: Promise<void> = Promise.resolve();
  const pool = {
    async connect() {
      let release!: () => void;
      const turn = new Promise<void>((resolve) => (release = resolve));
      const previous = queue;
      queue = previous.then(() => turn);
      await previous;
      return {
        async query(text: string, params: unknown[] = []) {
          const result = await pglite.query(text, params as any[]);
          const rows = result.rows as Record<string, unknown>[];
          // Kysely reads affected-row counts only when the command says it wrote.
          const command = /^\s*(insert|update|delete|merge|with)\b/i.test(text) ? 'UPDATE' : 'SELECT';
          return { command, rowCount: result.affectedRows ?? rows.length, rows };
        },
        release() {
          release();
        },
      };
    },
    async end() {
      await queue;
    },
  };
  return new PostgresDialect({ pool: pool as any });
}

export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A connection whose table types are not known where it is handed over: the projector runtime drives read
 * models and process managers of many table sets, and each types its own with `withTableTypes`.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type UntypedDb = Kysely<any>;

/**
 * Kysely's table types exist at compile time only: one connection serves any set of tables (what Kysely's
 * `withTables` does, without its index-signature constraint, which interfaces do not meet).
 */
export function withTableTypes<Tables>(db: UntypedDb): Kysely<Tables> {
  return db;
}
