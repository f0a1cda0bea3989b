import { sql, type Kysely, type Migration, type RawBuilder } from 'kysely';
import { SHORT_STATEMENT, type Database } from '../database.ts';
import { newEventId } from '../ids.ts';
import { AppendSignal, pollingSubscription } from './polling-subscription.ts';
import { APPEND_GUARD_MIGRATION, AppendGuardError, isAppendGuardFailure, pendingAppendGuard } from './append-guard.ts';
import { APPEND_BY_INDEX_MIGRATION, APPEND_FUNCTION_MIGRATION, GroupCommit, NEW_STREAMS_MIGRATION, appendUnits } from './postgres-append.ts';
import { WakeUps } from './wake-ups.ts';
import {
  WrongExpectedRevisionError,
  formatPosition,
  parsePosition,
  type AppendOptions,
  type AppendResult,
  type EventMetadata,
  type EventFilter,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadAllPage,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
  type SubscribeOptions,
  type Subscription,
} from './port.ts';

const APPENDED_CHANNEL = 'es_appended';

/**
 * Appenders announce themselves: every transaction that appends takes this shared advisory lock (held to its
 * end) before its first write, so before it has a transaction id. Readers then stop at the oldest *appender*
 * still running (`es_horizon()`), not at the oldest transaction on the whole server: an idle transaction in
 * another database, a read model's batch or a psql session left open no longer stall the log.
 *
 * Why it is exact: a reader takes a snapshot S, then finds the announced backends (the lock table) and their
 * transaction ids (`pg_stat_activity.backend_xid`, the very field snapshots are made from; the lock on an id
 * is taken only after the id is visible, so the lock table would miss it for a moment), then, in a later
 * statement, reads events below the horizon H = min(xmax(S), oldest announced xid running at S). An appender
 * running at S got its xid before S and announced before that, so it is found and H stops at it. An appender
 * that gets its xid after S has one >= xmax(S) >= H. So every appender below H had finished at S, and the
 * later read sees all of its events. Shared locks never wait for each other; appenders pay one lock entry.
 */
export const APPENDER_LOCK = [0x45530001, 0x41505044] as const;

/**
 * The event store's own tables. Order is (transaction_id, global_position): a reader never passes the
 * oldest transaction still running, so an event committed after a later-numbered one is never skipped.
 */
export const eventStoreMigrations: Record<string, Migration> = {
  '0001_event_store': {
    async up(db) {
      await sql`
        create table es_streams (
          stream_name text primary key,
          revision bigint not null
        )`.execute(db);
      await sql`
        create table es_events (
          global_position bigint generated always as identity primary key,
          transaction_id xid8 not null default pg_current_xact_id(),
          stream_name text not null,
          stream_revision bigint not null,
          event_id uuid not null unique,
          event_type text not null,
          data jsonb not null,
          metadata jsonb not null,
          created_at timestamptz not null default now(),
          unique (stream_name, stream_revision)
        )`.execute(db);
      await sql`create index es_events_log_order on es_events (transaction_id, global_position)`.execute(db);
    },
  },
  // Superseded by 0003 before it was released (it found appenders through their locks on their own ids only);
  // kept, empty, so databases that ran it still match the list.
  '0002_append_horizon': { async up() {} },
  '0003_append_horizon_from_backend_xids': {
    // A transaction's id enters the snapshots before its lock on that id is taken, so the lock table alone can
    // miss a running appender for a moment; its backend's own id (`backend_xid`, the field snapshots are made
    // from) cannot. Both are read: an id found by either holds the horizon.
    async up(db) {
      await sql`
        create or replace function es_announced_xids() returns setof bigint language sql volatile as $$
          select activity.backend_xid::text::bigint
          from pg_locks announced
          join pg_stat_activity activity on activity.pid = announced.pid
          where announced.locktype = 'advisory' and announced.granted
            and announced.database = (select oid from pg_database where datname = current_database())
            and announced.classid = ${sql.raw(String(APPENDER_LOCK[0]))} and announced.objid = ${sql.raw(String(APPENDER_LOCK[1]))}
            and announced.objsubid = 2 and activity.backend_xid is not null
          union
          select own.transactionid::text::bigint
          from pg_locks announced
          join pg_locks own on own.pid = announced.pid and own.locktype = 'transactionid' and own.granted and own.mode = 'ExclusiveLock'
          where announced.locktype = 'advisory' and announced.granted
            and announced.database = (select oid from pg_database where datname = current_database())
            and announced.classid = ${sql.raw(String(APPENDER_LOCK[0]))} and announced.objid = ${sql.raw(String(APPENDER_LOCK[1]))}
            and announced.objsubid = 2
        $$`.execute(db);
      await sql`
        create or replace function es_horizon() returns xid8 language plpgsql volatile as $$
        declare
          snapshot pg_snapshot := pg_current_snapshot();
          oldest xid8;
        begin
          perform pg_stat_clear_snapshot();
          select min(running) into oldest from pg_snapshot_xip(snapshot) as running
          where (running::text::bigint % 4294967296) in (select es_announced_xids());
          return coalesce(oldest, pg_snapshot_xmax(snapshot));
        end $$`.execute(db);
    },
  },
  // Appends in one statement, group commit included (postgres-append.ts).
  '0004_append_function': APPEND_FUNCTION_MIGRATION(APPENDER_LOCK),
  '0005_horizon_with_a_kept_plan': {
    // The same horizon, found by one query of es_horizon's own. es_announced_xids() was a SQL function, and
    // PostgreSQL plans a SQL function's query again at every call: 2.2 ms of the server's CPU per horizon as
    // soon as any transaction ran (always, under load), where the query runs in 0.3. PL/pgSQL keeps its plans for
    // the session. The lock table is read once; an appender's id comes from its backend, or from its lock on it.
    async up(db) {
      const [classId, objId] = APPENDER_LOCK.map((part) => sql.raw(String(part)));
      await sql`
        create or replace function es_horizon() returns xid8 language plpgsql volatile as $$
        declare
          snapshot pg_snapshot := pg_current_snapshot();
          oldest xid8;
        begin
          -- Nothing was running when the snapshot was taken: every transaction below its xmax has ended.
          if pg_snapshot_xmin(snapshot) = pg_snapshot_xmax(snapshot) then
            return pg_snapshot_xmax(snapshot);
          end if;
          perform pg_stat_clear_snapshot();
          with locks as materialized (
            select l.pid, l.locktype, l.transactionid from pg_locks l
            where l.granted and (
              (l.locktype = 'advisory' and l.database = (select oid from pg_database where datname = current_database())
                and l.classid = ${classId} and l.objid = ${objId} and l.objsubid = 2)
              or (l.locktype = 'transactionid' and l.mode = 'ExclusiveLock'))
          ), appenders as materialized (
            select distinct pid from locks where locktype = 'advisory'
          ), announced as (
            select activity.backend_xid::text::bigint as xid
            from appenders, lateral pg_stat_get_activity(appenders.pid) as activity
            where activity.backend_xid is not null
            union all
            select own.transactionid::text::bigint from locks own join appenders using (pid) where own.locktype = 'transactionid'
          )
          select min(running) into oldest from pg_snapshot_xip(snapshot) as running
          where (running::text::bigint % 4294967296) in (select xid from announced);
          return coalesce(oldest, pg_snapshot_xmax(snapshot));
        end $$`.execute(db);
      await sql`drop function if exists es_announced_xids()`.execute(db);
    },
  },
  '0006_append_by_index': APPEND_BY_INDEX_MIGRATION,
  '0007_append_guard': APPEND_GUARD_MIGRATION,
  '0008_new_streams_check': NEW_STREAMS_MIGRATION,
};

export interface PostgresEventStoreOptions {
  /**
   * Group commit (see `GroupCommit`): one append statement of this process runs at a time, and appends arriving
   * while it runs go together in the next one; a statement running for `appendStalledAfterMs` (default 25) lets
   * one more start beside it, up to `maxConcurrentAppends` (default 4).
   */
  maxConcurrentAppends?: number;
  appendStalledAfterMs?: number;
  /** The shortest time between two wake-up NOTIFYs of this process (default 5 ms; see `WakeUps`). */
  notifyIntervalMs?: number;
}

interface EventRow {
  position: string;
  stream_name: string;
  stream_revision: string;
  event_id: string;
  event_type: string;
  data: unknown;
  /** Null when the read left it out (`metadata: false`). */
  metadata: EventMetadata | null;
  /** Epoch milliseconds: a number is several times cheaper to turn into a Date than a timestamp's text. */
  created_at: number;
  matches?: boolean;
}

const UNIQUE_VIOLATION = '23505';

export class PostgresEventStore implements EventStore {
  private readonly signal = new AppendSignal();
  private unlisten: Promise<() => Promise<void>> | null = null;
  private readonly wakeUps: WakeUps;
  /** Whether the loop sending NOTIFYs alone runs. */
  private notifying = false;
  private readonly commits: GroupCommit;

  constructor(
    private readonly database: Database,
    options: PostgresEventStoreOptions = {},
  ) {
    this.wakeUps = new WakeUps(options.notifyIntervalMs ?? NOTIFY_INTERVAL_MS);
    this.commits = new GroupCommit(
      async (units, guards) => {
        // The statement carries the wake-up NOTIFY when one is due (`WakeUps`), and announces its commit itself.
        const carried = this.wakeUps.carry(Date.now());
        const outcomes = await appendUnits(this.db, units, APPENDER_LOCK, guards, false, carried === null ? null : APPENDED_CHANNEL);
        this.announce(carried);
        return outcomes;
      },
      options.maxConcurrentAppends ?? 4,
      options.appendStalledAfterMs,
    );
  }

  private get db(): Kysely<any> {
    return this.database.db;
  }

  async append(stream: string, events: NewEvent[], options: { expectedRevision?: ExpectedRevision } & AppendOptions = {}) {
    const [result] = await this.appendMultiple([{ stream, events, expectedRevision: options.expectedRevision }], options);
    return result!;
  }

  /**
   * One round trip (`es_append`), shared with the appends of this process that wait for a turn (group commit,
   * see `GroupCommit`). An append with a stream of no events (a pure expectation check) takes the transaction
   * path, which answers it with the stream's last position.
   *
   * The request's append guard (append-guard.ts), while it is not proven, goes with the statement: it commits
   * only if the guard holds, and then the guard is proven. The transaction path checks it first instead.
   */
  async appendMultiple(appends: StreamAppend[], options: AppendOptions = {}): Promise<AppendResult[]> {
    if (appends.length === 0) return [];
    const prepared = withEventIds(appends);
    const guard = pendingAppendGuard(options.guard);
    if (prepared.some((append) => append.events.length === 0)) {
      await guard?.check();
      return this.appendInOwnTransaction(prepared);
    }
    let results: AppendResult[];
    try {
      results = await this.commits.submit(prepared, guard);
    } catch (error) {
      if (guard && isAppendGuardFailure(error)) throw new AppendGuardError(guard.key);
      throw error;
    }
    guard?.committed();
    return results;
  }

  private async appendInOwnTransaction(prepared: StreamAppend[]): Promise<AppendResult[]> {
    // A concurrent append of the same event ids loses on the unique key; once that one has committed the
    // retry finds them and answers with the original result.
    for (let attempt = 0; ; attempt++) {
      try {
        const results = await this.db.transaction().execute(async (trx) => {
          await this.announceAppender(trx);
          return this.appendInTransaction(trx, prepared, { notify: false });
        });
        this.announce();
        return results;
      } catch (error) {
        if (attempt < 3 && isUniqueViolation(error, 'es_events_event_id_key')) continue;
        throw error;
      }
    }
  }

  /**
   * Appends inside a transaction the caller owns (read models written atomically with events, tests that
   * hold a transaction open). The caller commits; subscribers wake on the NOTIFY sent at commit.
   */
  async appendInTransaction(
    trx: Kysely<any>,
    unprepared: StreamAppend[],
    options: { notify?: boolean; announced?: boolean } & AppendOptions = {},
  ): Promise<AppendResult[]> {
    await pendingAppendGuard(options.guard)?.check();
    // `announced`: the caller's transaction took `announcement` in its first statement.
    if (!options.announced) await this.announceAppender(trx);
    const appends = withEventIds(unprepared);
    // In order: each run of appends with events is one `es_append` statement, as group commit sends it (a replay
    // answered with the first append's results, an expectation that fails refusing the run, the transaction left
    // usable); a stream of no events is a check of its expectation between them.
    const results: AppendResult[] = [];
    let run: StreamAppend[] = [];
    // The first statement that appends carries the NOTIFY (delivered at the caller's commit): no statement of its own.
    let notify = options.notify ?? true;
    const appendRun = async () => {
      if (run.length === 0) return;
      const [outcome] = await appendUnits(trx, [run], APPENDER_LOCK, [], true, notify ? APPENDED_CHANNEL : null);
      if ('error' in outcome!) throw outcome.error;
      notify = false;
      results.push(...outcome!.results);
      run = [];
    };
    for (const append of appends) {
      if (append.events.length > 0) run.push(append);
      else {
        await appendRun();
        results.push(await this.emptyAppend(trx, append));
      }
    }
    await appendRun();
    if (notify) await sql`select pg_notify(${APPENDED_CHANNEL}, '')`.execute(trx);
    return results;
  }

  /**
   * Makes the transaction a known appender (APPENDER_LOCK). Call it before the transaction's first write; a
   * transaction that already wrote without announcing could hide its events from a reader that has passed
   * its id, so that is refused (the caller's transaction then rolls back). Announcing again is free.
   */
  async announceAppender(trx: Kysely<any>): Promise<void> {
    const row = (
      await sql<{ late: boolean }>`
      with before as materialized (
        select pg_current_xact_id_if_assigned() is not null
          and not exists (select 1 from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()
            and classid = ${sql.raw(String(APPENDER_LOCK[0]))} and objid = ${sql.raw(String(APPENDER_LOCK[1]))} and objsubid = 2) as late)
      select before.late, ${announceSql} from before`.execute(trx)
    ).rows[0];
    if (row?.late) throw new Error('An append must announce its transaction before the transaction writes anything (announceAppender)');
  }

  /**
   * `announceAppender` as an expression, for a statement of the caller's that is the transaction's first: a
   * materialized CTE or a one-row `from` item the statement's write reads, so the lock is taken before the
   * write gives the transaction its id (as `appendOne` does). Saves a round trip per transaction.
   */
  get announcement(): RawBuilder<unknown> {
    return announceSql;
  }

  /** The read horizon: positions of transactions below it are final (see APPENDER_LOCK). */
  private async horizon(): Promise<string> {
    return (await sql<{ horizon: string }>`/* engage:log-read */ select es_horizon()::text as horizon`.execute(this.db)).rows[0]!.horizon;
  }

  private async emptyAppend(trx: Kysely<any>, append: StreamAppend): Promise<AppendResult> {
    const actual = await this.currentRevision(trx, append.stream);
    const expected = append.expectedRevision ?? 'any';
    const holds =
      expected === 'any' ||
      (expected === 'no_stream' && actual === 'no_stream') ||
      (expected === 'stream_exists' && actual !== 'no_stream') ||
      (typeof expected === 'bigint' && actual === expected);
    if (!holds) throw new WrongExpectedRevisionError(append.stream, expected, actual);
    const last = await this.readStream(append.stream, { direction: 'backwards', limit: 1 }, trx);
    return { stream: append.stream, nextExpectedRevision: actual === 'no_stream' ? -1n : actual, position: last[0]?.position ?? formatPosition(0n, 0n) };
  }

  private async currentRevision(trx: Kysely<any>, stream: string): Promise<bigint | 'no_stream'> {
    const row = await trx.selectFrom('es_streams').select('revision').where('stream_name', '=', stream).executeTakeFirst();
    return row ? BigInt(row.revision) : 'no_stream';
  }

  async readStream(stream: string, options: ReadStreamOptions = {}, db: Kysely<any> = this.db): Promise<RecordedEvent[]> {
    const backwards = options.direction === 'backwards';
    const from = options.from === undefined ? sql`` : sql`and stream_revision ${sql.raw(backwards ? '<=' : '>=')} ${options.from.toString()}::bigint`;
    const rows = (
      await sql<EventRow>`/* engage:stream-read */
      select ${sql.join(eventColumns)} from es_events
      where stream_name = ${stream} ${from}
      order by stream_revision ${sql.raw(backwards ? 'desc' : 'asc')}
      ${options.limit === undefined ? sql`` : sql`limit ${options.limit}`}`.execute(db)
    ).rows;
    return rows.map(toRecorded);
  }

  async readAll(options: ReadAllOptions = {}): Promise<ReadAllPage> {
    const limit = options.limit ?? 500;
    const { filter } = options;
    const after = options.after ? parsePosition(options.after) : null;
    const until = options.until ? parsePosition(options.until) : null;
    // One window of the log in order; rows outside the filter come back without their payload, so the
    // checkpoint can move past them. The order names the table's columns: a bare `transaction_id` would
    // be the text alias of the select list, and '1000' sorts before '999'.
    const read = (horizon: RawBuilder<unknown>, value: (given: string | number) => RawBuilder<unknown>) => sql`
      select ${sql.join(options.metadata === false ? eventColumnsWithoutMetadata : eventColumns)}, ${matchesSql(filter)} as matches
      from es_events
      where transaction_id < ${horizon}
        ${after ? sql`and (transaction_id, global_position) > (${value(after.major.toString())}::xid8, ${value(after.minor.toString())}::bigint)` : sql``}
        ${until ? sql`and (transaction_id, global_position) <= (${value(until.major.toString())}::xid8, ${value(until.minor.toString())}::bigint)` : sql``}
      order by es_events.transaction_id, es_events.global_position
      limit ${value(limit)}`;
    // Without a filter (every consumer's read), the horizon and the read go in one round trip: two statements
    // of one simple-protocol message, the read's snapshot taken after the horizon's as each statement takes its
    // own (see APPENDER_LOCK), the horizon handed over in a setting local to the message's implicit transaction.
    // Its values are then written in as literals (positions and a count, which Kysely quotes).
    const rows = (
      filter
        ? await sql<EventRow>`/* engage:log-read */ ${read(sql`${await this.horizon()}::xid8`, (given) => sql`${given}`)}`.execute(this.db)
        : await sql<EventRow>`/* engage:log-read */ select set_config('engage.horizon', es_horizon()::text, true);
            ${read(sql`current_setting('engage.horizon')::xid8`, (given) => sql.lit(given))}`.execute(this.db)
    ).rows;
    const last = rows[rows.length - 1];
    return {
      events: rows.filter((row) => row.matches).map(toRecorded),
      checkpoint: last ? last.position : null,
      // A read bounded by `until` stops at a known position, never at the end of the log.
      isEnd: !until && rows.length < limit,
    };
  }

  subscribe(options: SubscribeOptions = {}): Subscription {
    this.ensureListening();
    return pollingSubscription(
      {
        readAll: (read) => this.readAll(read),
        waitForAppends: (timeoutMs, signal) => this.signal.wait(timeoutMs, signal),
        appendVersion: () => this.signal.version,
      },
      options,
    );
  }

  appendVersion(): number {
    this.ensureListening();
    return this.signal.version;
  }

  /**
   * A transaction of this process that announced itself as an appender and appended nothing has ended (a process
   * manager's batch that decided nothing): the events that others committed while its id held the horizon show
   * now, and no NOTIFY says so. Readers here look again instead of sleeping until their poll. Readers in other
   * processes (a second projector process) still learn it from the next NOTIFY or their poll (`idlePollMs`, 1 s):
   * a NOTIFY in such a batch would queue its commit behind every other notifier's.
   */
  horizonReleased(): void {
    this.signal.notify();
  }

  /** Resolves when an append (in this process or, through NOTIFY, any other) may have landed. */
  waitForAppends(timeoutMs: number, signal: AbortSignal): Promise<void> {
    this.ensureListening();
    return this.signal.wait(timeoutMs, signal);
  }

  async head(): Promise<{ position: Position; createdAt: Date } | null> {
    const horizon = await this.horizon();
    const row = (
      await sql<{ transaction_id: string; global_position: string; created_at: Date }>`/* engage:log-read */
      select transaction_id::text as transaction_id, global_position, created_at from es_events
      where transaction_id < ${horizon}::xid8
      order by es_events.transaction_id desc, es_events.global_position desc limit 1`.execute(this.db)
    ).rows[0];
    return row ? { position: formatPosition(BigInt(row.transaction_id), BigInt(row.global_position)), createdAt: row.created_at } : null;
  }

  countAfter(after: Position | null): Promise<number> {
    return this.countVisible(after, null);
  }

  countBetween(after: Position | null, until: Position): Promise<number> {
    return this.countVisible(after, until);
  }

  /** Visible events after `after`, up to and including `until` when given. */
  private async countVisible(after: Position | null, until: Position | null): Promise<number> {
    const bound = (position: Position, comparison: '>' | '<=') => {
      const { major, minor } = parsePosition(position);
      return sql`and (transaction_id, global_position) ${sql.raw(comparison)} (${major.toString()}::xid8, ${minor.toString()}::bigint)`;
    };
    const horizon = await this.horizon();
    const row = (
      await sql<{ count: string }>`/* engage:log-read */
      select count(*) as count from es_events
      where transaction_id < ${horizon}::xid8
        ${after ? bound(after, '>') : sql``}
        ${until ? bound(until, '<=') : sql``}`.execute(this.db)
    ).rows[0];
    return Number(row?.count ?? 0);
  }

  async close(): Promise<void> {
    const unlisten = this.unlisten;
    this.unlisten = null;
    this.signal.notify();
    if (unlisten) await (await unlisten.catch(() => async () => undefined))();
  }

  /**
   * Wakes subscribers after a committed append: this process's at once, other processes' through a NOTIFY:
   * the one the append's statement `carried` (its token, see `WakeUps`), or one sent after it on its own, at
   * most one at a time however many appends it covers (appends committed while one is on its way get the next).
   */
  private announce(carried: number | null = null): void {
    this.signal.notify();
    this.wakeUps.committed(carried);
    if (this.notifying || !this.wakeUps.pending) return;
    this.notifying = true;
    setImmediate(() => void this.sendNotifies());
  }

  private async sendNotifies(): Promise<void> {
    for (;;) {
      // Under a steady stream of commits at most one NOTIFY per interval; an append statement sent meanwhile may carry it.
      const next = this.wakeUps.next(Date.now());
      if (next === 'none') break;
      if (next !== 'send') {
        await new Promise((resolve) => setTimeout(resolve, next));
        continue;
      }
      // A NOTIFY gives its transaction an id and so a commit record: committed without waiting for the WAL
      // flush (a wake-up is worth no disk wait), it does not double the appends' fsyncs.
      await sql`${sql.raw(SHORT_STATEMENT)} /* engage:notify */ select set_config('synchronous_commit', 'off', true), pg_notify(${APPENDED_CHANNEL}, '')`
        .execute(this.db)
        .catch(() => undefined);
    }
    this.notifying = false;
  }

  private ensureListening(): void {
    this.unlisten ??= this.database.listen(APPENDED_CHANNEL, () => this.signal.notify());
  }
}

/**
 * The shortest time between two wake-up NOTIFYs of this process. Each was a round trip and a commit of its own
 * after nearly every group commit, as many statements as the appends themselves (the command API at 16
 * connections: 0.3 statements a request, half of them NOTIFYs). Other processes' consumers read at most once
 * per 15 ms tick under load (`GenerationWorker.pace`), so waking them more often bought nothing.
 */
const NOTIFY_INTERVAL_MS = 5;

const announceSql = sql`pg_advisory_xact_lock_shared(${sql.raw(String(APPENDER_LOCK[0]))}, ${sql.raw(String(APPENDER_LOCK[1]))})`;

/**
 * The position is formatted by the server (as `formatPosition` does), which saves the reader two BigInts per
 * event. Without the metadata (readers that never look at it): a third of an event's JSON, neither sent nor parsed.
 * The time in epoch milliseconds from the time cut to its millisecond (`date_trunc`, in whole microseconds; the
 * session's time zone plays no part below the hour) read as a double and rounded: exact, the double's error being
 * a ten-thousandth of a millisecond. `extract(epoch ...)` answers a numeric since PostgreSQL 14, whose
 * arithmetic made the times of the bench's 1,000,081 events cost the server 0.69-0.81 s against 0.47-0.51 (the
 * same values, in three time zones and across a DST change).
 */
const eventColumnsWith = (metadata: RawBuilder<unknown>) => [
  sql`lpad(to_hex(transaction_id::text::bigint), 16, '0') || lpad(to_hex(global_position), 16, '0') as position`,
  sql`stream_name`,
  sql`stream_revision`,
  sql`event_id::text as event_id`,
  sql`event_type`,
  sql`data`,
  metadata,
  sql`round(date_part('epoch', date_trunc('milliseconds', created_at)) * 1000) as created_at`,
];
const eventColumns = eventColumnsWith(sql`metadata`);
const eventColumnsWithoutMetadata = eventColumnsWith(sql`null::jsonb as metadata`);
const NO_METADATA: EventMetadata = Object.freeze({});

function matchesSql(filter: EventFilter | undefined) {
  const conditions = [sql`true`];
  if (filter?.eventTypes) conditions.push(sql`event_type = any(${[...filter.eventTypes]}::text[])`);
  if (filter?.categories) conditions.push(sql`split_part(stream_name, '-', 1) = any(${[...filter.categories]}::text[])`);
  return sql`(${sql.join(conditions, sql` and `)})`;
}

/**
 * Event types as one string each: a page's types are otherwise a fresh string per event, which every consumer's
 * `canHandle` lookup compares character by character and which the reader's memory holds a million times over.
 * Types are a closed set; the bound only guards against a log of made-up types.
 */
const eventTypes = new Map<string, string>();

function internType(type: string): string {
  const known = eventTypes.get(type);
  if (known !== undefined) return known;
  if (eventTypes.size < 10_000) eventTypes.set(type, type);
  return type;
}

function toRecorded(row: EventRow): RecordedEvent {
  return {
    id: row.event_id,
    type: internType(row.event_type),
    stream: row.stream_name,
    revision: BigInt(row.stream_revision),
    position: row.position,
    data: row.data,
    metadata: row.metadata ?? NO_METADATA,
    createdAt: new Date(row.created_at),
  };
}

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const candidate = error as { code?: string; constraint?: string; message?: string };
  return candidate?.code === UNIQUE_VIOLATION && (candidate.constraint === constraint || !!candidate.message?.includes(constraint));
}

function withEventIds(appends: StreamAppend[]): StreamAppend[] {
  return appends.map((append) => ({
    ...append,
    events: append.events.map((event) => (event.id ? event : { ...event, id: newEventId() })),
  }));
}
