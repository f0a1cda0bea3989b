import { sql } from 'kysely';
import { SHORT_STATEMENT, type UntypedDb } from '../../infra/database.ts';
import type { EventStore, Position } from '../../infra/event-store/port.ts';
import { committedCheckpointsOf } from './committed-checkpoints.ts';
import { effectiveCheckpoint, runtimeDb, type GenerationRow } from './generations.ts';

export interface ProjectionStatus {
  name: string;
  generation: number;
  version: number;
  status: GenerationRow['status'];
  checkpoint: Position | null;
  eventsBehind: number;
  secondsBehind: number;
  parked: number;
  leaseOwner: string | null;
  lastError: string | null;
}

/** Where each live or building generation stands: checkpoint, events and seconds behind, parked events, lease. */
export async function projectionStatus(db: UntypedDb, store: EventStore): Promise<ProjectionStatus[]> {
  const runtime = runtimeDb(db);
  const rows = await runtime
    .selectFrom('projection_generations as g')
    .leftJoin('projection_leases as l', (join) => join.onRef('l.name', '=', 'g.name').onRef('l.generation', '=', 'g.generation'))
    .select(['g.name', 'g.generation', 'g.version', 'g.status', effectiveCheckpoint.as('checkpoint'), 'g.last_error', 'l.owner', 'l.until'])
    .where('g.status', '<>', 'retired')
    .orderBy('g.name')
    .orderBy('g.generation')
    .execute();
  const parked = await runtime
    .selectFrom('projection_parked')
    .select(['name', 'generation', (eb) => eb.fn.countAll<string>().as('count')])
    .groupBy(['name', 'generation'])
    .execute();
  const now = Date.now();
  // Generations fed by one shared reader mostly stand at the same checkpoint: count and read once per distinct one.
  const behind = new Map<string | null, Promise<{ eventsBehind: number; next: Date | undefined }>>();
  const lagAfter = (checkpoint: string | null) => {
    let lag = behind.get(checkpoint);
    if (!lag) {
      lag = store.countAfter(checkpoint).then(async (eventsBehind) => ({
        eventsBehind,
        next: eventsBehind > 0 ? (await store.readAll({ after: checkpoint, limit: 1 })).events[0]?.createdAt : undefined,
      }));
      behind.set(checkpoint, lag);
    }
    return lag;
  };
  return Promise.all(
    rows.map(async (row) => {
      const { eventsBehind, next } = await lagAfter(row.checkpoint);
      const leased = row.owner !== null && row.until !== null && new Date(row.until).getTime() > now;
      return {
        name: row.name,
        generation: row.generation,
        version: row.version,
        status: row.status,
        checkpoint: row.checkpoint,
        eventsBehind,
        secondsBehind: next ? Math.max(0, (now - next.getTime()) / 1000) : 0,
        parked: Number(parked.find((p) => p.name === row.name && p.generation === row.generation)?.count ?? 0),
        leaseOwner: leased ? row.owner : null,
        lastError: row.last_error,
      };
    }),
  );
}

/** A read model whose runner in this process committed within this long is run here (`CommittedCheckpoints.reporting`). */
const REPORTING_WITHIN_MS = 1000;
/** The longest a wait sleeps between its reads of the rows when runners of this process report every read model it waits for. */
const REPORTED_PAUSE_MS = 250;

/**
 * Read-your-writes: resolves true once every named projection's live checkpoint is at or past `position`,
 * false if that takes longer than `timeoutMs`. Between its reads of the rows it sleeps 2, 4, ... 50 ms, or
 * less when a runner of this process reports those projections past `position` (`CommittedCheckpoints`); when
 * runners of this process commit every one of them, until one of their commits passes `position` (250 ms at most).
 */
export async function waitForProjections(db: UntypedDb, names: readonly string[], position: Position, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const reports = committedCheckpointsOf(db);
  // Runners of this process commit these read models and none has reported the position yet: a read of the
  // rows now would find them short of it (under a stranger's open transaction, a costly read of every dead
  // version of them), so the first read waits for the report that passes it (250 ms at most).
  if (reports.reporting(names, REPORTING_WITHIN_MS) && !reports.passed(names, position)) {
    await reports.pause(names, position, Math.min(REPORTED_PAUSE_MS, timeoutMs));
  }
  // The rows may be read just before the commit that a report then announces: read them once more at once.
  let readAgain = true;
  for (let pause = 2; ; pause = Math.min(pause * 2, 50)) {
    const { rows } = await sql<{ name: string; checkpoint: Position | null }>`${sql.raw(SHORT_STATEMENT)} /* engage:read-your-writes */
      select g.name, ${effectiveCheckpoint} as checkpoint from projection_generations g where g.status = 'live' and g.name = any(${[...names]}::text[])`.execute(
      db,
    );
    const reached = names.every((name) => {
      const checkpoint = rows.find((row) => row.name === name)?.checkpoint;
      return checkpoint != null && checkpoint >= position;
    });
    if (reached) return true;
    if (Date.now() >= deadline) return false;
    const reportedPast = reports.passed(names, position);
    if (readAgain && reportedPast) {
      readAgain = false;
      continue;
    }
    // Runners of this process commit these read models (each commit wakes the pause): the rows are read again
    // at the commit that passes the position, not every 2, 4, ... 50 ms before it. Under a transaction held
    // open anywhere in the database every read of the rows walks all their dead versions, so the reads saved
    // are the costly ones. The cap bounds the wait should those runners stop reporting (a lease lost).
    const untilCommit = !reportedPast && reports.reporting(names, REPORTING_WITHIN_MS);
    await reports.pause(names, position, Math.min(untilCommit ? REPORTED_PAUSE_MS : pause, Math.max(1, deadline - Date.now())));
  }
}

/**
 * `waitForProjections`, then for what the process managers appended because of the events up to `position`
 * (the engine's points, XP, completions, hand-outs): the live process managers that have appended anything
 * pass `position` too, and the read models then pass the last position those managers appended by then
 * (`appended_until`, committed with the checkpoint that passed the cause; '' until a manager's first append).
 * Their appends after the cause count as well: the wait is at most a batch or two longer. Process managers
 * that have not run a batch yet, and stores whose process managers append outside their batch's transaction
 * (KurrentDB), are not waited for.
 */
export async function waitForProjectionsAndConsequences(db: UntypedDb, names: readonly string[], position: Position, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const { rows: managers } = await sql<{ name: string }>`${sql.raw(SHORT_STATEMENT)} /* engage:read-your-writes */
    select name from projection_generations where status = 'live' and appended_until is not null`.execute(db);
  const waited = [...new Set([...names, ...managers.map((manager) => manager.name)])];
  if (!(await waitForProjections(db, waited, position, timeoutMs))) return false;
  if (managers.length === 0) return true;
  // Read again now that they passed `position`: what they appended because of it is committed by then.
  const { rows } = await sql<{ until: Position | null }>`${sql.raw(SHORT_STATEMENT)} /* engage:read-your-writes */
    select max(appended_until collate "C") as until from projection_generations
    where status = 'live' and name = any(${managers.map((manager) => manager.name)}::text[])`.execute(db);
  const until = rows[0]?.until ?? '';
  if (until <= position) return true;
  return waitForProjections(db, names, until, Math.max(1, deadline - Date.now()));
}
