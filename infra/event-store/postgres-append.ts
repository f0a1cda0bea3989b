import { sql, type Kysely, type Migration, type RawBuilder } from 'kysely';
import { guardFilter, type AppendGuard } from './append-guard.ts';
import { EventIdConflictError, WrongExpectedRevisionError, formatPosition, type AppendResult, type StreamAppend } from './port.ts';

/**
 * Appends in one round trip, and concurrent appends of one process in one statement (group commit).
 *
 * `es_append` takes a batch of units (a unit is one caller's append or multi-stream append: all or nothing)
 * as parallel arrays and does, in one statement and so one transaction:
 *   1. announce the appender (the shared advisory lock that holds the read horizon, before any write);
 *   2. lock the batch's existing stream rows in name order (two batches never wait on each other in a cycle);
 *   3. find the units whose event ids are already in the log (idempotent replays, or id conflicts);
 *   4. per unit, in order, claim each stream's revisions with the same conditional update or insert as a
 *      single append has always used; when one of a unit's expectations fails, its earlier claims are undone
 *      (the rows stay locked by this transaction, so the undo is exact) and the unit alone is refused;
 *   5. insert the events of every unit that holds, in one statement.
 * It answers one row per stream append: `ok`, `known` (an idempotent replay: the first append's result),
 * `wrong` (with the actual revision, null for no stream), `ids` (some ids used by another append) or
 * `skipped` (another stream of the same unit failed). A batch whose every stream is new, the command API's
 * common case, goes first as one plain statement instead (`appendToNewStreams`), and to `es_append` only when
 * that finds a stream or an event id taken.
 */
export const APPEND_FUNCTION_MIGRATION = (lock: readonly [number, number]): Migration => ({
  async up(db) {
    await sql`
      create or replace function es_append(
        p_unit int[], p_stream text[], p_kind text[], p_expected bigint[], p_count int[],
        p_event_sa int[], p_event_id uuid[], p_event_type text[], p_data jsonb[], p_metadata jsonb[], p_event_offset int[]
      ) returns table (o_sa int, o_status text, o_revision bigint, o_transaction_id xid8, o_global_position bigint, o_conflicting text)
      language plpgsql volatile as $fn$
      declare
        n int := coalesce(array_length(p_stream, 1), 0);
        st text[] := array_fill(null::text, array[n]);
        rev bigint[] := array_fill(null::bigint, array[n]);
        k_tx xid8[] := array_fill(null::xid8, array[n]);
        k_pos bigint[] := array_fill(null::bigint, array[n]);
        conf text[] := array_fill(null::text, array[n]);
        known int[];
        i int := 1;
        j int;
        u int;
        unit_end int;
        failed int;
        r bigint;
        tx xid8;
        pos bigint;
        found_count int;
        found_ids text;
      begin
        perform pg_advisory_xact_lock_shared(${sql.raw(String(lock[0]))}, ${sql.raw(String(lock[1]))});
        if n > 1 then
          perform 1 from es_streams s where s.stream_name = any(p_stream) order by s.stream_name for no key update;
        end if;
        select coalesce(array_agg(distinct p_unit[x.sa]), '{}') into known
        from unnest(p_event_id, p_event_sa) as x(id, sa)
        where exists (select 1 from es_events e where e.event_id = x.id);
        while i <= n loop
          u := p_unit[i];
          unit_end := i;
          while unit_end < n and p_unit[unit_end + 1] = u loop
            unit_end := unit_end + 1;
          end loop;
          failed := 0;
          if u = any(known) then
            -- A replay answers the first append's result when every id is there, in the same stream.
            for j in i..unit_end loop
              select count(*) filter (where e.stream_name = p_stream[j]), string_agg(e.event_id::text, ',')
                into found_count, found_ids
              from unnest(p_event_id, p_event_sa) as x(id, sa) left join es_events e on e.event_id = x.id
              where x.sa = j;
              if found_count <> p_count[j] then
                failed := j;
                conf[j] := coalesce(found_ids, '');
                exit;
              end if;
              select e.stream_revision, e.transaction_id, e.global_position into r, tx, pos
              from es_events e
              where e.event_id = p_event_id[(select max(x.ord) from unnest(p_event_sa) with ordinality as x(sa, ord) where x.sa = j)];
              rev[j] := r;
              k_tx[j] := tx;
              k_pos[j] := pos;
              st[j] := 'known';
            end loop;
            if failed > 0 then
              for j in i..unit_end loop
                st[j] := case when j = failed then 'ids' else 'skipped' end;
              end loop;
            end if;
          else
            for j in i..unit_end loop
              r := null;
              if p_kind[j] = 'no_stream' then
                insert into es_streams as s (stream_name, revision) values (p_stream[j], p_count[j] - 1)
                on conflict (stream_name) do nothing returning s.revision into r;
              elsif p_kind[j] = 'any' then
                insert into es_streams as s (stream_name, revision) values (p_stream[j], p_count[j] - 1)
                on conflict (stream_name) do update set revision = s.revision + p_count[j] returning s.revision into r;
              elsif p_kind[j] = 'stream_exists' then
                update es_streams s set revision = s.revision + p_count[j] where s.stream_name = p_stream[j] returning s.revision into r;
              else
                update es_streams s set revision = s.revision + p_count[j]
                where s.stream_name = p_stream[j] and s.revision = p_expected[j] returning s.revision into r;
              end if;
              if r is null then
                failed := j;
                exit;
              end if;
              rev[j] := r;
              st[j] := 'ok';
            end loop;
            if failed > 0 then
              -- Undo this unit's earlier claims, latest first; a stream this unit created goes again.
              for j in reverse failed - 1..i loop
                update es_streams s set revision = s.revision - p_count[j] where s.stream_name = p_stream[j] returning s.revision into r;
                if r < 0 then
                  delete from es_streams s where s.stream_name = p_stream[j];
                end if;
              end loop;
              select s.revision into r from es_streams s where s.stream_name = p_stream[failed];
              for j in i..unit_end loop
                st[j] := case when j = failed then 'wrong' else 'skipped' end;
                rev[j] := case when j = failed then r end;
              end loop;
            end if;
          end if;
          i := unit_end + 1;
        end loop;
        return query
        with inserted as (
          insert into es_events (stream_name, stream_revision, event_id, event_type, data, metadata)
          select p_stream[e.sa], rev[e.sa] - p_count[e.sa] + 1 + e.off, e.id, e.type, e.data, e.meta
          from unnest(p_event_sa, p_event_id, p_event_type, p_data, p_metadata, p_event_offset) with ordinality as e(sa, id, type, data, meta, off, ord)
          where st[e.sa] = 'ok'
          order by e.ord
          returning es_events.event_id, es_events.global_position
        ),
        last_positions as (
          select x.sa, max(inserted.global_position) as global_position
          from inserted join unnest(p_event_id, p_event_sa) as x(id, sa) on x.id = inserted.event_id
          group by x.sa
        )
        select s.i, st[s.i], rev[s.i],
          case when st[s.i] = 'ok' then pg_current_xact_id() else k_tx[s.i] end,
          case when st[s.i] = 'ok' then last_positions.global_position else k_pos[s.i] end,
          conf[s.i]
        from generate_series(1, n) as s(i) left join last_positions on last_positions.sa = s.i
        order by s.i;
      end $fn$`.execute(db);
  },
});

/**
 * `es_append` looks its streams and event ids up by index, whatever the tables' size when a session first ran it.
 * PL/pgSQL keeps a session's plans; after five calls it keeps a generic one, made for the tables as they were
 * then. A session that started on a new store (a deployment's first minutes, each bench run) planned sequential
 * scans of a near-empty `es_streams` and `es_events` and kept them as the tables grew, until an autovacuum's
 * ANALYZE happened to invalidate them: the bench's first 15,000 custom events took 0.68 ms of the server per
 * batch to lock streams (2 ms by the end) and 0.45-1.1 ms to look for known ids, against 0.03-0.04 by index.
 * Every lookup the function makes has a unique index to use, so it never needs a sequential scan.
 */
export const APPEND_BY_INDEX_MIGRATION: Migration = {
  async up(db) {
    await sql`alter function es_append(int[], text[], text[], bigint[], int[], int[], uuid[], text[], jsonb[], jsonb[], int[]) set enable_seqscan = off`.execute(
      db,
    );
  },
};

interface AppendRow {
  o_sa: number;
  o_status: 'ok' | 'known' | 'wrong' | 'ids' | 'skipped';
  o_revision: string | null;
  o_transaction_id: string | null;
  o_global_position: string | null;
  o_conflicting: string | null;
}

/** A unit's answer: its results, or the error its caller gets. */
export type UnitOutcome = { results: AppendResult[] } | { error: Error };

/**
 * Runs `es_append` for the units (each with event ids and at least one event per stream) in one statement and
 * tells each unit's outcome. A failure of the statement itself (a deadlock, a concurrent append of the same
 * ids) throws: the caller decides whether to retry the units one by one. `inTransaction`: `db` is a transaction
 * of the caller's, where a failed statement would end it, so a lone append does not try the plain statement
 * first (it fails on ids already in the log: a replay).
 */
export async function appendUnits(
  db: Kysely<any>,
  units: StreamAppend[][],
  lock: readonly [number, number],
  guards: readonly (AppendGuard | undefined)[] = [],
  inTransaction = false,
  /** A channel to NOTIFY when the statement's transaction commits (`WakeUps`; an append in a caller's transaction, its first statement). */
  notify: string | null = null,
): Promise<UnitOutcome[]> {
  const notifying = notify === null ? sql`` : sql`, pg_notify(${sql.lit(notify)}, '') as notified`;
  // The units' guards (append-guard.ts), checked on the statement's answer rows: one that fails rolls it back.
  const filter = guardFilter(guards);
  if (!inTransaction && units.length === 1 && units[0]!.length === 1) {
    // Alone: the plain statement, cheaper than the function; a failed expectation or a known id is answered by
    // the function, which tells a replay from a conflict and reads the actual revision.
    const result = await appendOne(db, units[0]![0]!, lock, filter, notifying).catch((error: unknown) => {
      if (isEventIdViolation(error)) return null;
      throw error;
    });
    if (result) return [{ results: [result] }];
  }
  const unit: number[] = [];
  const stream: string[] = [];
  const kind: string[] = [];
  const expected: (string | null)[] = [];
  const count: number[] = [];
  const eventSa: number[] = [];
  const eventId: string[] = [];
  const eventType: string[] = [];
  const data: string[] = [];
  const metadata: string[] = [];
  const offset: number[] = [];
  // A command's events share one metadata object (a batch of 100 custom events and their records, one): written once.
  let lastMetadata: unknown = undefined;
  let lastMetadataJson = '';
  for (const [u, appends] of units.entries()) {
    for (const append of appends) {
      unit.push(u);
      stream.push(append.stream);
      const revision = append.expectedRevision ?? 'any';
      kind.push(typeof revision === 'bigint' ? 'revision' : revision);
      expected.push(typeof revision === 'bigint' ? revision.toString() : null);
      count.push(append.events.length);
      for (const [k, event] of append.events.entries()) {
        eventSa.push(stream.length);
        eventId.push(event.id!);
        eventType.push(event.type);
        data.push(JSON.stringify(event.data ?? null));
        if (event.metadata !== lastMetadata || lastMetadata === undefined) {
          lastMetadata = event.metadata;
          lastMetadataJson = JSON.stringify(event.metadata ?? {});
        }
        metadata.push(lastMetadataJson);
        offset.push(k);
      }
    }
  }
  if (!inTransaction && (units.length > 1 || units[0]!.length > 1) && onlyNewStreams(units, stream)) {
    const written = await appendToNewStreams(db, { stream, count, eventSa, eventId, eventType, data, metadata, offset }, lock, filter, notifying).catch(
      (error: unknown) => {
        // A stream that exists, or an id in the log already (a replay): `es_append` answers each unit on its own.
        if (sqlState(error) === NEW_STREAMS_TAKEN || isEventIdViolation(error)) return null;
        throw error;
      },
    );
    if (written) return outcomesOf(units, written);
  }
  const rows = (
    await sql<AppendRow>`/* engage:append */ select *${notifying} from es_append(${arrayLiteral(unit)}::int[], ${arrayLiteral(stream)}::text[],
      ${arrayLiteral(kind)}::text[], ${arrayLiteral(expected)}::bigint[], ${arrayLiteral(count)}::int[], ${arrayLiteral(eventSa)}::int[],
      ${arrayLiteral(eventId)}::uuid[], ${arrayLiteral(eventType)}::text[], ${jsonbArray(data)}, ${jsonbArray(metadata)}, ${arrayLiteral(offset)}::int[])
      ${filter ? sql`where ${filter}` : sql``}`.execute(db)
  ).rows;
  return outcomesOf(units, rows);
}

/** Each unit's outcome from the statement's rows, one per stream append in the batch's order. */
function outcomesOf(units: StreamAppend[][], rows: AppendRow[]): UnitOutcome[] {
  const outcomes: UnitOutcome[] = [];
  let row = 0;
  for (const appends of units) {
    const answers = rows.slice(row, row + appends.length);
    row += appends.length;
    outcomes.push(outcomeOf(appends, answers));
  }
  return outcomes;
}

/** The SQLSTATE `es_new_streams` raises: a stream a batch of new streams expected to create exists already. */
export const NEW_STREAMS_TAKEN = 'ESN01';

/**
 * `es_new_streams(ok)`: true, or an error with NEW_STREAMS_TAKEN that rolls the statement back (see
 * `appendToNewStreams`).
 */
export const NEW_STREAMS_MIGRATION: Migration = {
  async up(db) {
    await sql`
      create or replace function es_new_streams(p_ok boolean) returns boolean language plpgsql volatile as $fn$
      begin
        if p_ok is not true then
          raise exception 'a stream expected to be new exists' using errcode = '${sql.raw(NEW_STREAMS_TAKEN)}';
        end if;
        return true;
      end $fn$`.execute(db);
  },
};

/** Every append of the batch expects no stream, and no stream comes twice (`stream`: the batch's streams, in order). */
function onlyNewStreams(units: StreamAppend[][], stream: readonly string[]): boolean {
  for (const appends of units) for (const append of appends) if (append.expectedRevision !== 'no_stream') return false;
  return new Set(stream).size === stream.length;
}

/** The batch's streams and events as `appendUnits` lays them out for `es_append`. */
interface BatchArrays {
  stream: string[];
  count: number[];
  eventSa: number[];
  eventId: string[];
  eventType: string[];
  data: string[];
  metadata: string[];
  offset: number[];
}

/**
 * A batch whose every append creates its stream (custom events, the users created with them, their nonces'
 * records: the command API's common case) in one plain statement: claim every stream in one insert, insert
 * every event, answer each stream's revision and last position. `es_append` decides the same batch stream by
 * stream in PL/pgSQL, and most of its time was the function's own, not its statements': a statement of 8 custom
 * events took 1.18-1.33 ms from one session against 0.88-0.90 this way, 8 users created with their events
 * 1.74-1.98 against 1.46-1.50; the command API's custom events at 16 connections went from 3,300-3,800 to
 * 4,000-4,500 a second (bench/README.md).
 * When a stream exists already, `es_new_streams` rolls the statement back (the others' claims made, their
 * events inserted); when none could be claimed, nothing was written and it answers no row. An event id in the
 * log already fails it on the unique key. Each case is left to `es_append` (null), which answers unit by unit.
 * Otherwise it answers as `es_append` does, a row per stream append.
 */
async function appendToNewStreams(
  db: Kysely<any>,
  arrays: BatchArrays,
  lock: readonly [number, number],
  filter: RawBuilder<boolean> | null,
  notifying: RawBuilder<unknown>,
): Promise<AppendRow[] | null> {
  const { stream, count, eventSa, eventId, eventType, data, metadata, offset } = arrays;
  const rows = (
    await sql<AppendRow>`/* engage:append */
    with announced as materialized (select pg_advisory_xact_lock_shared(${sql.raw(String(lock[0]))}, ${sql.raw(String(lock[1]))})),
    wanted as (select w.stream, w.n, w.sa from unnest(${arrayLiteral(stream)}::text[], ${arrayLiteral(count)}::int[]) with ordinality as w(stream, n, sa)),
    claimed as (
      insert into es_streams (stream_name, revision)
      select w.stream, w.n - 1 from announced, wanted w order by w.stream
      on conflict (stream_name) do nothing
      returning stream_name, revision
    ),
    incoming as (
      select * from unnest(${arrayLiteral(eventSa)}::int[], ${arrayLiteral(eventId)}::uuid[], ${arrayLiteral(eventType)}::text[], ${jsonbArray(data)},
        ${jsonbArray(metadata)}, ${arrayLiteral(offset)}::int[]) with ordinality as e(sa, id, type, data, meta, off, ord)
    ),
    inserted as (
      insert into es_events (stream_name, stream_revision, event_id, event_type, data, metadata)
      select w.stream, c.revision - w.n + 1 + e.off, e.id, e.type, e.data, e.meta
      from incoming e join wanted w on w.sa = e.sa join claimed c on c.stream_name = w.stream
      order by e.ord
      returning stream_name, global_position
    ),
    last_positions as (select stream_name, max(global_position) as global_position from inserted group by stream_name)
    select w.sa::int as o_sa, 'ok' as o_status, c.revision as o_revision, pg_current_xact_id()::text as o_transaction_id,
      l.global_position as o_global_position, null as o_conflicting${notifying}
    from last_positions l join wanted w on w.stream = l.stream_name join claimed c on c.stream_name = l.stream_name
    where es_new_streams((select count(*) from claimed) = ${stream.length})${filter ? sql` and ${filter}` : sql``}
    order by w.sa`.execute(db)
  ).rows;
  return rows.length === stream.length ? rows : null;
}

/**
 * One stream's append in one plain statement (its own transaction): announce, claim the revisions, insert the
 * events. Null when the expectation did not hold.
 */
async function appendOne(
  db: Kysely<any>,
  append: StreamAppend,
  lock: readonly [number, number],
  filter: RawBuilder<boolean> | null,
  notifying: RawBuilder<unknown>,
): Promise<AppendResult | null> {
  const count = append.events.length.toString();
  const expected = append.expectedRevision ?? 'any';
  // Every claim reads from `announced`, so the lock is taken before the statement's first write (its xid).
  const claim =
    expected === 'no_stream'
      ? sql`insert into es_streams (stream_name, revision) select ${append.stream}, ${count}::bigint - 1 from announced
            on conflict (stream_name) do nothing returning revision`
      : expected === 'any'
        ? sql`insert into es_streams (stream_name, revision) select ${append.stream}, ${count}::bigint - 1 from announced
              on conflict (stream_name) do update set revision = es_streams.revision + ${count}::bigint returning revision`
        : sql`update es_streams set revision = revision + ${count}::bigint from announced where stream_name = ${append.stream}
              ${expected === 'stream_exists' ? sql`` : sql`and revision = ${expected.toString()}::bigint`} returning revision`;
  const row = (
    await sql<{ revision: string; transaction_id: string; global_position: string }>`/* engage:append */
    with announced as materialized (select pg_advisory_xact_lock_shared(${sql.raw(String(lock[0]))}, ${sql.raw(String(lock[1]))})),
    claimed as (${claim}),
    incoming as (
      select * from unnest(${arrayLiteral(append.events.map((e) => e.id!))}::uuid[], ${arrayLiteral(append.events.map((e) => e.type))}::text[],
        ${jsonbArray(append.events.map((e) => JSON.stringify(e.data ?? null)))}, ${jsonbArray(append.events.map((e) => JSON.stringify(e.metadata ?? {})))})
        with ordinality as e(event_id, event_type, data, metadata, ord)
    ),
    inserted as (
      insert into es_events (stream_name, stream_revision, event_id, event_type, data, metadata)
      select ${append.stream}, claimed.revision - ${count}::bigint + incoming.ord, incoming.event_id, incoming.event_type, incoming.data, incoming.metadata
      from claimed cross join incoming order by incoming.ord
      returning transaction_id, global_position
    ),
    last as (select transaction_id, global_position from inserted order by global_position desc limit 1)
    select claimed.revision, last.transaction_id::text as transaction_id, last.global_position${notifying}
    from claimed cross join last ${filter ? sql`where ${filter}` : sql``}`.execute(db)
  ).rows[0];
  if (!row) return null;
  return {
    stream: append.stream,
    nextExpectedRevision: BigInt(row.revision),
    position: formatPosition(BigInt(row.transaction_id), BigInt(row.global_position)),
  };
}

/**
 * JSON documents as a `jsonb[]`: one JSON array parameter, split in the statement. Sent as an array of texts, pg
 * writes an array literal, escaping every quote and backslash of every document (two regular expressions over
 * each, and their copies), which PostgreSQL then unescapes before it parses the documents: for a batch of 100
 * custom events, 4% of the service's time and a share of its garbage.
 */
function jsonbArray(documents: readonly string[]): RawBuilder<unknown> {
  return sql`array(select d.document from jsonb_array_elements(${`[${documents.join(',')}]`}::jsonb) with ordinality as d(document, n) order by d.n)`;
}

/**
 * An array parameter written as PostgreSQL's array literal, as pg writes one (every text quoted, quotes and
 * backslashes escaped, NULL for null) but joined once: pg appends element by element to one string, which V8
 * copies again as it grows (a batch of 100 custom events: 9% of the service's allocation, 390 KB a request,
 * for 25 KB of text).
 */
export function arrayLiteral(values: readonly (string | number | null)[]): string {
  const elements = new Array<string>(values.length);
  for (let index = 0; index < values.length; index++) {
    const value = values[index]!;
    elements[index] =
      value === null ? 'NULL' : typeof value === 'number' ? String(value) : `"${NEEDS_ESCAPE.test(value) ? value.replace(ESCAPED, '\\$&') : value}"`;
  }
  return `{${elements.join(',')}}`;
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

function outcomeOf(appends: StreamAppend[], answers: AppendRow[]): UnitOutcome {
  for (const [index, answer] of answers.entries()) {
    const append = appends[index]!;
    if (answer.o_status === 'wrong') {
      const actual = answer.o_revision === null ? 'no_stream' : BigInt(answer.o_revision);
      return { error: new WrongExpectedRevisionError(append.stream, append.expectedRevision ?? 'any', actual) };
    }
    if (answer.o_status === 'ids') return { error: new EventIdConflictError(append.stream, answer.o_conflicting ? answer.o_conflicting.split(',') : []) };
  }
  return {
    results: answers.map((answer, index) => ({
      stream: appends[index]!.stream,
      nextExpectedRevision: BigInt(answer.o_revision!),
      position: formatPosition(BigInt(answer.o_transaction_id!), BigInt(answer.o_global_position!)),
    })),
  };
}

/** Units per statement, and events: a batch stays one short statement. */
const MAX_UNITS = 64;
const MAX_EVENTS = 2000;
/**
 * A unit of at least so many events (a batch of custom events: each event and its nonce's record) is a
 * statement's worth on its own: while one waits, statements run side by side up to the limit instead of one at
 * a time (see `GroupCommit`).
 */
const LARGE_UNIT_EVENTS = 32;

interface Waiting {
  appends: StreamAppend[];
  guard: AppendGuard | undefined;
  ids: string[];
  resolve(results: AppendResult[]): void;
  reject(error: Error): void;
}

/**
 * Group commit: one append statement of this process runs at a time; appends that arrive while it runs wait
 * and then go together, in one statement, each still answered on its own (its results, or its own conflict:
 * one refused unit does not fail the others). An append that finds no statement running goes at once, so an
 * append alone waits for nothing. Units that share an event id never go in one statement (the second is a
 * replay of the first, answered once the first has committed).
 *
 * One statement at a time makes the batches as large as the load: at 16 concurrent requests it halved the
 * statements, commits and socket writes per append against four at a time, and raised the appends a process
 * takes 1.4 to 2 times (bench/README.md). A statement that has run for `stalledAfterMs` is taken to be waiting (a row
 * lock another transaction holds, a slow disk): one more may then start beside it, up to `maxInFlight`, so a
 * stream held elsewhere does not stall every append of the process.
 *
 * Waiting to go together only pays for small units, whose statements cost mostly their round trip and commit.
 * A large unit (`LARGE_UNIT_EVENTS`: a batch of custom events) costs the server most of a statement's time in
 * its own rows, so while one waits, statements run side by side up to `maxInFlight`: one at a time left the
 * server's other core idle while each batch's statement ran (about 30 ms for 100 events and their nonces), and
 * the batch endpoint at 16 connections took 7,146-7,665 events/s against 10,399-10,717 with four at once.
 *
 * A statement that fails as a whole for a reason of one unit's making (invalid data, a deadlock, a
 * concurrent append of the same ids) is retried unit by unit, so only that unit's caller sees the error. A
 * failure of the connection or a time-out reaches every caller of the batch: whether it committed is unknown,
 * as for any append, and a retry with the same event ids is idempotent.
 */
export class GroupCommit {
  private queue: Waiting[] = [];
  /** When each running statement started (`performance.now()`). */
  private readonly running = new Set<{ startedAt: number }>();
  private stallCheck: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly run: (units: StreamAppend[][], guards: (AppendGuard | undefined)[]) => Promise<UnitOutcome[]>,
    private readonly maxInFlight: number,
    private readonly stalledAfterMs = 25,
  ) {}

  /** `guard`: the append commits only if it holds (append-guard.ts). */
  submit(appends: StreamAppend[], guard?: AppendGuard): Promise<AppendResult[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ appends, guard, ids: appends.flatMap((append) => append.events.map((event) => event.id!)), resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.running.size < this.allowed()) {
      const batch = this.take();
      const statement = { startedAt: performance.now() };
      this.running.add(statement);
      void this.execute(batch).finally(() => {
        this.running.delete(statement);
        this.pump();
      });
    }
    this.watchForStall();
  }

  /** One statement, and one more beside each that has stalled; as many as may run while a large unit waits. */
  private allowed(): number {
    if (this.queue.some((waiting) => waiting.ids.length >= LARGE_UNIT_EVENTS)) return this.maxInFlight;
    const now = performance.now();
    let stalled = 0;
    for (const statement of this.running) if (now - statement.startedAt >= this.stalledAfterMs) stalled++;
    return Math.min(this.maxInFlight, 1 + stalled);
  }

  /** While appends wait, looks again when the next running statement would count as stalled. */
  private watchForStall(): void {
    if (this.stallCheck || this.queue.length === 0 || this.running.size >= this.maxInFlight) return;
    const now = performance.now();
    let next = Infinity;
    for (const statement of this.running) {
      const at = statement.startedAt + this.stalledAfterMs;
      if (at > now) next = Math.min(next, at);
    }
    if (next === Infinity) return;
    this.stallCheck = setTimeout(() => {
      this.stallCheck = null;
      this.pump();
    }, next - now);
    this.stallCheck.unref?.();
  }

  /** The next batch, in arrival order; a unit reusing an id of the batch (or past a limit) waits for the next. */
  private take(): Waiting[] {
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    const ids = new Set<string>();
    let events = 0;
    for (const waiting of this.queue) {
      const full = batch.length >= MAX_UNITS || (batch.length > 0 && events + waiting.ids.length > MAX_EVENTS);
      if (full || waiting.ids.some((id) => ids.has(id))) {
        rest.push(waiting);
        continue;
      }
      batch.push(waiting);
      for (const id of waiting.ids) ids.add(id);
      events += waiting.ids.length;
    }
    this.queue = rest;
    return batch;
  }

  private async execute(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) return this.alone(batch[0]!);
    let outcomes: UnitOutcome[];
    try {
      outcomes = await this.run(
        batch.map((waiting) => waiting.appends),
        batch.map((waiting) => waiting.guard),
      );
    } catch (error) {
      if (!isOneUnitsMaking(error)) {
        for (const waiting of batch) waiting.reject(error as Error);
        return;
      }
      await Promise.all(batch.map((waiting) => this.alone(waiting)));
      return;
    }
    for (const [index, waiting] of batch.entries()) settle(waiting, outcomes[index]!);
  }

  /** One unit in its own statement; a deadlock or a concurrent append of the same ids is tried again. */
  private async alone(waiting: Waiting): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const [outcome] = await this.run([waiting.appends], [waiting.guard]);
        return settle(waiting, outcome!);
      } catch (error) {
        if (attempt < 3 && isRetryable(error)) continue;
        return waiting.reject(error as Error);
      }
    }
  }
}

function settle(waiting: Waiting, outcome: UnitOutcome): void {
  if ('error' in outcome) waiting.reject(outcome.error);
  else waiting.resolve(outcome.results);
}

function sqlState(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * PostgreSQL refused the statement for what it holds (data, constraints, locks), not because the session or
 * the server failed (connection 08, resources 53, cancelled or shut down 57): another batch would do better.
 */
function isOneUnitsMaking(error: unknown): boolean {
  const state = sqlState(error);
  return state !== null && !/^(08|53|57)/.test(state);
}

/** A deadlock, a serialisation failure or a concurrent append of the same event ids (found as a replay next time). */
function isRetryable(error: unknown): boolean {
  const state = sqlState(error);
  return state === '40P01' || state === '40001' || isEventIdViolation(error);
}

function isEventIdViolation(error: unknown): boolean {
  const candidate = error as { constraint?: string; message?: string };
  return sqlState(error) === '23505' && (candidate.constraint === 'es_events_event_id_key' || !!candidate.message?.includes('es_events_event_id_key'));
}
