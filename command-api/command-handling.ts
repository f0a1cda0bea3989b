import type { Decider, DomainEvent } from '../domain/decider.ts';
import { fold } from '../domain/decider.ts';
import { conflict } from '../infra/http/errors.ts';
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

export interface Handled {
  events: DomainEvent[][];
  results: AppendResult[];
  /** Where the command wrote (the last part's last event), or null when it decided nothing. */
  position: Position | null;
}

const MAX_ATTEMPTS = 5;

/**
 * Load each stream → fold → decide → append every part atomically, each at the revision it was decided
 * on. A concurrent writer makes the append fail; the whole decision is then retried on fresh state a
 * bounded number of times before the caller gets a 409.
 */
export async function handleCommand(store: EventStore, parts: CommandPart[], metadata: EventMetadata): Promise<Handled> {
  for (let attempt = 1; ; attempt++) {
    const decided = await Promise.all(
      parts.map(async (part) => {
        const recorded = await store.readStream(part.stream);
        const state = fold(part.decider, recorded.map((event) => ({ type: event.type, data: event.data })) as DomainEvent[]);
        const events = part.decider.decide(part.command, state) as DomainEvent[];
        const last = recorded[recorded.length - 1];
        return { part, events, expectedRevision: last ? last.revision : ('no_stream' as const) };
      }),
    );
    const appends: StreamAppend[] = decided
      .filter(({ events }) => events.length > 0)
      .map(({ part, events, expectedRevision }) => ({
        stream: part.stream,
        expectedRevision,
        events: events.map((event): NewEvent => ({ type: event.type, data: event.data, metadata: { ...metadata, occurredAt: metadata.occurredAt ?? new Date().toISOString() } })),
      }));
    if (appends.length === 0) return { events: decided.map(({ events }) => events), results: [], position: null };
    try {
      const results = await store.appendMultiple(appends);
      return { events: decided.map(({ events }) => events), results, position: results[results.length - 1]!.position };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      if (attempt >= MAX_ATTEMPTS) throw conflict(`${error.stream} kept changing while this request was decided; retry`);
    }
  }
}
