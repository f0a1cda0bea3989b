import { createHash } from 'node:crypto';
import type { Decider, DomainEvent } from '../domain/decider.ts';
import { fold } from '../domain/decider.ts';
import { badRequest, conflict } from '../infra/http/errors.ts';
import { inSpan } from '../infra/tracing.ts';
import {
  WrongExpectedRevisionError,
  type AppendResult,
  type EventMetadata,
  type EventStore,
  type NewEvent,
  type Position,
  type StreamAppend,
} from '../infra/event-store/port.ts';

/** One aggregate's part in a command: its stream, its decider, and the command for it. */
export interface CommandPart<Command = any, Event extends DomainEvent = any, State = any> {
  stream: string;
  decider: Decider<Command, Event, State>;
  command: Command;
}

/** What a client gets back; recorded with an idempotent command so a retry gets it again, unchanged. */
export interface CommandResponse {
  status: number;
  body: unknown;
}

export interface Idempotency {
  /** Scope and key together name the record: `Idempotency-Key` per route, `nonce` per organisation. */
  organisationId: string;
  scope: string;
  key: string;
  /** Fingerprint of the request; a different request under the same key is a 409 unless `replayOnMismatch`. */
  fingerprint: string;
  replayOnMismatch?: boolean;
}

export interface Handled {
  events: DomainEvent[][];
  results: AppendResult[];
  /** Where the command wrote (the last event of the append), or null when it decided nothing. */
  position: Position | null;
  response: CommandResponse;
  /** True when this is a retry answered from the first attempt's record. */
  replayed: boolean;
}

interface RequestCompleted {
  scope: string;
  key: string;
  fingerprint: string;
  response: CommandResponse;
}

const MAX_ATTEMPTS = 5;

export function fingerprintOf(value: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(value ?? null))
    .digest('hex');
}

export function idempotencyStream(idempotency: Pick<Idempotency, 'organisationId' | 'scope' | 'key'>): string {
  return `idempotency-${idempotency.organisationId}${createHash('sha256').update(`${idempotency.scope}\n${idempotency.key}`).digest('hex').slice(0, 32)}`;
}

/** A stream's state as the domain sees it: its events folded with the decider's `evolve`. */
export async function foldStream<Event, State>(
  store: EventStore,
  stream: string,
  decider: Pick<Decider<unknown, Event, State>, 'initialState' | 'evolve'>,
): Promise<State> {
  return fold(decider, (await store.readStream(stream)).map(({ type, data }) => ({ type, data })) as Event[]);
}

/**
 * Load each stream → fold → decide → append every part atomically, each at the revision it was decided
 * on. A concurrent writer makes the append fail; the whole decision is then retried on fresh state a
 * bounded number of times before the caller gets a 409. With an idempotency key, the response is recorded
 * in the same append, and a request that finds the record answers from it without deciding anything.
 */
export async function handleCommand(
  store: EventStore,
  parts: CommandPart[],
  metadata: EventMetadata,
  respond: (events: DomainEvent[][]) => CommandResponse = () => ({ status: 200, body: null }),
  idempotency?: Idempotency,
): Promise<Handled> {
  const recordStream = idempotency ? idempotencyStream(idempotency) : null;
  for (let attempt = 1; ; attempt++) {
    if (recordStream && idempotency) {
      const [record] = await store.readStream(recordStream, { limit: 1 });
      if (record) {
        const completed = record.data as RequestCompleted;
        if (completed.fingerprint !== idempotency.fingerprint && !idempotency.replayOnMismatch) {
          throw conflict(`This ${idempotency.scope === 'nonce' ? 'nonce' : 'Idempotency-Key'} was already used for a different request`);
        }
        return { events: [], results: [], position: record.position, response: completed.response, replayed: true };
      }
    }
    const decided = await inSpan(
      'engage.decide',
      () =>
        Promise.all(
          parts.map(async (part) => {
            const recorded = await store.readStream(part.stream);
            const state: unknown = fold(part.decider, recorded.map((event) => ({ type: event.type, data: event.data })) as DomainEvent[]);
            const events = part.decider.decide(part.command, state) as DomainEvent[];
            const last = recorded[recorded.length - 1];
            return { part, events, expectedRevision: last ? last.revision : ('no_stream' as const) };
          }),
        ),
      () => ({ 'engage.streams': parts.map((part) => part.stream), 'engage.attempt': attempt }),
    );
    const events = decided.map((d) => d.events);
    const response = respond(events);
    const stamped = { ...metadata, occurredAt: metadata.occurredAt ?? new Date().toISOString() };
    const appends: StreamAppend[] = decided
      .filter((d) => d.events.length > 0)
      .map((d) => ({
        stream: d.part.stream,
        expectedRevision: d.expectedRevision,
        events: d.events.map((event): NewEvent => ({ type: event.type, data: event.data, metadata: stamped })),
      }));
    if (recordStream && idempotency) {
      const record: RequestCompleted = { scope: idempotency.scope, key: idempotency.key, fingerprint: idempotency.fingerprint, response };
      // In the same atomic append: the command's effect and the record of its answer land together or not at all.
      appends.push({ stream: recordStream, expectedRevision: 'no_stream', events: [{ type: 'RequestCompleted', data: record, metadata: stamped }] });
    }
    if (appends.length === 0) return { events, results: [], position: null, response, replayed: false };
    try {
      const results = await store.appendMultiple(appends);
      return { events, results, position: results[results.length - 1]!.position, response, replayed: false };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      if (attempt >= MAX_ATTEMPTS) throw conflict(`${error.stream} kept changing while this request was decided; retry`);
    }
  }
}

export function idempotencyKeyOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (header.length < 1 || header.length > 255) throw badRequest([{ message: 'Idempotency-Key: 1 to 255 characters', path: ['Idempotency-Key'] }]);
  return header;
}
