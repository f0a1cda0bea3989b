import { sql } from 'kysely';
import { z } from 'zod';
import type { Database } from '../database.ts';
import { badRequest } from '../http/errors.ts';
import { formatPosition, isPosition, type EventStore, type Position, type RecordedEvent } from './port.ts';
import { PostgresEventStore } from './postgres.ts';

/**
 * Reading the log as an analyst does (`engage streams`, `engage replay`): page by page, so neither the
 * service nor the CLI ever holds more than one page, and in a form that survives JSON (revisions as
 * numbers, times as ISO strings).
 */
export interface ExportedEvent {
  position: Position;
  stream: string;
  revision: number;
  id: string;
  type: string;
  /** When the store recorded the event (the time filters of a replay use this). */
  createdAt: string;
  organisationId: string | null;
  data: unknown;
  metadata: Record<string, unknown>;
}

export function exportEvent(event: RecordedEvent): ExportedEvent {
  return {
    position: event.position,
    stream: event.stream,
    revision: Number(event.revision),
    id: event.id,
    type: event.type,
    createdAt: event.createdAt.toISOString(),
    organisationId: typeof event.metadata.organisationId === 'string' ? event.metadata.organisationId : null,
    data: event.data,
    metadata: event.metadata,
  };
}

const position = z.string().refine(isPosition, 'must be an event position (32 hexadecimal characters)');
const instant = z.iso
  .datetime({ offset: true })
  .or(z.iso.date())
  .transform((value) => new Date(value).toISOString());

/**
 * A replay's filter. Lists match any of their entries; everything given must match. Time is the store's
 * `createdAt`, half-open `[from, to)`; positions are `(after, until]`.
 */
export const logFilter = z.object({
  organisationId: z.string().min(1).optional(),
  categories: z.array(z.string().min(1)).min(1).optional(),
  types: z.array(z.string().min(1)).min(1).optional(),
  from: instant.optional(),
  to: instant.optional(),
  until: position.optional(),
});
export type LogFilter = z.infer<typeof logFilter>;

export const readLogInput = z.object({
  after: position.nullable().default(null),
  limit: z.number().int().min(1).max(5000).default(500),
  filter: logFilter.default({}),
});

export interface LogPage {
  events: ExportedEvent[];
  /** Where the scan stopped (matching or not): the next page starts after it. */
  checkpoint: Position | null;
  /** Nothing more to read: the end of the visible log, or past `until`. */
  done: boolean;
}

/** One page of the log: the store filters categories and types, this filters organisation, time and `until`. */
export async function readLogPage(store: EventStore, input: z.infer<typeof readLogInput>): Promise<LogPage> {
  const { filter } = input;
  const page = await store.readAll({
    after: input.after,
    limit: input.limit,
    filter: filter.categories || filter.types ? { categories: filter.categories, eventTypes: filter.types } : undefined,
  });
  const from = filter.from ? Date.parse(filter.from) : undefined;
  const to = filter.to ? Date.parse(filter.to) : undefined;
  const events = page.events.filter(
    (event) =>
      (filter.until === undefined || event.position <= filter.until) &&
      (filter.organisationId === undefined || event.metadata.organisationId === filter.organisationId) &&
      (from === undefined || event.createdAt.getTime() >= from) &&
      (to === undefined || event.createdAt.getTime() < to),
  );
  const pastUntil = filter.until !== undefined && page.checkpoint !== null && page.checkpoint >= filter.until;
  return {
    events: events.map(exportEvent),
    // A page that ran past `until` stops there: continuing after `until` misses nothing.
    checkpoint: pastUntil && (input.after === null || filter.until! > input.after) ? filter.until! : (page.checkpoint ?? input.after),
    done: page.isEnd || pastUntil,
  };
}

export const countLogInput = z.object({ after: position.nullable().default(null), until: position.optional() });

/** Events in the position range `(after, until]` (what a replay scans). */
export async function countLog(store: EventStore, input: z.infer<typeof countLogInput>): Promise<number> {
  if (input.until !== undefined && input.after !== null && input.until <= input.after) return 0;
  const total = await store.countAfter(input.after);
  return input.until === undefined ? total : Math.max(0, total - (await store.countAfter(input.until)));
}

export const listStreamsInput = z.object({
  category: z
    .string()
    .regex(/^[^-\s]+$/, 'a category is a stream name up to its first "-"')
    .optional(),
  after: z.string().optional(),
  limit: z.number().int().min(1).max(5000).default(500),
});

export interface StreamSummary {
  stream: string;
  events: number;
  lastRevision: number;
  lastEventAt: string | null;
  lastPosition: Position | null;
}

/** Streams in name order, from the PostgreSQL store's stream table (one row per stream: no scan of the log). */
export async function listStreams(database: Database, store: EventStore, input: z.infer<typeof listStreamsInput>): Promise<StreamSummary[]> {
  if (!(store instanceof PostgresEventStore)) {
    throw badRequest([], 'Listing streams reads the PostgreSQL event store; with EVENT_STORE=kurrentdb use the KurrentDB UI (streams read and replay work)');
  }
  const category = input.category ? `${input.category.replace(/[\\%_]/g, (c) => `\\${c}`)}-%` : undefined;
  const rows = (
    await sql<{ stream_name: string; revision: string; created_at: Date | null; transaction_id: string | null; global_position: string | null }>`
      select s.stream_name, s.revision, e.created_at, e.transaction_id::text as transaction_id, e.global_position
      from es_streams s
      left join es_events e on e.stream_name = s.stream_name and e.stream_revision = s.revision
      where true
        ${category ? sql`and (s.stream_name like ${category} or s.stream_name = ${input.category})` : sql``}
        ${input.after !== undefined ? sql`and s.stream_name > ${input.after}` : sql``}
      order by s.stream_name
      limit ${input.limit}`.execute(database.db)
  ).rows;
  return rows.map((row) => ({
    stream: row.stream_name,
    events: Number(row.revision) + 1,
    lastRevision: Number(row.revision),
    lastEventAt: row.created_at ? new Date(row.created_at).toISOString() : null,
    lastPosition: row.transaction_id && row.global_position ? formatPosition(BigInt(row.transaction_id), BigInt(row.global_position)) : null,
  }));
}

export const readStreamInput = z.object({
  stream: z.string().min(1),
  from: z.number().int().min(0).default(0),
  limit: z.number().int().min(1).max(5000).default(500),
});

export async function readStreamPage(store: EventStore, input: z.infer<typeof readStreamInput>): Promise<ExportedEvent[]> {
  return (await store.readStream(input.stream, { from: BigInt(input.from), limit: input.limit })).map(exportEvent);
}
