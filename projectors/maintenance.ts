import { sql } from 'kysely';
import type { UntypedDb } from '../infra/database.ts';
import type { EventStore, Position, RecordedEvent } from '../infra/event-store/port.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { HttpError, conflict, notFound } from '../infra/http/errors.ts';
import type { Logger } from '../infra/logging.ts';
import type { Consumer as Projection, BatchContext as ProjectionContext } from './runtime/consumer.ts';
import { scheduleJob } from '../infra/jobs.ts';
import { effectiveCheckpoint, runtimeDb, schemaOf, startRebuild, type GenerationRow } from './runtime/index.ts';

/**
 * What an operator does to projections besides reading their status (projectors/runtime.ts): start or
 * resume a rebuild and follow it, deal with parked events, and the lag that `/readyz` checks.
 */

export interface RebuildStarted {
  name: string;
  generation: number;
  /** True when a building generation already existed: the rebuild goes on from its checkpoint. */
  resumed: boolean;
  checkpoint: Position | null;
}

/**
 * Starts a blue/green rebuild, or finds the one under way: a `building` generation survives an
 * interruption with its checkpoint, so asking again continues it instead of starting over.
 */
export async function requestRebuild(db: UntypedDb, projection: Projection): Promise<RebuildStarted> {
  const existing = await generationRows(db, projection.name, ['building']);
  if (existing[0] && existing[0].version !== projection.version) {
    throw conflict(
      `${projection.name}: generation ${existing[0].generation} is being built at version ${existing[0].version}, this code is at ${projection.version}; let the processes running that version finish it`,
    );
  }
  const building = existing[0] ?? (await startRebuild(db, projection));
  return { name: projection.name, generation: building.generation, resumed: existing.length > 0, checkpoint: building.checkpoint };
}

/** Where a rebuilding generation stands. */
export interface RebuildStatus {
  name: string;
  generation: number;
  /** `gone` when the generation no longer exists (dropped by another rebuild). */
  status: GenerationRow['status'] | 'gone';
  checkpoint: Position | null;
  lastError: string | null;
}

/** Where a rebuilding generation stands, in events of the log. */
export interface RebuildProgress extends RebuildStatus {
  /** Events of the log at or before the generation's checkpoint. */
  processed: number;
  /** Events in the log now. */
  total: number;
}

/**
 * Counts of the log up to a visible position, per store: such a count never changes (nothing lands at or
 * before a position once it is visible), so each reading of a rebuild's progress counts only the events
 * since the nearest position counted before, not the whole log again (a count of the bench's 1M-event log
 * took 0.35 s of the server, and a rebuild with progress bars asked for one every 2 s, per checkpoint).
 */
const countsUpTo = new WeakMap<EventStore, Map<Position, number>>();
/** Positions remembered per store: a rebuild's readings need a few dozen. */
const COUNTS_KEPT = 1000;

/** Visible events at or before `position` (0 for the start of the log). */
export async function countUpTo(store: EventStore, position: Position | null): Promise<number> {
  if (position === null) return 0;
  let known = countsUpTo.get(store);
  if (!known) countsUpTo.set(store, (known = new Map<Position, number>()));
  const hit = known.get(position);
  if (hit !== undefined) return hit;
  let base: Position | null = null;
  let counted = 0;
  for (const [at, count] of known) {
    if (at < position && (base === null || at > base)) {
      base = at;
      counted = count;
    }
  }
  const count = counted + (await store.countBetween(base, position));
  known.set(position, count);
  if (known.size > COUNTS_KEPT) known.delete(known.keys().next().value!);
  return count;
}

/** Where each rebuilding generation stands: one read of their rows, no count of the log. */
export async function rebuildStatus(db: UntypedDb, targets: { name: string; generation: number }[]): Promise<RebuildStatus[]> {
  const rows = await runtimeDb(db)
    .selectFrom('projection_generations')
    .select(['name', 'generation', 'status', 'checkpoint', 'last_error'])
    .where((eb) => eb.or(targets.map((target) => eb.and([eb('name', '=', target.name), eb('generation', '=', target.generation)]))))
    .execute();
  return targets.map((target) => {
    const row = rows.find((candidate) => candidate.name === target.name && candidate.generation === target.generation);
    return {
      name: target.name,
      generation: target.generation,
      status: row?.status ?? 'gone',
      checkpoint: row?.checkpoint ?? null,
      lastError: row?.last_error ?? null,
    };
  });
}

/**
 * Where each rebuilding generation stands, in events of the log (its checkpoint moves past events it skips):
 * counted from the nearest position counted before (`countUpTo`), the log's size up to its head.
 */
export async function rebuildProgress(db: UntypedDb, store: EventStore, targets: { name: string; generation: number }[]): Promise<RebuildProgress[]> {
  const statuses = await rebuildStatus(db, targets);
  // One count at a time, checkpoints in log order (each from the one before): twenty at once would take the
  // pool from the rebuild itself.
  const checkpoints = [...new Set(statuses.map((status) => status.checkpoint).filter((checkpoint) => checkpoint !== null))].sort();
  const processedAt = new Map<Position | null, number>([[null, 0]]);
  for (const checkpoint of checkpoints) processedAt.set(checkpoint, await countUpTo(store, checkpoint));
  const head = await store.head();
  const total = head ? await countUpTo(store, head.position) : 0;
  return statuses.map((status) => ({ ...status, processed: status.status === 'gone' ? 0 : Math.min(total, processedAt.get(status.checkpoint)!), total }));
}

export interface ParkedEvent {
  id: number;
  name: string;
  generation: number;
  status: GenerationRow['status'] | 'gone';
  stream: string;
  eventType: string;
  eventId: string;
  position: Position;
  attempts: number;
  parkedAt: string;
  error: string;
}

/** Parked events of generations that still exist, oldest first. */
export async function listParked(db: UntypedDb, options: { name?: string; limit?: number } = {}): Promise<ParkedEvent[]> {
  let query = runtimeDb(db)
    .selectFrom('projection_parked as p')
    .leftJoin('projection_generations as g', (join) => join.onRef('g.name', '=', 'p.name').onRef('g.generation', '=', 'p.generation'))
    .select([
      'p.id',
      'p.name',
      'p.generation',
      'g.status',
      'p.stream',
      'p.event_type',
      'p.event_id',
      'p.event_position',
      'p.attempts',
      'p.parked_at',
      'p.error',
    ])
    .where((eb) => eb.or([eb('g.status', 'is', null), eb('g.status', '<>', 'retired')]))
    .orderBy('p.id')
    .limit(options.limit ?? 1000);
  if (options.name) query = query.where('p.name', '=', options.name);
  const rows = await query.execute();
  return rows.map((row) => ({
    id: Number(row.id),
    name: row.name,
    generation: row.generation,
    status: row.status ?? 'gone',
    stream: row.stream,
    eventType: row.event_type,
    eventId: row.event_id,
    position: row.event_position,
    attempts: row.attempts,
    parkedAt: new Date(row.parked_at).toISOString(),
    error: row.error,
  }));
}

export interface RetryOutcome {
  id: number;
  name: string;
  generation: number;
  outcome: 'applied' | 'failed';
  error?: string;
}

/**
 * Applies a parked event to its generation again (the handler may have been fixed, or the data it needed
 * may exist now). Success removes it from the parked list in the same transaction; failure keeps it there
 * with the new error and one more attempt. The event is applied out of order, after the events the
 * projection went on with: that is what parking chose, and what the handler has to tolerate.
 */
export async function retryParked(db: UntypedDb, store: EventStore, projections: readonly Projection[], id: number, logger?: Logger): Promise<RetryOutcome> {
  const parked = await parkedRow(db, id);
  const projection = projections.find((p) => p.name === parked.name);
  if (!projection) throw conflict(`Parked event ${id} belongs to ${parked.name}, which this code does not know; skip it instead`);
  const [generation] = await generationRows(db, parked.name, ['live', 'building'], parked.generation);
  if (!generation) throw conflict(`Parked event ${id} belongs to generation ${parked.generation} of ${parked.name}, which is retired; skip it instead`);
  if (generation.version !== projection.version) {
    throw conflict(`Generation ${generation.generation} of ${parked.name} is at version ${generation.version}, this code at ${projection.version}`);
  }
  const event = await findEvent(store, parked.stream, parked.event_id);
  if (!event) throw conflict(`Event ${parked.event_id} is no longer in ${parked.stream}`);
  try {
    await db.transaction().execute(async (trx) => {
      // A process manager appends: its transaction announces itself before its first write.
      if (projection.kind === 'process-manager' && store instanceof PostgresEventStore) await store.announceAppender(trx);
      await projection.apply(trx.withSchema(schemaOf(parked.name, parked.generation)), [event], contextFor(trx, store));
      const removed = await runtimeDb(trx).deleteFrom('projection_parked').where('id', '=', String(id)).executeTakeFirst();
      if (Number(removed.numDeletedRows) !== 1) throw conflict(`Parked event ${id} was resolved meanwhile`);
    });
    logger?.info({ parkedId: id, projection: parked.name, eventId: parked.event_id }, 'parked event applied on retry');
    return { id, name: parked.name, generation: parked.generation, outcome: 'applied' };
  } catch (error) {
    if (error instanceof HttpError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    await runtimeDb(db)
      .updateTable('projection_parked')
      .set({ attempts: sql`attempts + 1`, error: message })
      .where('id', '=', String(id))
      .execute();
    logger?.warn({ parkedId: id, projection: parked.name, eventId: parked.event_id, err: error }, 'parked event failed again on retry');
    return { id, name: parked.name, generation: parked.generation, outcome: 'failed', error: message };
  }
}

/** Gives up on a parked event: it leaves the list; the projection stays past it (the event stays in the log). */
export async function skipParked(db: UntypedDb, id: number, logger?: Logger) {
  const parked = await parkedRow(db, id);
  const removed = await runtimeDb(db).deleteFrom('projection_parked').where('id', '=', String(id)).executeTakeFirst();
  if (Number(removed.numDeletedRows) !== 1) throw notFound(`No parked event ${id}`);
  logger?.warn({ parkedId: id, projection: parked.name, eventId: parked.event_id, stream: parked.stream }, 'parked event skipped');
  return {
    id,
    name: parked.name,
    generation: parked.generation,
    stream: parked.stream,
    eventType: parked.event_type,
    eventId: parked.event_id,
    position: parked.event_position,
    outcome: 'skipped' as const,
  };
}

/**
 * How far each live projection is behind, in seconds: the age of the oldest event it has not applied
 * (one indexed read per projection, no counting).
 */
export async function liveLag(db: UntypedDb, store: EventStore, now = Date.now()): Promise<{ name: string; secondsBehind: number }[]> {
  const rows = await runtimeDb(db)
    .selectFrom('projection_generations as g')
    .select(['g.name', effectiveCheckpoint.as('checkpoint')])
    .where('g.status', '=', 'live')
    .orderBy('g.name')
    .execute();
  // Projections fed by one shared reader mostly stand at the same checkpoint: one read per distinct one.
  const oldestAfter = new Map<string | null, Promise<Date | undefined>>();
  for (const row of rows) {
    if (!oldestAfter.has(row.checkpoint)) {
      oldestAfter.set(
        row.checkpoint,
        store.readAll({ after: row.checkpoint, limit: 1 }).then((page) => page.events[0]?.createdAt),
      );
    }
  }
  return Promise.all(
    rows.map(async (row) => {
      const next = await oldestAfter.get(row.checkpoint);
      return { name: row.name, secondsBehind: next ? Math.max(0, (now - next.getTime()) / 1000) : 0 };
    }),
  );
}

async function parkedRow(db: UntypedDb, id: number) {
  const row = await runtimeDb(db).selectFrom('projection_parked').selectAll().where('id', '=', String(id)).executeTakeFirst();
  if (!row) throw notFound(`No parked event ${id}`);
  return row;
}

async function generationRows(db: UntypedDb, name: string, statuses: GenerationRow['status'][], generation?: number): Promise<GenerationRow[]> {
  let query = runtimeDb(db)
    .selectFrom('projection_generations')
    .select(['name', 'generation', 'version', 'status', 'checkpoint', 'last_error', 'applied_migrations', 'exposed_tables'])
    .where('name', '=', name)
    .where('status', 'in', statuses);
  if (generation !== undefined) query = query.where('generation', '=', generation);
  return query.execute();
}

/** The stream read forwards in pages until the event shows up: bounded memory however long the stream. */
async function findEvent(store: EventStore, stream: string, eventId: string): Promise<RecordedEvent | undefined> {
  const page = 500;
  for (let from = 0n; ; from += BigInt(page)) {
    const events = await store.readStream(stream, { from, limit: page });
    const found = events.find((event) => event.id.toLowerCase() === eventId.toLowerCase());
    if (found) return found;
    if (events.length < page) return undefined;
  }
}

/** As the runtime does for a batch: with the PostgreSQL store, appends join the transaction. */
function contextFor(trx: UntypedDb, store: EventStore): ProjectionContext {
  return {
    // Merged into the tables as a live batch is, whatever the generation: a fold merges what was staged the same way.
    staging: false,
    append: (appends) => (store instanceof PostgresEventStore ? store.appendInTransaction(trx, appends) : store.appendMultiple(appends)),
    schedule: (job) => scheduleJob(trx, job),
  };
}
