import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runConsoleOperation } from '../cli/console-operations.ts';
import type { CommandContext } from '../command-api/read-port.ts';
import { CSV_COLUMNS, replay, type CliContext, type ReplayOptions } from '../cli/operations.ts';
import { systemClock } from '../infra/clock.ts';
import { loadConfig } from '../infra/config.ts';
import type { ExportedEvent } from '../infra/event-store/browse.ts';
import { categoryOf, formatPosition } from '../infra/event-store/port.ts';
import { PostgresEventStore } from '../infra/event-store/postgres.ts';
import { commandReads, migrate } from '../service.ts';
import { freshDatabase, type TestDatabase } from './support/databases.ts';
import { waitUntil } from './support/projections.ts';

/**
 * `engage replay` against the stored log: for each filter, the NDJSON and the CSV it writes hold exactly
 * the stored events that match, in log order. The expectation is read straight from `es_events`.
 */
const ORGS = ['aaaaaaaaaaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbbbbbb'];
const CATEGORIES = ['leaderboard', 'user', 'reward'];
const TYPES = ['Opened', 'Scored', 'Closed'];
const START = Date.parse('2026-01-01T00:00:00Z');

let test: TestDatabase;
let store: PostgresEventStore;
let cli: CliContext;
let stored: ExportedEvent[];
let directory: string;

beforeAll(async () => {
  test = await freshDatabase();
  await migrate(test.database.db);
  store = new PostgresEventStore(test.database);
  const config = loadConfig({ LOG_LEVEL: 'silent' });
  const ctx: CommandContext = {
    config,
    database: test.database,
    store,
    logger: pino({ level: 'silent' }),
    clock: systemClock,
    reads: commandReads(test.database.db, config),
  };
  const out = new PassThrough().resume();
  const err = new PassThrough().resume();
  cli = { run: (name, input) => runConsoleOperation(ctx, name, input, 'test'), out, err, progress: true };

  // 40 appends, some to several streams at once, some racing (their transactions interleave), one event
  // without an organisation, payloads with commas, quotes and newlines for the CSV.
  const append = (i: number) => {
    const stream = (n: number) => `${CATEGORIES[(i + n) % 3]}-${String(i % 7).padStart(24, '0')}`;
    const events = (n: number) =>
      Array.from({ length: 1 + ((i + n) % 3) }, (_, k) => ({
        type: TYPES[(i + k + n) % 3]!,
        data: { i, k, note: k === 1 ? 'a "quoted", comma\nand a newline' : `plain ${i}` },
        metadata: i === 13 ? { actor: 'test' } : { organisationId: ORGS[i % 2]!, actor: 'test' },
      }));
    return i % 5 === 0
      ? store.appendMultiple([
          { stream: stream(0), events: events(0) },
          { stream: stream(1), events: events(1) },
        ])
      : store.append(stream(0), events(0));
  };
  for (let i = 0; i < 40; i += 4) await Promise.all([append(i), append(i + 1), append(i + 2), append(i + 3)]);
  // Recording times a minute apart in global-position order (not quite log order), to filter on.
  await sql`update es_events set created_at = ${new Date(START).toISOString()}::timestamptz + global_position * interval '1 minute'`.execute(test.database.db);

  const rows = (
    await sql<any>`
      select transaction_id::text as transaction_id, global_position, stream_name, stream_revision, event_id::text as event_id,
             event_type, data, metadata, created_at
      from es_events order by transaction_id, global_position`.execute(test.database.db)
  ).rows;
  stored = rows.map((row) => ({
    position: formatPosition(BigInt(row.transaction_id), BigInt(row.global_position)),
    stream: row.stream_name,
    revision: Number(row.stream_revision),
    id: row.event_id,
    type: row.event_type,
    createdAt: new Date(row.created_at).toISOString(),
    organisationId: row.metadata.organisationId ?? null,
    data: row.data,
    metadata: row.metadata,
  }));
  directory = mkdtempSync(join(tmpdir(), 'engage-replay-'));
  // Readers stop short of the oldest transaction still running on the server (any database's: other
  // suites run beside this one); wait until the store sees all of these.
  await waitUntil(async () => (await store.head())?.position === stored[stored.length - 1]!.position, 20_000, 'the events to be visible');
});

afterAll(async () => {
  await store.close();
  await test.drop();
  rmSync(directory, { recursive: true, force: true });
});

type Filter = Omit<ReplayOptions, 'out' | 'format' | 'batchSize'>;

function expected(filter: Filter): ExportedEvent[] {
  return stored.filter(
    (event) =>
      (!filter.organisation || event.organisationId === filter.organisation) &&
      (!filter.categories?.length || filter.categories.includes(categoryOf(event.stream))) &&
      (!filter.types?.length || filter.types.includes(event.type)) &&
      (!filter.from || event.createdAt >= new Date(filter.from).toISOString()) &&
      (!filter.to || event.createdAt < new Date(filter.to).toISOString()) &&
      (!filter.after || event.position > filter.after) &&
      (!filter.until || event.position <= filter.until),
  );
}

/** RFC 4180: quoted cells may hold commas, doubled quotes and newlines. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\n') {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += c;
  }
  return rows;
}

async function replayBoth(name: string, filter: Filter) {
  const ndjsonFile = join(directory, `${name}.ndjson`);
  const csvFile = join(directory, `${name}.csv`);
  const ndjson = await replay(cli, { ...filter, out: ndjsonFile, batchSize: 7 });
  const csv = await replay(cli, { ...filter, out: csvFile, batchSize: 7 });
  const lines = readFileSync(ndjsonFile, 'utf8').split('\n');
  expect(lines.pop()).toBe('');
  const [header, ...cells] = parseCsv(readFileSync(csvFile, 'utf8'));
  expect(header).toEqual([...CSV_COLUMNS]);
  return { ndjson, csv, fromNdjson: lines.map((line) => JSON.parse(line)), fromCsv: cells };
}

const asCsv = (event: ExportedEvent) => [
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

describe('engage replay', () => {
  const cases: [string, () => Filter][] = [
    ['everything', () => ({})],
    ['one organisation', () => ({ organisation: ORGS[1] })],
    ['two categories', () => ({ categories: ['leaderboard', 'reward'] })],
    ['event types', () => ({ types: ['Scored', 'Closed'] })],
    ['a time range', () => ({ from: new Date(START + 20 * 60_000).toISOString(), to: new Date(START + 45 * 60_000).toISOString() })],
    ['a position range', () => ({ after: stored[9]!.position, until: stored[stored.length - 12]!.position })],
    [
      'everything at once',
      () => ({
        organisation: ORGS[0],
        categories: ['user', 'leaderboard'],
        types: ['Opened', 'Scored'],
        from: new Date(START + 5 * 60_000).toISOString(),
        after: stored[3]!.position,
        until: stored[stored.length - 5]!.position,
      }),
    ],
  ];

  it.each(cases)('writes exactly the stored events of %s, in log order, as NDJSON and CSV', async (name, filterOf) => {
    const filter = filterOf();
    const want = expected(filter);
    expect(want.length).toBeGreaterThan(0);
    if (name !== 'everything') expect(want.length).toBeLessThan(stored.length);
    const { ndjson, csv, fromNdjson, fromCsv } = await replayBoth(name.replaceAll(' ', '-'), filter);
    expect(fromNdjson).toEqual(want);
    expect(fromCsv).toEqual(want.map(asCsv));
    for (const result of [ndjson, csv]) {
      expect(result).toMatchObject({ events: want.length, interrupted: false });
      expect(result.checkpoint! >= (filter.until ?? stored[stored.length - 1]!.position)).toBe(true);
    }
  });

  it('continues after the checkpoint it reports, and refuses what it cannot read', async () => {
    const until = stored[20]!.position;
    const first = await replay(cli, { out: join(directory, 'first.ndjson'), until, batchSize: 5 });
    expect(first.checkpoint).toBe(until);
    await replay(cli, { out: join(directory, 'rest.ndjson'), after: first.checkpoint!, batchSize: 5 });
    const read = (file: string) =>
      readFileSync(join(directory, file), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
    expect([...read('first.ndjson'), ...read('rest.ndjson')]).toEqual(stored);

    await expect(replay(cli, { out: join(directory, 'x.txt') })).rejects.toThrow(/format/);
    await expect(replay(cli, { out: join(directory, 'x.csv'), after: 'nope' })).rejects.toThrow(/--after/);
    await expect(replay(cli, { out: join(directory, 'x.csv'), from: 'yesterday' })).rejects.toThrow();
    await expect(replay(cli, { out: join(directory, 'no/such/dir/x.csv') })).rejects.toThrow(/ENOENT/);
  });
});
