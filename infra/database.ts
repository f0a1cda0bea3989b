import { AsyncLocalStorage } from 'node:async_hooks';
import { Kysely, PostgresDialect, sql, type PostgresCursor, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from 'kysely';
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from './logging.ts';

/**
 * One handle on PostgreSQL for everything that is not the event store's own wire: read models, tenancy,
 * migrations. A `pg` pool, whether the server is the deployment's (DATABASE_URL) or the embedded one
 * (infra/embedded-postgres.ts).
 */
export interface Database {
  readonly db: Kysely<any>;
  /**
   * Calls `onNotify` for every NOTIFY on `channel` (and once per (re)connection, since one may have been missed
   * meanwhile); `onState` says when the LISTEN is in place (true) and when it is lost (false). Every channel
   * of the process shares one connection. Resolves to an unsubscribe function.
   */
  listen(channel: string, onNotify: (payload?: string) => void, onState?: (listening: boolean) => void): Promise<() => Promise<void>>;
  /**
   * A statement on the listening connection itself (no pool connection): what it reads is at least as new as
   * the notifications delivered before it, so a reader can tell whether it has missed one. Refused while the
   * connection is not listening.
   */
  queryOnListener<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** A session of its own, for a session-level advisory lock. */
  openDedicatedSession(): Promise<DedicatedSession>;
  /** The process's control session (projection leases). */
  control(): DedicatedSession;
  /**
   * Calls `observer` with each statement's purpose as it is sent (pool, LISTEN connection, control session):
   * the tag of a leading `/* engage:<purpose> *\/` comment, `transaction` for BEGIN/COMMIT/ROLLBACK/SAVEPOINT,
   * else `other`.
   */
  observeStatements(observer: (purpose: string) => void): void;
  close(): Promise<void>;
}

export interface DedicatedSession {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}

/**
 * How long the process waits on PostgreSQL. A statement's limit is enforced twice: by the server
 * (`statement_timeout`, which cancels the statement and keeps the session) and by the process itself
 * `ANSWER_MARGIN_MS` later, for a server that does not answer at all (frozen, or cut off by the network):
 * that session is then closed, never handed out again.
 *
 * Two kinds of work share the pool. Requests (the API, health checks) get short limits, so a hung
 * database turns into a 503 within seconds. Background work (projection batches and rebuilds, migrations,
 * jobs, the CLI's commands: see `inBackground`) may fold thousands of events in one transaction or read
 * the whole log, and must not be cut by those limits, so its sessions get the long ones; each checkout
 * sets the session to its kind's limits.
 */
export interface DatabaseTimeouts {
  /** Opening a connection, or waiting for a free one in the pool (DATABASE_CONNECT_TIMEOUT_MS). */
  connectMs: number;
  /** A request's statement (DATABASE_STATEMENT_TIMEOUT_MS). */
  statementMs: number;
  /** A request's transaction left idle between statements (DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS). */
  idleInTransactionMs: number;
  /** A background statement (DATABASE_BACKGROUND_STATEMENT_TIMEOUT_MS). */
  backgroundStatementMs: number;
  /** A background transaction left idle between statements (DATABASE_BACKGROUND_IDLE_IN_TRANSACTION_TIMEOUT_MS). */
  backgroundIdleInTransactionMs: number;
}

export const DEFAULT_DATABASE_TIMEOUTS: DatabaseTimeouts = {
  connectMs: 1000,
  statementMs: 2000,
  idleInTransactionMs: 1000,
  backgroundStatementMs: 600_000,
  backgroundIdleInTransactionMs: 60_000,
};

/** How much longer than the server's own statement timeout the process waits for an answer. */
export const ANSWER_MARGIN_MS = 1000;

/** PostgreSQL did not answer in time (the process gave up; the server may be frozen or unreachable). */
export class DatabaseTimeoutError extends Error {
  // A network time-out: the projector runtime backs off and resumes on it (projectors/runtime/transient.ts).
  readonly code = 'ETIMEDOUT';
  constructor(waitedMs: number) {
    super(`PostgreSQL did not answer within ${waitedMs} ms`);
    this.name = 'DatabaseTimeoutError';
  }
}

type WorkKind = 'request' | 'background';
const workKind = new AsyncLocalStorage<WorkKind>();

/**
 * Runs `work`, and everything it starts (its loops, timers and callbacks), with the background limits
 * (`DatabaseTimeouts`): for work nobody waits on, whose statements and transactions may rightly be long.
 */
export function inBackground<T>(work: () => T): T {
  return workKind.run('background', work);
}

/** Services of this process that run background work (projections, jobs): see `startedWithoutBackgroundWork`. */
let backgroundServices = 0;

/** A service that runs background work says so until it closes (the function returned). */
export function holdBackgroundWork(): () => void {
  backgroundServices++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    backgroundServices--;
  };
}

/**
 * Called once a service has started: when no service of the process runs background work (the API roles)
 * and the start itself is not background work's (a command's own service), the work kind is no longer
 * followed (`inBackground` follows it again if asked). Once used, an AsyncLocalStorage keeps Node's promise
 * hooks on for every promise of the process, and the start's migrations were its only use there: with them
 * on (and the append guard in a store of its own), the command API spent 8-20% more CPU a request
 * (bench/HISTORY.md, 2026-12-06 from 20:53).
 */
export function startedWithoutBackgroundWork(): void {
  if (backgroundServices === 0 && workKind.getStore() === undefined) workKind.disable();
}

interface SessionLimits {
  statementMs: number;
  idleInTransactionMs: number;
}

function limitsOf(timeouts: DatabaseTimeouts, kind: WorkKind): SessionLimits {
  return kind === 'background'
    ? { statementMs: timeouts.backgroundStatementMs, idleInTransactionMs: timeouts.backgroundIdleInTransactionMs }
    : { statementMs: timeouts.statementMs, idleInTransactionMs: timeouts.idleInTransactionMs };
}

export interface PostgresOptions {
  /** Pool connections (DATABASE_POOL_SIZE). The process adds two of its own: LISTEN and the control session. */
  max?: number;
  /** Shown in pg_stat_activity, so an operator can count a process's connections. */
  applicationName?: string;
  timeouts?: Partial<DatabaseTimeouts>;
  /**
   * At most so many named (prepared) statements per pool session (DATABASE_PREPARED_STATEMENTS, default 256;
   * 0: none, every statement parsed and planned each time, as a pooler in transaction mode needs). See
   * `StatementNames`.
   */
  preparedStatements?: number;
}

export async function openPostgres(connectionString: string, options: PostgresOptions = {}): Promise<Database> {
  const applicationName = options.applicationName ?? 'engage';
  const timeouts = { ...DEFAULT_DATABASE_TIMEOUTS, ...options.timeouts };
  const requests = limitsOf(timeouts, 'request');
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    application_name: applicationName,
    connectionTimeoutMillis: timeouts.connectMs,
    // New sessions start with the requests' limits; a background checkout raises them (GuardedPool).
    statement_timeout: requests.statementMs,
    idle_in_transaction_session_timeout: requests.idleInTransactionMs,
    keepAlive: true,
  });
  // A pool emits 'error' for an idle client whose server went away; without a listener Node would crash.
  pool.on('error', () => undefined);
  const observers: ((purpose: string) => void)[] = [];
  const count = (text: string) => {
    if (observers.length === 0) return;
    const purpose = statementPurpose(text);
    for (const observer of observers) observer(purpose);
  };
  const names = new StatementNames(options.preparedStatements ?? DEFAULT_PREPARED_STATEMENTS);
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new GuardedPool(pool, timeouts, count, names) }) });
  await sql`select 1`.execute(db).catch(async (error: unknown) => {
    await db.destroy();
    throw error;
  });
  const listener = new SharedListener(connectionString, `${applicationName}:listen`, timeouts, count);
  let control: ControlSession | null = null;
  return {
    db,
    async listen(channel, onNotify, onState) {
      return listener.add(channel, { onNotify, onState: onState ?? (() => undefined) });
    },
    queryOnListener: (text, params) => listener.query(text, params),
    observeStatements(observer) {
      observers.push(observer);
    },
    async openDedicatedSession() {
      // Waits for other processes' start-up work (an advisory lock held through their migrations): background limits.
      const limits = limitsOf(timeouts, 'background');
      const client = new pg.Client({
        connectionString,
        application_name: `${applicationName}:session`,
        connectionTimeoutMillis: timeouts.connectMs,
        statement_timeout: limits.statementMs,
        query_timeout: limits.statementMs + ANSWER_MARGIN_MS,
        keepAlive: true,
      });
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
      control ??= new ControlSession(connectionString, `${applicationName}:control`, timeouts.connectMs, count);
      return control;
    },
    async close() {
      await listener.stop();
      await control?.close();
      await db.destroy();
    },
  };
}

/**
 * The pool as Kysely sees it: each checkout sets the session to the limits of the work that takes it
 * (`inBackground` or not), and every statement gets an answer or a `DatabaseTimeoutError` within its
 * limit plus `ANSWER_MARGIN_MS`. A session that timed out is closed instead of going back to the pool: it
 * may still be inside a statement or a transaction.
 */
class GuardedPool implements PostgresPool {
  private readonly sessionKinds = new WeakMap<pg.PoolClient, WorkKind>();
  private readonly watched = new WeakSet<pg.PoolClient>();
  private readonly failed = new WeakMap<pg.PoolClient, Error>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly timeouts: DatabaseTimeouts,
    private readonly count: (text: string) => void,
    private readonly names: StatementNames,
  ) {
    // Watched from its creation: pg-pool hands a new session out in the socket callback that read its
    // ReadyForQuery, and a FATAL read in the same chunk (the server terminating it right away) was emitted
    // before `connect` below could listen (an unhandled error in projector-isolation's terminated backends).
    pool.on('connect', (client) => this.watch(client));
  }

  /**
   * The pool listens for errors of idle sessions only. One the server ends while it is checked out and between
   * statements (idle in transaction past its limit, terminated) emits 'error' with nobody to hear it, which
   * would end the process: the session is marked, and its work fails on its next statement.
   */
  private watch(client: pg.PoolClient): void {
    if (this.watched.has(client)) return;
    this.watched.add(client);
    client.on('error', (error) => this.failed.set(client, error));
  }

  async connect(): Promise<GuardedSession> {
    const kind = workKind.getStore() ?? 'request';
    const limits = limitsOf(this.timeouts, kind);
    const client = await this.pool.connect();
    this.watch(client);
    // A session of the other kind gets this kind's limits with its first statement (`GuardedSession.query`).
    const switchTo = (this.sessionKinds.get(client) ?? 'request') !== kind ? { kind, limits, switched: this.sessionKinds } : null;
    return new GuardedSession(client, limits.statementMs + ANSWER_MARGIN_MS, this.failed, this.count, switchTo, this.names);
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}

/** What a checkout of the other kind of work than its session's last one still has to do: set the session to its limits. */
interface LimitsSwitch {
  kind: WorkKind;
  limits: SessionLimits;
  /** Where the pool keeps each session's kind, once it is set. */
  switched: WeakMap<pg.PoolClient, WorkKind>;
}

/**
 * A transaction begun by the first statement of a checkout, alone (Kysely's `begin`) or first in a message
 * of several statements without parameters (the projector runtime's `begin; update ...`): `begin`, then the
 * rest of the message.
 */
const OPENING_BEGIN = /^(\s*(?:\/\*[^*]*\*\/\s*)?(?:begin|start transaction)\b[^;']*)(;.*)?$/is;

/**
 * A message of reads: it starts with SELECT and controls no transaction, so it runs as one implicit transaction
 * (a single statement, or several in one simple-protocol message) whatever comes before it in the same message.
 */
const READS = /^\s*(?:\/\*[^*]*\*\/\s*)?select\b/i;

/**
 * Marks a statement that is short by construction (a one-row upsert, a read of a few rows by key, a
 * notification) and controls no transaction: it runs under whichever limits its session has, so a checkout of
 * the other kind of work sends it as it is instead of first switching the session (a round trip), and the
 * session keeps its kind for the next checkout. The limits it may run under are either kind's, and its
 * checkout's own time-out for an answer holds whatever the session's. The projector runtime's announcements
 * and checkpoint moves (background work) each switched a session the API's requests then switched back: 0.55
 * of the live-lag bench's 13.8 statements a write were those switches.
 */
export const SHORT_STATEMENT = '/* short */';
const TRANSACTION_CONTROL = /\b(?:begin|commit|rollback|abort|savepoint|release|prepare|start\s+transaction)\b|;\s*end\b/i;

/**
 * The statement setting `limits` for the rest of the transaction it runs in (`local`), or for the session
 * (integers: no quoting needed).
 */
function limitsStatement(limits: SessionLimits, local: boolean): string {
  return `select set_config('statement_timeout', '${limits.statementMs}', ${local}), set_config('idle_in_transaction_session_timeout', '${limits.idleInTransactionMs}', ${local})`;
}

class GuardedSession implements PostgresPoolClient {
  private failure: DatabaseTimeoutError | null = null;

  constructor(
    readonly client: pg.PoolClient,
    private readonly answerMs: number,
    private readonly failed: WeakMap<pg.PoolClient, Error>,
    private readonly count: (text: string) => void,
    private switchTo: LimitsSwitch | null,
    private readonly names: StatementNames,
  ) {}

  query<R>(text: string, params: readonly unknown[]): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(text: string | PostgresCursor<R>, params: readonly unknown[] = []): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // A cursor (Kysely's streaming, unused here) reads at its own pace: passed through.
    if (typeof text !== 'string') return this.client.query(text as never);
    if (this.failure) return Promise.reject(this.failure);
    const broken = this.failed.get(this.client);
    if (broken) return Promise.reject(broken);
    const switchTo = this.switchTo;
    // Inside a transaction this checkout opened with its limits (below): they hold until it ends.
    if (!switchTo || this.inTransaction() || text.startsWith(SHORT_STATEMENT)) return this.send(text, params);
    const opening = params.length === 0 ? OPENING_BEGIN.exec(text) : null;
    // Not a message that goes on past the transaction's end (a later statement would run under the session's limits).
    if (opening && !TRANSACTION_CONTROL.test(opening[2] ?? '')) {
      // A checkout that opens a transaction first thing: its limits go into that transaction (`set_config(...,
      // true)`, in the same message: no round trip of their own) and the session keeps its kind. The projector
      // runtime's batches and the API's requests share the pool, and each hand-over cost a round trip (the
      // live-lag bench: 1.1 statements a write, of 16). After that transaction the checkout is where it began.
      return this.send(`${opening[1]}; ${limitsStatement(switchTo.limits, true)}${opening[2] ?? ''}`, params, text);
    }
    if (params.length === 0 && READS.test(text) && !TRANSACTION_CONTROL.test(text)) {
      // A message of reads (the shared log's page: the horizon and the read, in literals) takes the limits
      // local to its own implicit transaction, in the same message, and the session keeps its kind.
      return this.send(`${limitsStatement(switchTo.limits, true)}; ${text}`, params, text);
    }
    return this.switchSession(switchTo).then(() => this.send<R>(text, params));
  }

  /** Whether the session is inside a transaction, as the server said when it last was ready (pg's ReadyForQuery). */
  private inTransaction(): boolean {
    const status = this.client.getTransactionStatus();
    return status === 'T' || status === 'E';
  }

  /**
   * Sets the session to the checkout's limits for good (one round trip, outside any transaction: a rollback
   * would undo it), and records its kind.
   */
  private async switchSession(switchTo: LimitsSwitch): Promise<void> {
    await this.send(`/* engage:session-limits */ ${limitsStatement(switchTo.limits, false)}`, []);
    switchTo.switched.set(this.client, switchTo.kind);
    this.switchTo = null;
  }

  /** One round trip: `text` as sent, counted as `counted` (what the caller sent). */
  private send<R>(text: string, params: readonly unknown[], counted = text): Promise<PostgresQueryResult<R>> {
    this.count(counted);
    // A statement with parameters goes as a named one once it is frequent (`StatementNames`): parsed and
    // planned once per session, then only bound and executed.
    const name = params.length > 0 ? this.names.nameFor(this.client, text) : undefined;
    const answer = this.run<R>(text, params, name).catch((error: unknown) => {
      if (name === undefined || !isStalePreparedStatement(error)) throw error;
      // Its plan no longer fits (DDL changed what it returns) or the session lost it: the next use prepares it
      // afresh under another name; outside a transaction this one goes again, unnamed, at once.
      this.names.retire(this.client, text);
      if (this.inTransaction()) throw error;
      this.count(counted);
      return this.run<R>(text, params, undefined);
    });
    return settleWithin(answer, this.answerMs, () => (this.failure = new DatabaseTimeoutError(this.answerMs)));
  }

  private run<R>(text: string, params: readonly unknown[], name: string | undefined): Promise<PostgresQueryResult<R>> {
    // pg's result is what Kysely reads (its `command` typed as a plain string there). A query of several
    // statements (no parameters: one simple-protocol message, one round trip) answers as its last one.
    return this.client
      .query<R & pg.QueryResultRow>(name === undefined ? { text, values: [...params] } : { name, text, values: [...params] })
      .then((result: unknown) => (Array.isArray(result) ? (result.at(-1) as unknown) : result)) as Promise<PostgresQueryResult<R>>;
  }

  release(): void {
    // With an error the pool closes the session (and its socket) instead of keeping it.
    this.client.release(this.failure ?? this.failed.get(this.client) ?? undefined);
  }
}

const DEFAULT_PREPARED_STATEMENTS = 256;

/** How often a text must have been sent by this process before it gets a name. */
const NAMED_AFTER_USES = 3;

/** Texts counted (and named) at most; past it the counts start again, the names stay what they were (a hash). */
const COUNTED_TEXTS = 5000;

/**
 * Names for the pool's frequent statements, so that each session parses and plans one once and then only binds
 * and executes it (a prepared statement of the protocol; PostgreSQL keeps a generic plan after five runs
 * when it costs no more than the custom ones). Unnamed, every batch of every read model was parsed and
 * planned again: in the live-lag bench planning alone was a quarter of the server's execution time (3.3 s
 * against 9.0), the analytics' set-based queries most of all. Four interleaved pairs of that bench,
 * 2026-12-02: PostgreSQL 5.2-5.3 ms of CPU a write against 5.7-5.9, lag p50 27-34 ms against 33-39; role
 * `all` at 16 connections moved within the machine's noise (896-1,263 custom events/s against 801-1,199).
 *
 * A text is named once this process has sent it `NAMED_AFTER_USES` times (statements of start-up and
 * maintenance stay unnamed), with a hash of itself, so a name always means one text. A session keeps at
 * most `perSession` of them (PostgreSQL holds each one's plan in the backend's memory); past that, new texts
 * go unnamed. A statement whose plan no longer fits (`0A000`: DDL changed what it returns, as a migration of
 * a newer version may) or that its session lost (`26000`) is retired on that session and prepared again
 * under a new name at its next use.
 */
export class StatementNames {
  private readonly uses = new Map<string, number>();
  private readonly names = new Map<string, string>();
  /** Per session: the names it was sent (pg parses each once there), and the texts retired on it (with how many times). */
  private readonly sessions = new WeakMap<pg.PoolClient, { names: Set<string>; retired: Map<string, number> | null }>();

  constructor(private readonly perSession: number) {}

  /** The name to send `text` under on `client`, or undefined to send it unnamed. */
  nameFor(client: pg.PoolClient, text: string): string | undefined {
    if (this.perSession <= 0) return undefined;
    let name = this.names.get(text);
    if (name === undefined) {
      const uses = (this.uses.get(text) ?? 0) + 1;
      if (uses < NAMED_AFTER_USES) {
        if (this.uses.size >= COUNTED_TEXTS) this.uses.clear();
        this.uses.set(text, uses);
        return undefined;
      }
      this.uses.delete(text);
      if (this.names.size >= COUNTED_TEXTS) this.names.clear();
      name = `engage_${createHash('sha1').update(text).digest('base64url')}`;
      this.names.set(text, name);
    }
    let session = this.sessions.get(client);
    if (!session) this.sessions.set(client, (session = { names: new Set(), retired: null }));
    const retired = session.retired?.get(text);
    if (retired !== undefined) name = `${name}_${retired}`;
    if (!session.names.has(name)) {
      if (session.names.size >= this.perSession) return undefined;
      session.names.add(name);
    }
    return name;
  }

  /** `text`'s statement on `client` is no longer usable: its next use there prepares it under a new name. */
  retire(client: pg.PoolClient, text: string): void {
    const session = this.sessions.get(client);
    if (!session) return;
    session.retired ??= new Map();
    session.retired.set(text, (session.retired.get(text) ?? 0) + 1);
  }
}

/** A named statement that must be prepared again: its cached plan's result type changed, or it is gone. */
export function isStalePreparedStatement(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '26000' || (code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type'));
}

/** `work`'s outcome, or `late()` as a failure once `ms` have passed (`work` goes on, unobserved). */
export function settleWithin<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Resolves once PostgreSQL at `connectionString` answers: a process started before its database waits for
 * it (see `waitUntilReachable`). A wrong password or a database that does not exist is not waited out.
 */
export function waitForPostgres(connectionString: string, logger: Logger, connectMs = DEFAULT_DATABASE_TIMEOUTS.connectMs): Promise<void> {
  return waitUntilReachable('PostgreSQL', redactedUrl(connectionString), logger, async () => {
    const client = new pg.Client({ connectionString, connectionTimeoutMillis: connectMs, query_timeout: connectMs });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('select 1');
    } finally {
      await client.end().catch(() => undefined);
    }
  });
}

/**
 * Calls `attempt` until it succeeds, with backoff (250 ms doubling up to 5 s, with jitter so processes
 * started together do not knock in step) and a log line per failed attempt, as long as it fails because
 * the dependency cannot be reached yet (refused, reset, timed out, a name not resolvable yet, starting up,
 * full). Any other failure throws at once.
 */
export async function waitUntilReachable(name: string, where: string, logger: Logger, attempt: () => Promise<void>): Promise<void> {
  for (let failures = 0; ; failures++) {
    try {
      await attempt();
      if (failures > 0) logger.info({ attempts: failures + 1, at: where }, `${name} answers`);
      return;
    } catch (error) {
      if (!isUnreachable(error)) throw error;
      const retryInMs = Math.round(Math.min(5000, 250 * 2 ** Math.min(failures, 5)) * (0.75 + Math.random() / 2));
      logger.warn({ attempt: failures + 1, retryInMs, at: where, reason: reasonOf(error) }, `waiting for ${name}`);
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  '57P03',
  '53300',
]);

export function isUnreachable(error: unknown): boolean {
  const candidate = error as { code?: unknown; message?: unknown; errors?: unknown[] } | null;
  if (!candidate || typeof candidate !== 'object') return false;
  if (typeof candidate.code === 'string' && UNREACHABLE_CODES.has(candidate.code)) return true;
  if (typeof candidate.message === 'string' && /timeout|timed out|terminated|ended unexpectedly|connection is closed/i.test(candidate.message)) return true;
  return Array.isArray(candidate.errors) && candidate.errors.some(isUnreachable);
}

/** A failure in one line: its message, or its code, or its parts' (a refused `localhost` fails on each address). */
function reasonOf(error: unknown): string {
  const candidate = error as { code?: unknown; message?: unknown; errors?: unknown[] } | null;
  if (typeof candidate?.message === 'string' && candidate.message) return candidate.message;
  if (Array.isArray(candidate?.errors) && candidate.errors.length > 0) return candidate.errors.map(reasonOf).join('; ');
  return String(candidate?.code ?? error);
}

/** The URL without its password, for logs. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

interface ChannelHandler {
  onNotify(payload?: string): void;
  onState(listening: boolean): void;
}

/**
 * The process's one LISTEN connection, shared by every channel (the event store's wake-ups, the token cache's
 * invalidations), so a process stays within its pool plus two connections. It comes back by itself: a
 * refused connection, "too many clients" or a terminated backend makes it retry with backoff, never fail the
 * process. Each (re)connection calls every `onNotify` once, since a notification may have been missed
 * meanwhile, and `onState(true)`; a loss calls `onState(false)` at once. It connects with the first channel
 * and closes with the last.
 */
class SharedListener {
  private readonly channels = new Map<string, Set<ChannelHandler>>();
  private client: pg.Client | null = null;
  private connecting = false;
  private retry: NodeJS.Timeout | null = null;
  private failures = 0;
  private stopped = false;

  constructor(
    private readonly connectionString: string,
    private readonly applicationName: string,
    private readonly timeouts: DatabaseTimeouts,
    private readonly count: (text: string) => void,
  ) {}

  async add(channel: string, handler: ChannelHandler): Promise<() => Promise<void>> {
    let handlers = this.channels.get(channel);
    const fresh = !handlers;
    if (!handlers) this.channels.set(channel, (handlers = new Set()));
    handlers.add(handler);
    const client = this.client;
    if (client) {
      // Already listening on other channels: this one joins the same connection.
      if (fresh) {
        await client.query(`listen ${quoteIdentifier(channel)}`).catch(() => {
          // The connection is going: its 'end' reconnects and listens to every channel then.
          void client.end().catch(() => undefined);
        });
      }
      if (this.client === client) {
        handler.onNotify();
        handler.onState(true);
      }
    } else {
      this.ensureConnecting();
    }
    return async () => {
      handlers.delete(handler);
      if (handlers.size > 0) return;
      this.channels.delete(channel);
      if (this.channels.size === 0) await this.disconnect();
      else await this.client?.query(`unlisten ${quoteIdentifier(channel)}`).catch(() => undefined);
    };
  }

  async query<R>(text: string, params: unknown[] = []): Promise<R[]> {
    const client = this.client;
    if (!client) throw new Error('not listening');
    this.count(text);
    return (await client.query(text, params)).rows as R[];
  }

  private ensureConnecting(): void {
    if (this.stopped || this.client || this.connecting || this.retry || this.channels.size === 0) return;
    void this.connect();
  }

  private async connect(): Promise<void> {
    this.connecting = true;
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: this.applicationName,
      connectionTimeoutMillis: this.timeouts.connectMs,
      query_timeout: this.timeouts.statementMs + ANSWER_MARGIN_MS,
      keepAlive: true,
    });
    client.on('error', () => undefined);
    client.on('end', () => {
      if (this.client !== client) return;
      this.client = null;
      this.broadcast((handler) => handler.onState(false));
      this.schedule();
    });
    client.on('notification', (message) => {
      for (const handler of this.channels.get(message.channel) ?? []) handler.onNotify(message.payload);
    });
    try {
      await client.connect();
      const channels = [...this.channels.keys()];
      if (channels.length > 0) await client.query(channels.map((channel) => `listen ${quoteIdentifier(channel)}`).join('; '));
      this.connecting = false;
      if (this.stopped || this.channels.size === 0) {
        await client.end().catch(() => undefined);
        return;
      }
      // A channel added while this connected is listened to now.
      const added = [...this.channels.keys()].filter((channel) => !channels.includes(channel));
      if (added.length > 0) await client.query(added.map((channel) => `listen ${quoteIdentifier(channel)}`).join('; '));
      this.client = client;
      this.failures = 0;
      this.broadcast((handler) => {
        handler.onNotify();
        handler.onState(true);
      });
    } catch {
      this.connecting = false;
      await client.end().catch(() => undefined);
      this.schedule();
    }
  }

  private broadcast(call: (handler: ChannelHandler) => void): void {
    for (const handlers of [...this.channels.values()]) for (const handler of [...handlers]) call(handler);
  }

  private schedule(): void {
    if (this.stopped || this.retry || this.channels.size === 0) return;
    this.failures++;
    const delay = Math.min(5000, 100 * 2 ** Math.min(this.failures, 6)) * (0.5 + Math.random());
    this.retry = setTimeout(() => {
      this.retry = null;
      this.ensureConnecting();
    }, delay);
  }

  private async disconnect(): Promise<void> {
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.disconnect();
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
    private readonly connectMs: number,
    private readonly count: (text: string) => void = () => undefined,
  ) {}

  async query<R>(text: string, params: unknown[] = []): Promise<R[]> {
    if (this.closed) throw new Error('the control session is closed');
    this.count(text);
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
      connectionTimeoutMillis: this.connectMs,
      statement_timeout: 5000,
      query_timeout: 5000 + ANSWER_MARGIN_MS,
      keepAlive: true,
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

/** A statement's purpose for `observeStatements`: its `/* engage:<purpose> *\/` tag, if any. */
export function statementPurpose(text: string): string {
  const tagged = /\/\* engage:([a-z-]+) \*\//.exec(text.slice(0, 120));
  if (tagged) return tagged[1]!;
  return /^\s*(begin|commit|rollback|savepoint|release|start transaction)\b/i.test(text) ? 'transaction' : 'other';
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
  return db as Kysely<Tables>;
}
