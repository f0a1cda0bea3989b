/**
 * The realistic store the rebuild benchmark reads: `BENCH_EVENTS` events (default 1,000,000) of a simulated
 * programme (`world.ts`), written straight into `es_events` / `es_streams` with multi-row inserts of
 * ~10,000 rows (`unnest` of arrays, one transaction each) while the next rows are being generated. It lives
 * in a database of its own, `engage_bench_1m_v<version>` (or `engage_bench_<events>_v<version>`), reused by
 * later runs once a marker row says it is complete; `BENCH_REGENERATE=1` builds it again.
 *
 *   npx tsx bench/million-store.ts                  # ensure the store, print what it holds
 *   BENCH_EVENTS=100000 npx tsx bench/million-store.ts
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { openPostgres } from '../infra/database.ts';
import type { EventMetadata } from '../infra/event-store/port.ts';
import { migrate } from '../service.ts';
import { createDatabase, databaseExists, databaseUrl, dropDatabase, runIfMain } from './support.ts';
import { generateWorld, worldSizeFor, type EventSink, type StoreEvent, type WorldSize, type WorldSummary } from './world.ts';

/** Bump when the generated log changes, so an older store is not reused. */
export const GENERATOR_VERSION = 1;

/** Rows per insert statement (and transaction). */
const CHUNK = 10_000;

export function storeEvents(): number {
  const events = Number(process.env.BENCH_EVENTS ?? 1_000_000);
  if (!Number.isSafeInteger(events) || events < 1000) throw new Error(`BENCH_EVENTS must be a whole number >= 1000, not ${process.env.BENCH_EVENTS}`);
  return events;
}

export function storeDatabaseName(events: number): string {
  return `engage_bench_${events === 1_000_000 ? '1m' : events}_v${GENERATOR_VERSION}`;
}

export interface StoreInfo {
  database: string;
  events: number;
  /** True when an earlier run had built it. */
  reused: boolean;
  /** How long building it took (in the run that built it), and of that the waits for inserts and the vacuum. */
  generationSeconds: number;
  /** CPU time the generating process used (what a busy machine cannot shorten). */
  cpuSeconds: number;
  insertWaitSeconds: number;
  vacuumSeconds: number;
  generatedAt: string;
  summary: WorldSummary & { insertWaitSeconds?: number; vacuumSeconds?: number; cpuSeconds?: number };
}

interface MarkerRow {
  events: string;
  generator_version: number;
  generated_at: Date;
  seconds: number;
  summary: StoreInfo['summary'];
}

/** The store for `events` events: the existing one when complete, else built now. */
export async function ensureStore(events = storeEvents()): Promise<StoreInfo> {
  const database = storeDatabaseName(events);
  if (process.env.BENCH_REGENERATE !== '1' && (await databaseExists(database))) {
    const marker = await readMarker(database);
    if (marker) {
      return {
        database,
        events: Number(marker.events),
        reused: true,
        generationSeconds: marker.seconds,
        cpuSeconds: marker.summary.cpuSeconds ?? NaN,
        insertWaitSeconds: marker.summary.insertWaitSeconds ?? NaN,
        vacuumSeconds: marker.summary.vacuumSeconds ?? NaN,
        generatedAt: new Date(marker.generated_at).toISOString(),
        summary: marker.summary,
      };
    }
  }
  // Missing, incomplete (an interrupted build) or to be built again.
  await dropDatabase(database);
  await createDatabase(database);
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  const opened = await openPostgres(databaseUrl(database), { max: 2 });
  try {
    await migrate(opened.db);
  } finally {
    await opened.close();
  }
  const written = await writeWorld(databaseUrl(database, 'engage-bench-generator'), events, worldSizeFor(events));
  const client = new pg.Client({ connectionString: databaseUrl(database, 'engage-bench-generator') });
  client.on('error', () => undefined);
  await client.connect();
  try {
    // Hint bits and the visibility map set now, so the first benchmark read does not pay for them.
    const vacuumStarted = performance.now();
    await client.query('vacuum (analyze) es_events');
    await client.query('vacuum (analyze) es_streams');
    const vacuumSeconds = (performance.now() - vacuumStarted) / 1000;
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuStarted);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const recorded = { ...written.summary, insertWaitSeconds: written.waitSeconds, vacuumSeconds, cpuSeconds };
    await client.query(`create table bench_store (
      events bigint not null, generator_version integer not null, generated_at timestamptz not null default now(),
      seconds double precision not null, summary jsonb not null)`);
    await client.query('insert into bench_store (events, generator_version, seconds, summary) values ($1, $2, $3, $4)', [
      recorded.events,
      GENERATOR_VERSION,
      seconds,
      JSON.stringify(recorded),
    ]);
    return {
      database,
      events: recorded.events,
      reused: false,
      generationSeconds: seconds,
      cpuSeconds,
      insertWaitSeconds: written.waitSeconds,
      vacuumSeconds,
      generatedAt: new Date().toISOString(),
      summary: recorded,
    };
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Generates a world of about `events` events straight into the (migrated, empty) event store at `url`. */
export async function writeWorld(url: string, events: number, size: WorldSize, start?: number): Promise<{ summary: WorldSummary; waitSeconds: number }> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    // Each chunk is its own transaction; nothing reads the store while it is written, so commits need not wait for the disk.
    await client.query('set synchronous_commit = off');
    const writer = new BulkWriter(client);
    const summary = await generateWorld(events, writer, size, { start });
    await writer.finish();
    return { summary, waitSeconds: writer.waitSeconds };
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function readMarker(database: string): Promise<MarkerRow | null> {
  const client = new pg.Client({ connectionString: databaseUrl(database) });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const exists = (await client.query(`select to_regclass('public.bench_store') is not null as exists`)).rows[0].exists as boolean;
    if (!exists) return null;
    const row = (await client.query('select * from bench_store')).rows[0] as MarkerRow | undefined;
    return row && row.generator_version === GENERATOR_VERSION ? row : null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Collects events as columns and inserts them CHUNK rows at a time, one statement (and transaction) each,
 * in log order: the identity gives `global_position` in the order of the arrays, each stream's revisions
 * count from 0. One insert is in flight while the generator builds the next chunk.
 */
class BulkWriter implements EventSink {
  count = 0;
  /** Time the generator spent waiting for an insert to finish (what the database could not overlap). */
  waitSeconds = 0;
  private streams: string[] = [];
  private revisionsOut: number[] = [];
  private ids: string[] = [];
  private types: string[] = [];
  private data: string[] = [];
  private metadata: string[] = [];
  private createdAt: string[] = [];
  private readonly revisions = new Map<string, number>();
  private inFlight: Promise<void> = Promise.resolve();
  private failure: unknown = null;

  constructor(private readonly client: pg.Client) {}

  append(stream: string, event: StoreEvent, metadata: EventMetadata, at: number): string {
    const revision = (this.revisions.get(stream) ?? -1) + 1;
    this.revisions.set(stream, revision);
    const id = randomUUID();
    this.streams.push(stream);
    this.revisionsOut.push(revision);
    this.ids.push(id);
    this.types.push(event.type);
    this.data.push(JSON.stringify(event.data));
    this.metadata.push(JSON.stringify(metadata));
    this.createdAt.push(new Date(at).toISOString());
    this.count++;
    return id;
  }

  async drain(): Promise<void> {
    if (this.streams.length >= CHUNK) await this.flush();
  }

  async finish(): Promise<void> {
    await this.flush();
    const waitStarted = performance.now();
    await this.inFlight;
    this.waitSeconds += (performance.now() - waitStarted) / 1000;
    this.throwIfFailed();
    const names = [...this.revisions.keys()];
    const last = [...this.revisions.values()].map(String);
    for (let start = 0; start < names.length; start += 50_000) {
      await this.client.query('insert into es_streams (stream_name, revision) select * from unnest($1::text[], $2::bigint[])', [
        names.slice(start, start + 50_000),
        last.slice(start, start + 50_000),
      ]);
    }
  }

  private async flush(): Promise<void> {
    if (this.streams.length === 0) return;
    // Each column as one text, a line per row (JSON never holds a raw newline): no array literal to escape in JS.
    const chunk = [this.streams, this.revisionsOut, this.ids, this.types, this.data, this.metadata, this.createdAt].map((column) => column.join('\n'));
    this.streams = [];
    this.revisionsOut = [];
    this.ids = [];
    this.types = [];
    this.data = [];
    this.metadata = [];
    this.createdAt = [];
    const waitStarted = performance.now();
    await this.inFlight;
    this.waitSeconds += (performance.now() - waitStarted) / 1000;
    this.throwIfFailed();
    this.inFlight = this.client
      .query(
        `insert into es_events (stream_name, stream_revision, event_id, event_type, data, metadata, created_at)
         select e.stream_name, e.stream_revision::bigint, e.event_id::uuid, e.event_type, e.data::jsonb, e.metadata::jsonb, e.created_at::timestamptz
         from unnest(string_to_array($1, E'\\n'), string_to_array($2, E'\\n'), string_to_array($3, E'\\n'), string_to_array($4, E'\\n'),
                     string_to_array($5, E'\\n'), string_to_array($6, E'\\n'), string_to_array($7, E'\\n'))
           with ordinality as e(stream_name, stream_revision, event_id, event_type, data, metadata, created_at, ord)
         order by e.ord`,
        chunk,
      )
      .then(
        () => undefined,
        (error: unknown) => {
          this.failure = error;
        },
      );
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure instanceof Error ? this.failure : new Error('An append failed', { cause: this.failure });
  }
}

runIfMain(import.meta.url, async () => {
  const info = await ensureStore();
  console.error(
    `${info.database}: ${info.events} events, ${info.reused ? 'reused, ' : ''}built in ${info.generationSeconds.toFixed(1)} s (${info.cpuSeconds.toFixed(1)} s of CPU; inserts waited for ${info.insertWaitSeconds.toFixed(1)} s, vacuum ${info.vacuumSeconds.toFixed(1)} s) on ${info.generatedAt}`,
  );
  return info;
});
