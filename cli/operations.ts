import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { extname } from 'node:path';
import { MultiBar, Presets, SingleBar } from 'cli-progress';
import type { ExportedEvent, LogFilter, StreamSummary } from '../infra/event-store/browse.ts';
import { isPosition } from '../infra/event-store/port.ts';
import type { JobsStatus } from '../infra/job-status.ts';
import type { ParkedEvent, RebuildProgress, RebuildStarted, RebuildStatus, RetryOutcome } from '../projectors/maintenance.ts';
import { projections } from '../projectors/index.ts';
import { ProjectionRunner, sleep, type ProjectionStatus } from '../projectors/runtime/index.ts';
import type { ServiceCore } from '../service.ts';
import type { RunOperation } from './console-client.ts';
import { CliError, humanDuration, printRecord, printTable, type WriteLine } from './output.ts';

/**
 * The logic of the analyst and operator commands (`engage streams`, `replay`, `projections`, `jobs`),
 * apart from commander, so tests call it directly. Every read goes through console operations
 * (cli/console-operations.ts), page by page.
 */
export interface CliContext {
  run: RunOperation;
  /** Tables, NDJSON and summaries. */
  out: NodeJS.WritableStream;
  /** Progress bars and notes that must not mix with machine output. */
  err: NodeJS.WritableStream;
  /** Draw progress bars on `err` (the CLI does on a terminal). */
  progress?: boolean;
  /**
   * Runs the named projections in this process until the returned function is called (a running service's
   * projectors share the work through their leases); absent: the command only watches.
   */
  drive?: (names: string[]) => Promise<() => Promise<void>>;
  /** Aborted on Ctrl-C: a long command stops cleanly and says how to go on. */
  signal?: AbortSignal;
}

/** Projections driven by a runner of this process (`CliContext.drive`) for a service it opened. */
export function driveIn(service: ServiceCore): CliContext['drive'] {
  return async (names) => {
    const chosen = projections.filter((projection) => names.includes(projection.name));
    const runner = new ProjectionRunner(service.database, service.store, chosen, service.logger, { scanIntervalMs: 250 });
    await runner.start();
    return () => runner.stop();
  };
}

const lineTo =
  (stream: NodeJS.WritableStream): WriteLine =>
  (line) =>
    void stream.write(`${line}\n`);

/** Writes, waiting when the stream asks to (a slow disk or a reader at the other end of a pipe). */
async function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  if (text && !stream.write(text)) await once(stream, 'drain');
}

const ndjson = (rows: unknown[]) => rows.map((row) => `${JSON.stringify(row)}\n`).join('');

// ---------------------------------------------------------------------------------------------- streams

export interface StreamsListOptions {
  category?: string;
  /** How many streams at most; 0: all of them. */
  limit?: number;
  json?: boolean;
}

/** Streams in name order: a table, or NDJSON written page by page. Resolves with how many were listed. */
export async function streamsList(ctx: CliContext, options: StreamsListOptions = {}): Promise<number> {
  const limit = options.limit ?? 100;
  const rows: StreamSummary[] = [];
  let after: string | undefined;
  let listed = 0;
  while (limit === 0 || listed < limit) {
    const asked = limit === 0 ? 500 : Math.min(500, limit - listed);
    const page = await ctx.run('streams.list', { category: options.category, after, limit: asked });
    if (options.json) await write(ctx.out, ndjson(page));
    else rows.push(...page);
    listed += page.length;
    if (page.length < asked) break;
    after = page[page.length - 1]!.stream;
  }
  if (!options.json) printTable(rows as unknown as Record<string, unknown>[], ['stream', 'events', 'lastRevision', 'lastEventAt'], lineTo(ctx.out));
  return listed;
}

export interface StreamsReadOptions {
  /** First revision to read (default 0). */
  from?: number;
  /** How many events at most; 0: to the end of the stream. */
  limit?: number;
  ndjson?: boolean;
}

/** A stream's events in revision order: a table (payload abbreviated), or NDJSON in full. */
export async function streamsRead(ctx: CliContext, stream: string, options: StreamsReadOptions = {}): Promise<number> {
  const limit = options.limit ?? 0;
  const rows: Record<string, unknown>[] = [];
  let from = options.from ?? 0;
  let read = 0;
  while (limit === 0 || read < limit) {
    const asked = limit === 0 ? 500 : Math.min(500, limit - read);
    const page = await ctx.run('streams.read', { stream, from, limit: asked });
    if (options.ndjson) await write(ctx.out, ndjson(page));
    else rows.push(...page.map((event) => ({ ...event, data: abbreviate(JSON.stringify(event.data), 60) })));
    read += page.length;
    if (page.length < asked) break;
    from = page[page.length - 1]!.revision + 1;
  }
  if (!options.ndjson) printTable(rows, ['revision', 'type', 'createdAt', 'position', 'data'], lineTo(ctx.out));
  return read;
}

function abbreviate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

// ----------------------------------------------------------------------------------------------- replay

export type ReplayFormat = 'ndjson' | 'csv';

export interface ReplayOptions {
  /** A file path, or `-` for stdout. */
  out: string;
  /** Default: from the file's extension (.ndjson, .jsonl, .csv). */
  format?: ReplayFormat;
  organisation?: string;
  categories?: string[];
  types?: string[];
  /** Recorded at or after this time (ISO 8601). */
  from?: string;
  /** Recorded before this time (ISO 8601). */
  to?: string;
  /** Events after this position (exclusive). */
  after?: string;
  /** Events up to this position (inclusive). */
  until?: string;
  /** Events scanned per page (default 500). */
  batchSize?: number;
}

export interface ReplayResult {
  out: string;
  format: ReplayFormat;
  /** Events written (those matching the filter). */
  events: number;
  /** Events of the position range scanned. */
  scanned: number;
  /** Where the replay stopped: `--after` this continues it. */
  checkpoint: string | null;
  seconds: number;
  interrupted: boolean;
}

export const CSV_COLUMNS = ['position', 'stream', 'revision', 'id', 'type', 'createdAt', 'organisationId', 'data', 'metadata'] as const;

export function replayFormat(options: Pick<ReplayOptions, 'out' | 'format'>): ReplayFormat {
  if (options.format) return options.format;
  const extension = extname(options.out).toLowerCase();
  if (extension === '.ndjson' || extension === '.jsonl') return 'ndjson';
  if (extension === '.csv') return 'csv';
  throw new CliError(`Cannot tell the format of ${options.out}: name it .ndjson or .csv, or pass --format ndjson|csv`);
}

/**
 * Every event of the log that matches the filter, in log order, to NDJSON (one event a line, as stored)
 * or CSV (data and metadata as JSON cells). Page by page: memory does not grow with the log.
 */
export async function replay(ctx: CliContext, options: ReplayOptions): Promise<ReplayResult> {
  const format = replayFormat(options);
  for (const [flag, value] of [
    ['--after', options.after],
    ['--until', options.until],
  ] as const) {
    if (value !== undefined && !isPosition(value)) throw new CliError(`${flag}: not an event position (32 hexadecimal characters): ${value}`);
  }
  const filter: LogFilter = {
    organisationId: options.organisation,
    categories: options.categories?.length ? options.categories : undefined,
    types: options.types?.length ? options.types : undefined,
    from: options.from,
    to: options.to,
    until: options.until,
  };
  const batchSize = options.batchSize ?? 500;
  const started = Date.now();
  let total = await ctx.run('events.count', { after: options.after ?? null, until: options.until });
  const toStdout = options.out === '-';
  const file = toStdout ? null : createWriteStream(options.out, { flags: 'w' });
  const sink: NodeJS.WritableStream = file ?? ctx.out;
  let failure: Error | undefined;
  if (file) {
    // A file that cannot be opened fails here; one that fails later (a full disk) fails the next write.
    file.on('error', (error: Error) => (failure ??= error));
    await once(file, 'open');
  }
  const bar = ctx.progress
    ? new SingleBar(
        {
          stream: ctx.err,
          format: 'replay |{bar}| {percentage}% | {value}/{total} events scanned | {written} written | {rate} events/s | ETA {remaining}',
          hideCursor: true,
          fps: 5,
          etaBuffer: 50,
        },
        Presets.shades_classic,
      )
    : null;
  bar?.start(Math.max(total, 1), 0, { written: 0, rate: 0, remaining: '-' });
  let checkpoint: string | null = options.after ?? null;
  let scanned = 0;
  let events = 0;
  let interrupted = false;
  try {
    if (format === 'csv') await write(sink, `${CSV_COLUMNS.join(',')}\n`);
    for (;;) {
      if (ctx.signal?.aborted) {
        interrupted = true;
        break;
      }
      const page = await ctx.run('events.read', { after: checkpoint, limit: batchSize, filter });
      if (failure) throw failure;
      await write(sink, format === 'csv' ? page.events.map(csvLine).join('') : ndjson(page.events));
      events += page.events.length;
      checkpoint = page.checkpoint;
      scanned = page.done ? Math.max(total, scanned) : scanned + batchSize;
      total = Math.max(total, scanned);
      bar?.setTotal(Math.max(total, 1));
      const rate = scanned / Math.max((Date.now() - started) / 1000, 0.001);
      bar?.update(scanned, { written: events, rate: Math.round(rate), remaining: eta(total - scanned, rate) });
      if (page.done) break;
    }
  } finally {
    bar?.stop();
    if (file && !failure) {
      file.end();
      await once(file, 'close');
    }
  }
  if (failure) throw failure;
  return { out: options.out, format, events, scanned, checkpoint, seconds: (Date.now() - started) / 1000, interrupted };
}

export function csvLine(event: ExportedEvent): string {
  const cells = [
    event.position,
    event.stream,
    String(event.revision),
    event.id,
    event.type,
    event.createdAt,
    event.organisationId ?? '',
    JSON.stringify(event.data),
    JSON.stringify(event.metadata),
  ];
  return `${cells.map(csvCell).join(',')}\n`;
}

function csvCell(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

export function printReplayResult(ctx: CliContext, result: ReplayResult): void {
  const writeLine = lineTo(result.out === '-' ? ctx.err : ctx.out);
  printRecord(
    {
      out: result.out,
      format: result.format,
      events: result.events,
      scanned: result.scanned,
      checkpoint: result.checkpoint,
      seconds: Number(result.seconds.toFixed(2)),
    },
    writeLine,
  );
  if (result.interrupted) writeLine(`\nInterrupted: run again with --after ${result.checkpoint ?? '(none)'} to continue.`);
}

// ------------------------------------------------------------------------------------------ projections

export async function projectionsStatus(ctx: CliContext, options: { json?: boolean } = {}): Promise<ProjectionStatus[]> {
  const rows = await ctx.run('projections.status', {});
  if (options.json) await write(ctx.out, ndjson(rows));
  else
    printTable(
      // How far behind in time, as a person reads it; the NDJSON keeps `secondsBehind`.
      rows.map((row) => ({ ...row, behind: humanDuration(row.secondsBehind) })),
      ['name', 'generation', 'status', 'checkpoint', 'eventsBehind', 'behind', 'parked', 'lastError'],
      lineTo(ctx.out),
    );
  return rows;
}

export interface RebuildOptions {
  names?: string[];
  all?: boolean;
  /** Start (or find) the building generations and return: the projector processes do the work. */
  detach?: boolean;
  json?: boolean;
  /** How often progress is read (default 500 ms). */
  pollMs?: number;
}

export interface RebuildResult {
  started: RebuildStarted[];
  progress: RebuildProgress[];
  /** True when every rebuilt generation is live. */
  complete: boolean;
  interrupted: boolean;
}

/**
 * Blue/green rebuilds (DESIGN §3): each projection gets a `building` generation filled from the start of
 * the log while the live one keeps serving, and the runtime swaps it in once it has caught up. Asking
 * again after an interruption finds the same building generation and goes on from its checkpoint.
 */
export async function projectionsRebuild(ctx: CliContext, options: RebuildOptions): Promise<RebuildResult> {
  const writeLine = lineTo(ctx.out);
  const started = await ctx.run('projections.rebuild', { names: options.names ?? [], all: options.all ?? false });
  if (!options.json) {
    for (const rebuild of started) {
      writeLine(
        rebuild.resumed
          ? `${rebuild.name}: resuming generation ${rebuild.generation} from ${rebuild.checkpoint ?? 'the start of the log'}`
          : `${rebuild.name}: building generation ${rebuild.generation} from the start of the log`,
      );
    }
  }
  const targets = started.map(({ name, generation }) => ({ name, generation }));
  if (options.detach) {
    if (options.json) await write(ctx.out, ndjson(started));
    else writeLine('Detached: the projector processes build and swap in the new generations (follow with `engage projections status`).');
    return { started, progress: [], complete: false, interrupted: false };
  }
  const stopDriving = ctx.drive ? await ctx.drive(targets.map((target) => target.name)) : null;
  const width = Math.max(...targets.map((target) => target.name.length));
  const bars = ctx.progress
    ? new MultiBar(
        {
          stream: ctx.err,
          format: '{name} |{bar}| {percentage}% | {value}/{total} events | {rate} events/s | ETA {remaining}',
          hideCursor: true,
          fps: 5,
          etaBuffer: 20,
          clearOnComplete: false,
        },
        Presets.shades_classic,
      )
    : null;
  const startedAt = Date.now();
  // Where each rebuild stood when this run began: nothing for a new one, its first reading for a resumed one.
  const first = new Map<string, number>(started.filter((rebuild) => !rebuild.resumed).map((rebuild) => [rebuild.name, 0]));
  const barOf = new Map<string, SingleBar>();
  let progress: RebuildProgress[] = [];
  let reading: RebuildStatus[] = [];
  let interrupted = false;
  try {
    for (;;) {
      const asked = Date.now();
      // Progress bars count the log up to each checkpoint at every reading. Without them only the end is
      // awaited: the first reading counts (where a resumed rebuild started) and the summary does; the
      // readings between only ask whether each generation is live yet (on the bench's 1M-event log, ten
      // counts took 1.8 s of the server during its rebuild).
      const counted = bars !== null || progress.length === 0;
      reading = counted ? (progress = await ctx.run('projections.progress', { targets })) : await ctx.run('projections.rebuild-status', { targets });
      // Counting a large log takes a while: ask at most a fifth of the time with progress bars to draw, a
      // twentieth without, so the rebuild keeps the machine.
      const pause = Math.max(options.pollMs ?? 500, (bars ? 4 : 19) * (Date.now() - asked));
      const seconds = Math.max((Date.now() - startedAt) / 1000, 0.001);
      for (const row of counted ? progress : []) {
        if (!first.has(row.name)) first.set(row.name, row.processed);
        const done = row.status === 'live' || row.status === 'gone';
        const value = done ? row.total : row.processed;
        const rate = (value - first.get(row.name)!) / seconds;
        const payload = { name: row.name.padEnd(width), rate: Math.round(rate), remaining: eta(row.total - value, rate) };
        const bar = barOf.get(row.name) ?? bars?.create(Math.max(row.total, 1), 0, payload);
        if (bar && !barOf.has(row.name)) barOf.set(row.name, bar);
        bar?.setTotal(Math.max(row.total, 1));
        bar?.update(value, payload);
      }
      if (reading.every((row) => row.status === 'live' || row.status === 'gone')) break;
      if (ctx.signal?.aborted) {
        interrupted = true;
        break;
      }
      await sleep(pause, ctx.signal);
    }
  } finally {
    bars?.stop();
    await stopDriving?.();
  }
  // The summary's counts, where the last reading did not count (a log counted once is not counted again).
  if (reading !== progress) progress = await ctx.run('projections.progress', { targets });
  const complete = progress.every((row) => row.status === 'live');
  const seconds = (Date.now() - startedAt) / 1000;
  const summary = progress.map((row) => ({
    name: row.name,
    generation: row.generation,
    status: row.status,
    events: row.processed - (first.get(row.name) ?? 0),
    seconds: Number(seconds.toFixed(2)),
    checkpoint: row.checkpoint,
    lastError: row.lastError,
  }));
  if (options.json) await write(ctx.out, ndjson(summary));
  else {
    printTable(summary, ['name', 'generation', 'status', 'events', 'seconds', 'checkpoint', 'lastError'], writeLine);
    if (interrupted) {
      writeLine(
        ctx.drive
          ? '\nInterrupted: the building generations keep their checkpoints; run the same command to resume.'
          : '\nStopped watching: the server goes on building; run the same command to watch again.',
      );
    }
  }
  return { started, progress, complete, interrupted };
}

/** Time left at this rate: `42s`, `3m05s`, `1h02m`; `-` until there is a rate to go by. */
export function eta(remaining: number, perSecond: number): string {
  if (remaining <= 0) return '0s';
  if (!(perSecond > 0)) return '-';
  const seconds = Math.ceil(remaining / perSecond);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}

export async function parkedList(ctx: CliContext, options: { name?: string; json?: boolean } = {}): Promise<ParkedEvent[]> {
  const rows = await ctx.run('projections.parked.list', { name: options.name });
  if (options.json) await write(ctx.out, ndjson(rows));
  else
    printTable(
      rows.map((row) => ({ ...row, error: abbreviate(row.error, 60) })),
      ['id', 'name', 'generation', 'stream', 'eventType', 'position', 'attempts', 'parkedAt', 'error'],
      lineTo(ctx.out),
    );
  return rows;
}

/** Applies a parked event again; a failure leaves it parked and rejects with the handler's error. */
export async function parkedRetry(ctx: CliContext, id: number, options: { json?: boolean } = {}): Promise<RetryOutcome> {
  const outcome = await ctx.run('projections.parked.retry', { id });
  if (options.json) await write(ctx.out, ndjson([outcome]));
  else if (outcome.outcome === 'applied') lineTo(ctx.out)(`Parked event ${id} applied to ${outcome.name} (generation ${outcome.generation}) and removed.`);
  if (outcome.outcome === 'failed') throw new CliError(`Parked event ${id} failed again and stays parked: ${outcome.error}`);
  return outcome;
}

export async function parkedSkip(ctx: CliContext, id: number, options: { json?: boolean } = {}): Promise<Record<string, unknown>> {
  const skipped = await ctx.run('projections.parked.skip', { id });
  if (options.json) await write(ctx.out, ndjson([skipped]));
  else lineTo(ctx.out)(`Parked event ${id} (${String(skipped.eventType)} in ${String(skipped.stream)}) skipped: ${String(skipped.name)} stays past it.`);
  return skipped;
}

// ------------------------------------------------------------------------------------------------- jobs

export async function jobsStatus(ctx: CliContext, options: { json?: boolean } = {}): Promise<JobsStatus> {
  const status = await ctx.run('jobs.status', {});
  if (options.json) {
    await write(ctx.out, ndjson([status]));
    return status;
  }
  const writeLine = lineTo(ctx.out);
  printTable(status.byKind as unknown as Record<string, unknown>[], ['kind', 'scheduled', 'due', 'running', 'done', 'failed', 'retrying'], writeLine);
  writeLine('');
  writeLine(
    status.oldestDue
      ? `Oldest due: ${status.oldestDue.kind} ${status.oldestDue.id}, due ${status.oldestDue.dueAt} (${status.oldestDue.secondsLate}s ago, ${status.oldestDue.attempts} attempts)`
      : 'Oldest due: nothing is due.',
  );
  writeLine('');
  writeLine('Recent failures:');
  printTable(
    status.recentFailures.map((row) => ({ ...row, lastError: abbreviate(row.lastError ?? '', 60) })),
    ['id', 'kind', 'status', 'attempts', 'dueAt', 'lastError'],
    writeLine,
  );
  return status;
}
