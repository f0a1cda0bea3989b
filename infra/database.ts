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
  /** The process's control session (leases), or null where the database has a single session (PGlite). */
  control(): DedicatedSession | null;
  close(): Promise<void>;
}

export interface DedicatedSession {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}

// int8 and numeric come back as strings on both drivers, so code never sees a lossy number by accident.
const INT8 = 20;
const NUMERIC = 1700;

export interface PostgresOptions {
  /** Pool connections (DATABASE_POOL_SIZE). The process adds two of its own: LISTEN and the control session. */
  max?: number;
  /** Shown in pg_stat_activity, so an operator can count a process's connections. */
  applicationName?: string;
}

export async function openPostgres(connectionString: string, options: PostgresOptions = {}): Promise<Database> {
  const applicationName = options.applicationName ?? 'engage';
  const pool = new pg.Pool({ connectionString, max: options.max ?? 10, application_name: applicationName, connectionTimeoutMillis: 10_000 });
  // A pool emits 'error' for an idle client whose server went away; without a listener Node would crash.
  pool.on('error', () => undefined);
  await pool.query('select 1');
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
  const listeners = new Set<ResilientListener>();
  let control: ControlSession | null = null;
  return {
    kind: 'postgres',
    db,
    async listen(channel, onNotify) {
      const listener = new ResilientListener(connectionString, `${applicationName}:listen`, channel, onNotify);
      listeners.add(listener);
      listener.start();
      return async () => {
        listeners.delete(listener);
        await listener.stop();
      };
    },
    async openDedicatedSession() {
      const client = new pg.Client({ connectionString, application_name: `${applicationName}:session`, connectionTimeoutMillis: 10_000 });
      client.on('error', () => undefined);
      await client.connect();
      return {
        async query<R>(text: string, params: unknown[] = []) {
          return (await client.query(text, params)).rows as R[];
        },
        close: () => client.end().catch(() => undefined),
      };
    },
    control() {
      control ??= new ControlSession(connectionString, `${applicationName}:control`);
      return control;
    },
    async close() {
      await Promise.all([...listeners].map((listener) => listener.stop()));
      await control?.close();
      await db.destroy();
    },
  };
}

/**
 * LISTEN on a connection of its own that comes back by itself: a refused connection, "too many clients" or a
 * terminated backend makes it retry with backoff, never fail the process. Each (re)connection calls
 * `onNotify` once, since a notification may have been missed meanwhile (a wake-up is only a hint).
 */
class ResilientListener {
  private client: pg.Client | null = null;
  private stopped = false;
  private retry: NodeJS.Timeout | null = null;
  private failures = 0;

  constructor(
    private readonly connectionString: string,
    private readonly applicationName: string,
    private readonly channel: string,
    private readonly onNotify: () => void,
  ) {}

  start(): void {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.connectionString, application_name: this.applicationName, connectionTimeoutMillis: 10_000 });
    client.on('error', () => undefined);
    client.on('end', () => {
      if (this.client === client) this.client = null;
      this.schedule();
    });
    client.on('notification', (message) => {
      if (message.channel === this.channel) this.onNotify();
    });
    try {
      await client.connect();
      await client.query(`listen ${quoteIdentifier(this.channel)}`);
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
      this.failures = 0;
      this.onNotify();
    } catch {
      await client.end().catch(() => undefined);
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.stopped || this.retry) return;
    this.failures++;
    const delay = Math.min(5000, 100 * 2 ** Math.min(this.failures, 6)) * (0.5 + Math.random());
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.connect();
    }, delay);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}

/**
 * The process's one connection for its own bookkeeping (projection leases): never queued behind the pool,
 * so a renewal cannot wait on the batches it protects. Connects on first use and again after any failure;
 * each statement has a timeout.
 */
export class ControlSession {
  private client: Promise<pg.Client> | null = null;
  private closed = false;

  constructor(
    private readonly connectionString: string,
    private readonly applicationName: string,
  ) {}

  async query<R>(text: string, params: unknown[] = []): Promise<R[]> {
    if (this.closed) throw new Error('the control session is closed');
    this.client ??= this.connect();
    const pending = this.client;
    try {
      const client = await pending;
      return (await client.query(text, params)).rows as R[];
    } catch (error) {
      // Whatever went wrong, the next statement starts from a fresh connection.
      if (this.client === pending) this.client = null;
      void pending.then((client) => client.end()).catch(() => undefined);
      throw error;
    }
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: this.applicationName,
      connectionTimeoutMillis: 5000,
      statement_timeout: 5000,
      query_timeout: 6000,
    });
    client.on('error', () => undefined);
    await client.connect();
    return client;
  }

  async close(): Promise<void> {
    this.closed = true;
    const pending = this.client;
    this.client = null;
    await pending?.then((client) => client.end()).catch(() => undefined);
  }
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
    control() {
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
export type UntypedDb = Kysely<any>;

/**
 * Kysely's table types exist at compile time only: one connection serves any set of tables (what Kysely's
 * `withTables` does, without its index-signature constraint, which interfaces do not meet).
 */
export function withTableTypes<Tables>(db: UntypedDb): Kysely<Tables> {
  return db;
}
