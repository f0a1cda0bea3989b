import { sql, type RawBuilder } from 'kysely';
import { SHORT_STATEMENT, type Database, type UntypedDb } from '../../infra/database.ts';
import { PostgresEventStore } from '../../infra/event-store/postgres.ts';
import { isAtOrAfter, type EventStore, type Position, type RecordedEvent, type SubscriptionBatch } from '../../infra/event-store/port.ts';
import { scheduleJob } from '../../infra/jobs.ts';
import type { Logger } from '../../infra/logging.ts';
import { traceBatch } from '../../infra/tracing.ts';
import { committedCheckpointsOf, type CommittedCheckpoints } from './committed-checkpoints.ts';
import type { BatchContext, Consumer, ConsumerInterest } from './consumer.ts';
import {
  generationRow,
  readyToSwap,
  relogBuild,
  restartWipedBuild,
  stagingInPlace,
  runtimeDb,
  schemaOf,
  STALE_CHECKPOINT_STATE,
  StaleCheckpoint,
  swapIn,
} from './generations.ts';
import type { LeaseKeeper } from './leases.ts';
import type { LivePacing } from './pacing.ts';
import type { LogPage, LogReader, SharedLog } from './shared-log.ts';
import { backoff, isTransient, sleep } from './transient.ts';
import type { Slots } from '../../infra/slots.ts';

export interface WorkerOptions {
  /** How long a consumer at the head sleeps without a wake-up before it looks again (a wake-up is a hint). */
  idlePollMs?: number;
  /**
   * Events a process manager handles in one transaction (default 50). Its appends hold every reader's horizon
   * from its first write until it commits, so a long slice is lag for every read model (live-lag bench on a
   * loaded machine: p99 2.2 s with 500, 1.0 s with 50; on a quiet one the two were alike).
   */
  processManagerBatch?: number;
  /** A building generation's batch: at most this many pages of the log (default 4) ... */
  buildingBatchPages?: number;
  /** ... and it stops taking pages once it holds this many of its own events (default 20,000). */
  buildingBatchEvents?: number;
  /**
   * A live consumer that applied a batch less than this long ago (ms) waits for the next tick of this period,
   * the process's clock, before it reads again (0: never). Unset, the period follows how busy the process is
   * (`LivePacing`: 15 ms, up to 240 under load). See `GenerationWorker.pace`.
   */
  liveBatchIntervalMs?: number;
  /** Called inside a batch's transaction after its events were applied and before its checkpoint commits. */
  onBatchApplied?: (name: string, generation: number, batch: SubscriptionBatch) => Promise<void> | void;
  /**
   * Called once a generation's checkpoint has committed (a batch, a move or an announcement past events it does
   * not handle): where a reader of its checkpoint (`effectiveCheckpoint`, `x-min-position` included) sees it
   * from then on. Must not throw.
   */
  onCheckpoint?: (name: string, generation: number, checkpoint: Position | null) => void;
}

/** What a batch's transaction appended: whether anything, and the position of its last event (`appended_until`). */
interface Appended {
  any: boolean;
  until: Position | null;
}

/** How often a live consumer with nothing to apply announces where it stands, unless at the head (see `GenerationWorker.announced`). */
const MOVE_INTERVAL_MS = 50;
/**
 * How long an idle live consumer's row may stay behind what it announced: then the row itself moves, so a start
 * resumes near where the consumer stood, and its announcement is spent.
 */
const ROW_MOVE_INTERVAL_MS = 1000;

/** The class of a process manager's advisory lock on its own batches (`claimForAppends`); the key is its name and generation. */
const CONSUMER_LOCK_CLASS = 0x45530002;

/** Events a process manager handles in one transaction unless told otherwise (see `WorkerOptions.processManagerBatch`). */
export const PROCESS_MANAGER_BATCH = 50;

/**
 * Checkpoints of consumers whose page held nothing for them move in one statement for all of them (compare-
 * and-set each): the head of a busy log would otherwise cost every consumer a transaction per page.
 */
export class CheckpointMoves {
  private pending: {
    name: string;
    generation: number;
    from: Position | null;
    to: Position | null;
    done: (moved: boolean) => void;
    failed: (error: unknown) => void;
  }[] = [];
  private flushing: Promise<void> | null = null;
  /** What this process's live consumers announced, by `name:generation`: [their row's checkpoint, where they stand]. */
  private readonly heads = new Map<string, [Position | null, Position | null]>();
  private waiting: (() => void)[] = [];
  private failing: ((error: unknown) => void)[] = [];
  private announcing: Promise<void> | null = null;

  constructor(
    private readonly db: UntypedDb,
    /** This process (its lease owner): the key of its row in `projection_heads`. */
    private readonly owner: string,
  ) {}

  /**
   * Makes it known that the events after `from` (the generation's row checkpoint) up to `to` hold nothing for
   * the consumer, without touching its row: every consumer of this process that a page left idle goes into one
   * upsert of the process's `projection_heads` row. Each update of a row leaves a dead version that a transaction
   * held open anywhere in the database keeps, and every later read or update of the row walks them: with fifteen
   * idle consumers moving their own rows at every page, 26 s of a stranger's open transaction had grown
   * `projection_generations` to 772 pages for 24 rows, a move of thirteen of them took 4 ms and more, a read of
   * the checkpoints 5 ms (the live-lag bench). Readers take the claim (`effectiveCheckpoint`).
   */
  announce(name: string, generation: number, from: Position | null, to: Position | null): Promise<void> {
    this.heads.set(headKey(name, generation), [from, to]);
    return new Promise((resolve, reject) => {
      this.waiting.push(resolve);
      this.failing.push(reject);
      this.announcing ??= Promise.resolve().then(() => this.flushHeads());
    });
  }

  /** The generation's row moved: its claim is spent (and would no longer count). */
  forget(name: string, generation: number): void {
    this.heads.delete(headKey(name, generation));
  }

  private async flushHeads(): Promise<void> {
    while (this.waiting.length > 0) {
      const [waiting, failing] = [this.waiting, this.failing];
      [this.waiting, this.failing] = [[], []];
      try {
        await sql`${sql.raw(SHORT_STATEMENT)}
          insert into projection_heads (owner, moves) values (${this.owner}, ${JSON.stringify(Object.fromEntries(this.heads))}::jsonb)
          on conflict (owner) do update set moves = excluded.moves, updated_at = now()`.execute(this.db);
        for (const done of waiting) done();
      } catch (error) {
        for (const failed of failing) failed(error);
      }
    }
    this.announcing = null;
  }

  /**
   * Deletes this process's row when none of its claims counts any longer (each generation's row has moved on),
   * and such rows of processes gone for a minute: a claim that still counts stays, or a reader would go back.
   */
  async tidy(): Promise<void> {
    await sql`
      delete from projection_heads h
      where (h.owner = ${this.owner} or h.updated_at < now() - interval '1 minute')
        and not exists (
          select 1 from jsonb_each(h.moves) m join projection_generations g on m.key = g.name || ':' || g.generation
          where g.status <> 'retired' and (m.value ->> 0) is not distinct from g.checkpoint)`.execute(this.db);
  }

  move(name: string, generation: number, from: Position | null, to: Position | null): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ name, generation, from, to, done: (moved) => (moved ? resolve() : reject(new StaleCheckpoint())), failed: reject });
      this.flushing ??= Promise.resolve().then(() => this.flush());
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const moves = this.pending;
      this.pending = [];
      try {
        const moved = await sql<{ name: string; generation: number }>`${sql.raw(SHORT_STATEMENT)}
          update projection_generations g set checkpoint = m.to_checkpoint, updated_at = now(), last_error = null
          from unnest(${moves.map((m) => m.name)}::text[], ${moves.map((m) => m.generation)}::int[],
                      ${moves.map((m) => m.from)}::text[], ${moves.map((m) => m.to)}::text[]) as m(name, generation, from_checkpoint, to_checkpoint)
          where g.name = m.name and g.generation = m.generation and g.status <> 'retired'
            and g.checkpoint is not distinct from m.from_checkpoint
          returning g.name, g.generation`.execute(this.db);
        const done = new Set(moved.rows.map((row) => `${row.name}:${row.generation}`));
        for (const move of moves) move.done(done.has(`${move.name}:${move.generation}`));
      } catch (error) {
        for (const move of moves) move.failed(error);
      }
    }
    this.flushing = null;
  }
}

/** A generation's key in a `projection_heads` row, as `effectiveCheckpoint` looks it up. */
function headKey(name: string, generation: number): string {
  return `${name}:${generation}`;
}

export interface WorkerDependencies {
  database: Database;
  store: EventStore;
  log: SharedLog;
  leases: LeaseKeeper;
  moves: CheckpointMoves;
  /** At most so many batches at once in the process, so the projections leave the pool to the API. */
  limiter: Slots;
  /** The period of live batches, the process's (see `LivePacing`). */
  pacing: LivePacing;
  logger: Logger;
  options: WorkerOptions;
}

/**
 * Drives one generation of one consumer: takes pages from the process's shared log, hands the consumer the
 * events it handles, and commits its writes with the checkpoint (compare-and-set, so a rival worker blocks,
 * then loses). A batch that fails is applied again one event at a time to find the poison event and park it.
 * Transient database errors back off and resume; nothing here ends the process.
 */
export class GenerationWorker {
  private done!: () => void;
  readonly finished = new Promise<void>((resolve) => (this.done = resolve));
  private readonly schema: string;
  private readonly log: Logger;
  private readonly reports: CommittedCheckpoints;
  /** Where this worker stands; undefined until read from the generation's row (again after any trouble). */
  private checkpoint: Position | null | undefined;
  /**
   * What the generation's row holds, as this worker last wrote or read it. A live consumer that finds nothing
   * for it in a page moves on in memory and announces where it stands (`CheckpointMoves.announce`) at most every
   * `MOVE_INTERVAL_MS` and whenever it reaches the head; its row follows at most every `ROW_MOVE_INTERVAL_MS`.
   * Every update of a checkpoint row leaves a dead row version behind, which a transaction held open anywhere in
   * the database keeps from being pruned, so twenty consumers writing one per page made every later update and
   * read of those rows slower, until the projections fell behind for good (the live-lag bench: lag growing by a
   * second a second after 20 s of a stranger's open transaction).
   */
  private persisted: Position | null = null;
  private persistedAt = 0;
  /** Where readers see this generation: its row's checkpoint, or further on what this worker announced. */
  private announced: Position | null = null;
  private announcedAt = 0;
  private building = false;
  /** The generation is building with its `BuildStaging` tables in place (until `relogBuild` folds them). */
  private staging = false;
  /** When this worker last started a live batch that held events for it (`Date.now()`). */
  private lastBatchAt = 0;
  /** The consumer's finer filter, this worker's own (loaded with the checkpoint); null when it has none. */
  private readonly interest: ConsumerInterest | null;

  constructor(
    private readonly deps: WorkerDependencies,
    readonly consumer: Consumer,
    readonly generation: number,
  ) {
    this.schema = schemaOf(consumer.name, generation);
    this.log = deps.logger.child({ projection: consumer.name, generation });
    this.reports = committedCheckpointsOf(deps.database.db);
    this.interest = consumer.interest?.() ?? null;
  }

  private get db(): UntypedDb {
    return this.deps.database.db;
  }

  async run(stopped: AbortSignal): Promise<void> {
    let failures = 0;
    try {
      while (!stopped.aborted) {
        try {
          if (!(await this.deps.leases.waitFor(this.consumer.name, this.generation, stopped))) return;
          if (this.checkpoint === undefined && !(await this.load())) return;
          await this.step(stopped);
          failures = 0;
        } catch (error) {
          if (stopped.aborted) return;
          this.checkpoint = undefined;
          if (error instanceof StaleCheckpoint) {
            // Another worker moved this generation on: read where it stands and go on from there.
            await sleep(backoff(failures++, 1000), stopped);
            continue;
          }
          failures++;
          if (isTransient(error)) this.log.warn({ err: error, failures }, 'projection worker: database unavailable; backing off');
          else {
            this.log.error({ err: error, failures }, 'projection worker failed; retrying');
            await this.recordError(error);
          }
          await sleep(backoff(failures), stopped);
        }
      }
    } finally {
      this.deps.log.leave(this.reader);
      this.done();
    }
  }

  /** Reads the generation's row; false when this worker has nothing more to do (retired, gone, other version). */
  private async load(): Promise<boolean> {
    let row = await generationRow(this.db, this.consumer.name, this.generation);
    if (!row || row.status === 'retired' || row.version !== this.consumer.version) return false;
    if (row.status === 'building' && (await restartWipedBuild(this.db, this.consumer.name, this.generation))) {
      this.log.warn('a server crash emptied this rebuild’s unlogged tables; rebuilding from the start of the log');
      row = await generationRow(this.db, this.consumer.name, this.generation);
      if (!row) return false;
    }
    // What the consumer keeps to filter with, read after the checkpoint: its tables hold at least every change
    // up to it (a rival's later batches only add), and `wants` learns from every event past it.
    await this.interest?.load(this.db.withSchema(this.schema));
    this.checkpoint = row.checkpoint;
    this.persisted = row.checkpoint;
    this.persistedAt = Date.now();
    this.announced = row.checkpoint;
    this.announcedAt = this.persistedAt;
    this.building = row.status === 'building';
    this.staging = this.building && (await stagingInPlace(this.db, this.consumer.name, this.generation, this.consumer.staging));
    return true;
  }

  /** A building generation's batch: at most so many pages, and so many of its own events. */
  private get batchPages(): number {
    return this.deps.options.buildingBatchPages ?? 4;
  }

  private get batchEvents(): number {
    return this.deps.options.buildingBatchEvents ?? 20_000;
  }

  /** This worker as a reader of the shared log. */
  private get reader(): LogReader {
    return { id: `${this.consumer.name}:${this.generation}`, building: this.building };
  }

  /**
   * Under a steady stream of appends, a live consumer applies at most one batch per tick of the process's
   * period (`LivePacing`, or `liveBatchIntervalMs` when set): one that applied a batch within the last period
   * waits for the next tick, on a clock every worker of the process shares, so they read the page that gathered
   * meanwhile together and each applies it as one batch. Without it each consumer applied a batch per group
   * commit of the API (a handful of events), three statements or more each, and role `all` at 16 connections
   * spent most of its time writing to PostgreSQL's sockets. A consumer that was idle (its last batch longer
   * ago) reads at once: a lone write waits for nothing. Consumers a page held nothing for keep reading at each
   * wake-up: on the tick too, they read a quarter as often (541 reads against 2,297 in role `all` at 16
   * connections) but the live-lag bench's p50 went from 45-47 ms to 62-64 (their announcements waited for the
   * tick), for no gain in throughput. So they do only in a busy process (`LivePacing.busy`), where one log read
   * a tick for all of them instead of one at every wake-up took role `all` at 16 connections from 0.71-0.73
   * statements a request to 0.57-0.58.
   */
  private async pace(stopped: AbortSignal): Promise<void> {
    const fixed = this.deps.options.liveBatchIntervalMs;
    const interval = fixed ?? this.deps.pacing.periodMs();
    const now = Date.now();
    if (interval <= 0) return;
    if (now - this.lastBatchAt >= interval && !(fixed === undefined && this.deps.pacing.busy)) return;
    await sleep(interval - (now % interval), stopped);
  }

  private async step(stopped: AbortSignal): Promise<void> {
    if (!this.building) await this.pace(stopped);
    const from = this.checkpoint ?? null;
    const stored = this.persisted;
    const page = await this.deps.log.page(from, this.reader);
    if (page.checkpoint === from) {
      if (this.building) await this.trySwap(from, true);
      // At the head, readers learn where it stands before the worker sleeps.
      else await this.standAt(from);
      await this.sleepUnlessWoken(page.versionAtRead, stopped);
      return;
    }
    const events = this.handledIn(page, []);
    let last = this.building ? await this.gatherBuilding(page, events) : page;
    // The next batch is read while this one is applied.
    if (this.building && !last.isEnd) this.deps.log.prefetch(last.checkpoint, this.batchPages, this.reader);
    if (events.length === 0) {
      if (this.building) await this.persist(stored, last.checkpoint);
      else if (Date.now() - this.announcedAt >= MOVE_INTERVAL_MS) await this.standAt(last.checkpoint);
    } else {
      if (!this.building) this.lastBatchAt = Date.now();
      await this.deps.limiter.run(async () => {
        // Under load a live consumer waits for its turn; the pages others read meanwhile join this batch (one
        // transaction, or a process manager's slices, instead of one per page: what lets twenty consumers keep
        // up with the head). Such a batch is traced as the child of its first event's request, linking the others.
        if (!this.building) last = this.gatherCached(last, events);
        // From where the row stands: the pages between it and `from` held nothing for this consumer.
        await this.applyPage(events, stored, last.checkpoint);
        this.committed(last.checkpoint);
      });
    }
    this.checkpoint = last.checkpoint;
    if (this.building) await this.trySwap(last.checkpoint, last.isEnd);
    else if (last.isEnd && this.deps.store.appendVersion() === last.versionAtRead) {
      // The page reached the head and no wake-up came since it was read: the read that would find the head
      // again (empty) is skipped, as the wait after it would follow anyway. One that comes while readers learn
      // where the worker stands still counts.
      await this.standAt(last.checkpoint);
      await this.sleepUnlessWoken(last.versionAtRead, stopped);
    }
  }

  /** Sleeps until the next wake-up or poll, unless one came since `versionAtRead` (the store's append version then). */
  private async sleepUnlessWoken(versionAtRead: number, stopped: AbortSignal): Promise<void> {
    if (this.deps.store.appendVersion() === versionAtRead) await this.deps.store.waitForAppends(this.deps.options.idlePollMs ?? 1000, stopped);
  }

  /** Moves the row's checkpoint from where it stands to `to` (compare-and-set, with other consumers' moves). */
  private async persist(stored: Position | null, to: Position | null): Promise<void> {
    await this.deps.moves.move(this.consumer.name, this.generation, stored, to);
    this.committed(to);
  }

  /**
   * A live consumer with nothing to apply up to `to`: its row moves there if it has not moved for
   * `ROW_MOVE_INTERVAL_MS`, else the process announces it (one row for all its consumers).
   */
  private async standAt(to: Position | null): Promise<void> {
    if (this.persisted !== to && Date.now() - this.persistedAt >= ROW_MOVE_INTERVAL_MS) await this.persist(this.persisted, to);
    else if (this.announced !== to) {
      await this.deps.moves.announce(this.consumer.name, this.generation, this.persisted, to);
      this.reached(to);
    }
  }

  /** The row now holds `checkpoint`: reported to read-your-writes waits in this process and to `onCheckpoint`. */
  private committed(checkpoint: Position | null): void {
    this.persisted = checkpoint;
    this.persistedAt = Date.now();
    this.deps.moves.forget(this.consumer.name, this.generation);
    this.reached(checkpoint);
  }

  /** Readers see the generation at `checkpoint` from now on. */
  private reached(checkpoint: Position | null): void {
    this.announced = checkpoint;
    this.announcedAt = Date.now();
    this.reports.report(this.consumer.name, checkpoint);
    this.deps.options.onCheckpoint?.(this.consumer.name, this.generation, checkpoint);
  }

  /**
   * A building generation takes the next pages too, up to `buildingBatchPages` or `buildingBatchEvents` of its
   * own events, and applies them as one batch: a rebuild then writes each row it folds once per batch instead
   * of once per page (a counter touched in every page is written a quarter as often) and commits a quarter as
   * many transactions. Nobody reads a building generation, so the longer batch holds nothing back. Appends the
   * events it handles to `events`; returns the last page taken.
   */
  private async gatherBuilding(first: LogPage, events: RecordedEvent[]): Promise<LogPage> {
    const maxPages = this.batchPages;
    const maxEvents = this.batchEvents;
    let last = first;
    for (let pages = 1; pages < maxPages && !last.isEnd && events.length < maxEvents; pages++) {
      const next = await this.deps.log.page(last.checkpoint, this.reader);
      if (next.checkpoint === last.checkpoint) break;
      this.handledIn(next, events);
      last = next;
    }
    return last;
  }

  /** Appends the page's events this consumer handles to `events`, and returns it. */
  private handledIn(page: LogPage, events: RecordedEvent[]): RecordedEvent[] {
    // Twenty consumers run this over every event of a rebuild: the set is read once, not once per event.
    const handles = this.consumer.canHandle;
    const interest = this.interest;
    for (const event of page.events) if (handles.has(event.type) && (interest === null || interest.wants(event))) events.push(event);
    return events;
  }

  /** Takes the pages after `last` that are in memory already, up to the building batch's bound; returns the last one taken. */
  private gatherCached(last: LogPage, events: RecordedEvent[]): LogPage {
    const maxEvents = this.batchEvents;
    for (let next = this.deps.log.cachedPage(last.checkpoint); next && next.checkpoint !== last.checkpoint && events.length < maxEvents;) {
      this.handledIn(next, events);
      last = next;
      next = this.deps.log.cachedPage(last.checkpoint);
    }
    return last;
  }

  /** A page's events for this consumer, in one transaction (a process manager's in slices, each with its checkpoint). */
  private async applyPage(events: RecordedEvent[], from: Position | null, to: Position | null): Promise<void> {
    const slice = this.consumer.kind === 'process-manager' ? (this.deps.options.processManagerBatch ?? PROCESS_MANAGER_BATCH) : events.length;
    let checkpoint = from;
    for (let start = 0; start < events.length; start += slice) {
      const part = events.slice(start, start + slice);
      const end = start + slice >= events.length ? to : part[part.length - 1]!.position;
      await traceBatch({ consumer: this.consumer.name, events: part, building: this.building }, () => this.applyBatch(part, checkpoint, end));
      checkpoint = end;
    }
  }

  private async applyBatch(events: RecordedEvent[], from: Position | null, to: Position | null): Promise<void> {
    try {
      await this.transaction(from, to, (trx, context) => this.consumer.apply(trx.withSchema(this.schema), events, context), events);
    } catch (error) {
      if (error instanceof StaleCheckpoint || isTransient(error)) throw error;
      this.log.warn({ err: error }, 'batch failed; applying its events one by one');
      await this.applyOneByOne(events, from, to);
    }
  }

  /**
   * One transaction. A read model's: the checkpoint's compare-and-set first (a rival blocks here, then loses),
   * then the work; it commits without waiting for the disk (its rows and checkpoint are lost or kept together,
   * and re-applied). A process manager's on the PostgreSQL store: see `claimForAppends`.
   */
  private async transaction(
    from: Position | null,
    to: Position | null,
    work: (trx: UntypedDb, context: BatchContext) => Promise<void>,
    events: RecordedEvent[],
  ): Promise<void> {
    const store = this.deps.store;
    const announce = this.consumer.kind === 'process-manager' && store instanceof PostgresEventStore ? store.announcement : null;
    const appended: Appended = { any: false, until: null };
    await this.db.connection().execute(async (trx) => {
      try {
        if (announce) await this.claimForAppends(trx, from, announce);
        else await this.advance(trx, from, to, { begin: true, relaxedCommit: this.consumer.kind === 'projection' });
        await work(trx, this.contextFor(trx, appended));
        await this.deps.options.onBatchApplied?.(this.consumer.name, this.generation, { events, checkpoint: to, caughtUp: false });
        if (announce) await this.advanceAndCommit(trx, from, to, appended.until);
        else await sql`commit`.execute(trx);
        // Its id held every reader's horizon; with no append there was no NOTIFY to say it ended.
        if (announce && !appended.any && store instanceof PostgresEventStore) store.horizonReleased();
      } catch (error) {
        // The session goes back to the pool outside any transaction (after a failed COMMIT there is none).
        await sql`rollback`.execute(trx).catch(() => undefined);
        throw error;
      }
    });
  }

  private contextFor(trx: UntypedDb, appended: Appended = { any: false, until: null }): BatchContext {
    const store = this.deps.store;
    // One NOTIFY per transaction is enough to wake the subscribers at commit.
    let notified = false;
    return {
      staging: this.staging,
      append: async (appends) => {
        appended.any = true;
        if (!(store instanceof PostgresEventStore)) return store.appendMultiple(appends);
        // A process manager's transactions announce it first thing (`transaction`, the swap's `beforeWrites`).
        const results = await store.appendInTransaction(trx, appends, { notify: !notified, announced: this.consumer.kind === 'process-manager' });
        notified = true;
        for (const result of results) if (!isAtOrAfter(appended.until, result.position)) appended.until = result.position;
        return results;
      },
      schedule: (job) => scheduleJob(trx, job),
    };
  }

  private async applyOneByOne(events: RecordedEvent[], from: Position | null, to: Position | null): Promise<void> {
    const policy = this.consumer.onFailure ?? { attempts: 3, then: 'park' as const };
    let checkpoint = from;
    for (const event of events) {
      let lastError: unknown;
      for (let attempt = 1; attempt <= policy.attempts; attempt++) {
        try {
          await this.transaction(checkpoint, event.position, (trx, context) => this.consumer.apply(trx.withSchema(this.schema), [event], context), [event]);
          lastError = undefined;
          break;
        } catch (error) {
          if (error instanceof StaleCheckpoint || isTransient(error)) throw error;
          lastError = error;
          await sleep(25 * attempt);
        }
      }
      if (lastError !== undefined) {
        if (policy.then === 'stop') throw lastError instanceof Error ? lastError : new Error('The handler failed', { cause: lastError });
        await this.park(event, checkpoint, lastError, policy.attempts);
      }
      checkpoint = event.position;
    }
    if (checkpoint !== to) await this.db.transaction().execute((trx) => this.advance(trx, checkpoint, to));
  }

  private async park(event: RecordedEvent, from: Position | null, error: unknown, attempts: number): Promise<void> {
    this.log.error({ err: error, eventId: event.id, eventType: event.type, stream: event.stream }, 'event parked after repeated failures');
    await this.db.transaction().execute(async (trx) => {
      await this.advance(trx, from, event.position);
      await runtimeDb(trx)
        .insertInto('projection_parked')
        .values({
          name: this.consumer.name,
          generation: this.generation,
          event_id: event.id,
          event_position: event.position,
          stream: event.stream,
          event_type: event.type,
          error: error instanceof Error ? error.message : String(error),
          attempts,
        })
        .execute();
    });
  }

  /**
   * A process manager's batch begins without writing: its transaction gets an id, which holds back every reader's
   * horizon until it commits, at its first write, not while it reads what it decides on. With the checkpoint's
   * update first, some batch of the engine's (ten round trips) held the horizon nearly all the time under a
   * steady load, and every consumer waited for it: in the live-lag bench at 95 writes/s, a write reached the
   * shared log after p50 19-26 ms, p99 84-108, against 13-14 and 60-68 now. One round trip, three statements
   * (each with a snapshot of its own): BEGIN; this consumer's exclusive lock (a rival waits here) and the
   * appender announcement (`PostgresEventStore.announcement`, taken before any write as it must be; it needs no
   * id); the checkpoint still at `from`, read after the lock (a rival that waited finds it moved and loses). The
   * checkpoint's compare-and-set follows the work, in the same transaction.
   */
  private async claimForAppends(trx: UntypedDb, from: Position | null, announce: RawBuilder<unknown>): Promise<void> {
    const result = await sql<{ held: number }>`/* engage:checkpoint */ begin;
      select pg_advisory_xact_lock(${sql.lit(CONSUMER_LOCK_CLASS)}, hashtext(${sql.lit(`${this.consumer.name}:${this.generation}`)})), ${announce};
      select 1 as held from projection_generations
      where name = ${sql.lit(this.consumer.name)} and generation = ${sql.lit(this.generation)} and status <> 'retired'
        and checkpoint is not distinct from ${sql.lit(from)}`.execute(trx);
    if (result.rows.length !== 1) throw new StaleCheckpoint();
  }

  /**
   * The checkpoint's compare-and-set. A read model's batch commits without waiting for the disk (`relaxedCommit`).
   * `begin`: BEGIN goes with it, in one round trip (one simple-protocol message of both statements, answered as
   * the update), so its values are written in as literals, which Kysely quotes: a round trip fewer for every
   * batch of every read model.
   */
  private async advance(trx: UntypedDb, from: Position | null, to: Position | null, options: { begin?: boolean; relaxedCommit?: boolean } = {}): Promise<void> {
    const { begin = false, relaxedCommit = false } = options;
    const value = (given: string | number | null) => (begin ? sql.lit(given) : sql`${given}`);
    const result = await sql`${begin ? sql`/* engage:checkpoint */ begin;` : sql``}
      update projection_generations set checkpoint = ${value(to)}, updated_at = now(), last_error = null
      ${relaxedCommit ? sql`from (select set_config('synchronous_commit', 'off', true)) as relaxed` : sql``}
      where name = ${value(this.consumer.name)} and generation = ${value(this.generation)} and status <> 'retired'
        and checkpoint is not distinct from ${value(from)}`.execute(trx);
    if (Number(result.numAffectedRows ?? 0) !== 1) throw new StaleCheckpoint();
  }

  /**
   * A process manager's checkpoint compare-and-set and its COMMIT, in one message (one round trip of its
   * batch's five, with its appends usually in one `es_append`). The values go as literals, as `advance` writes
   * them with BEGIN; a move that finds the checkpoint elsewhere fails its statement (`projection_checkpoint_moved`),
   * which ends the message before the COMMIT: the transaction is then rolled back like any failed batch.
   */
  private async advanceAndCommit(trx: UntypedDb, from: Position | null, to: Position | null, appendedUntil: Position | null): Promise<void> {
    try {
      await sql`/* engage:checkpoint */ with moved as (
          update projection_generations set checkpoint = ${sql.lit(to)}, updated_at = now(), last_error = null
            , appended_until = ${appendedUntil === null ? sql`coalesce(appended_until, '')` : sql.lit(appendedUntil)}
          where name = ${sql.lit(this.consumer.name)} and generation = ${sql.lit(this.generation)} and status <> 'retired'
            and checkpoint is not distinct from ${sql.lit(from)}
          returning 1)
        select projection_checkpoint_moved((select count(*) from moved));
        commit`.execute(trx);
    } catch (error) {
      if ((error as { code?: unknown }).code === STALE_CHECKPOINT_STATE) throw new StaleCheckpoint();
      throw error;
    }
  }

  private async trySwap(checkpoint: Position | null, caughtUp: boolean): Promise<void> {
    const readiness = await readyToSwap(this.db, this.consumer, this.generation, checkpoint, caughtUp);
    if (readiness === 'not-building') {
      this.building = false;
      return;
    }
    if (readiness === 'not-yet') return;
    const relogged = await relogBuild(this.db, this.consumer.name, this.generation, this.consumer.staging);
    // Folded and dropped, or wiped (then read again with the row): batches merge into the tables from now on.
    this.staging = false;
    if (relogged === 'wiped') {
      this.checkpoint = undefined;
      return;
    }
    const store = this.deps.store;
    const outcome = await swapIn(
      this.db,
      this.consumer,
      this.generation,
      checkpoint,
      async (trx, from, to) => {
        const gap = await store.readAll({ after: from, until: to, limit: 5000 });
        if (gap.checkpoint !== to) return false;
        await this.advance(trx, from, to);
        const events = gap.events.filter((event) => this.consumer.canHandle.has(event.type) && (this.interest?.wants(event) ?? true));
        if (events.length > 0) await this.consumer.apply(trx.withSchema(this.schema), events, this.contextFor(trx));
        this.checkpoint = to;
        this.persisted = to;
        this.announced = to;
        return true;
      },
      async (trx) => {
        if (this.consumer.kind === 'process-manager' && store instanceof PostgresEventStore) await store.announceAppender(trx);
      },
    );
    if (outcome === false) return;
    this.building = false;
    this.log.info({ retired: outcome.retired }, 'rebuilt generation is live');
  }

  private async recordError(error: unknown): Promise<void> {
    await runtimeDb(this.db)
      .updateTable('projection_generations')
      .set({ last_error: error instanceof Error ? error.message : String(error) })
      .where('name', '=', this.consumer.name)
      .where('generation', '=', this.generation)
      .execute()
      .catch(() => undefined);
  }
}
