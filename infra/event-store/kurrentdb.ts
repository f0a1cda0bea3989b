import {
  ANY,
  BACKWARDS,
  END,
  FORWARDS,
  KurrentDBClient,
  START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  type AllStreamRecordedEvent,
  type EventData,
  type JSONType,
  type Position as LogPosition,
  type ReadStreamOptions as ClientReadStreamOptions,
  type RecordedEvent as ClientRecordedEvent,
} from '@kurrent/kurrentdb-client';
import { AppendSignal, pollingSubscription } from './polling-subscription.ts';
import {
  EventIdConflictError,
  WrongExpectedRevisionError,
  categoryOf,
  formatPosition,
  parsePosition,
  type AppendOptions,
  type AppendResult,
  type EventFilter,
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadAllPage,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
  type SubscribeOptions,
  type Subscription,
} from './port.ts';
import { pendingAppendGuard } from './append-guard.ts';
import { newEventId } from '../ids.ts';

/** Nothing tells this process about other processes' appends: they are seen at the next poll. */
const POLL_INTERVAL_MS = 200;
/** Page size of the backwards scan that looks for an append's event ids anywhere in its stream. */
const SCAN_PAGE = 500;

interface PreparedEvent extends NewEvent {
  id: string;
}

interface PreparedAppend extends StreamAppend {
  events: PreparedEvent[];
}

/**
 * The event store on KurrentDB (or EventStoreDB) through the official gRPC client. Positions are $all's
 * (commit, prepare) pair; system events (types starting with `$`) are invisible, as if they were not in the log.
 */
export class KurrentDbEventStore implements EventStore {
  private readonly signal = new AppendSignal();

  constructor(private readonly client: KurrentDBClient) {}

  static connect(connectionString: string): KurrentDbEventStore {
    return new KurrentDbEventStore(KurrentDBClient.connectionString(connectionString));
  }

  async append(stream: string, events: NewEvent[], options: { expectedRevision?: ExpectedRevision } & AppendOptions = {}) {
    const [result] = await this.appendMultiple([{ stream, events, expectedRevision: options.expectedRevision }], options);
    return result!;
  }

  async appendMultiple(unprepared: StreamAppend[], options: AppendOptions = {}): Promise<AppendResult[]> {
    // This store cannot check a request's append guard in the write: it is proven first (append-guard.ts).
    await pendingAppendGuard(options.guard)?.check();
    const appends = withEventIds(unprepared);
    const known = await this.alreadyAppended(appends);
    if (known) return known;
    // An empty append writes nothing: its expectation is checked by reading, before anything is written.
    const empty = await Promise.all(appends.map((append) => (append.events.length === 0 ? this.emptyAppend(append) : Promise.resolve(null))));
    const writes = appends.filter((append) => append.events.length > 0);
    const revisions = await this.write(writes);
    if (writes.length > 0) this.signal.notify();
    return Promise.all(appends.map((append, index) => (empty[index] ? Promise.resolve(empty[index]) : this.resultAt(append.stream, revisions.get(append)!))));
  }

  /** Writes the appends in one atomic operation; resolves to the revision each stream's last event got. */
  private async write(writes: PreparedAppend[]): Promise<Map<PreparedAppend, bigint>> {
    try {
      if (writes.length === 0) return new Map();
      if (writes.length === 1) {
        const append = writes[0]!;
        const expected = append.expectedRevision ?? ANY;
        const result = await this.client.appendToStream(append.stream, append.events.map(toEventData), { streamState: expected });
        // Only with throwOnAppendFailure=false in the connection string; the revision it reports is not reliable.
        if (!result.success) throw new WrongExpectedRevisionError(append.stream, expected, await this.currentRevision(append.stream));
        return new Map([[append, result.nextExpectedRevision]]);
      }
      // Atomic across streams: needs KurrentDB 25.1 or later (the client throws UnsupportedError before that).
      const { responses } = await this.client.multiStreamAppend(
        writes.map((append) => ({
          streamName: append.stream,
          expectedState: append.expectedRevision ?? ANY,
          events: append.events.map(toEventData),
        })),
      );
      return new Map(
        writes.map((append) => {
          const response = responses.find((candidate) => candidate.streamName === append.stream);
          if (!response) throw new Error(`Stream ${append.stream}: missing from the multi-stream append's response`);
          return [append, response.revision];
        }),
      );
    } catch (error) {
      if (error instanceof WrongExpectedVersionError) throw wrongExpectedRevision(error, writes);
      throw error;
    }
  }

  /**
   * Idempotency: the same event ids appended again return the first append's result and write nothing. KurrentDB
   * does not index event ids, so each stream is read where a retry of the append would find them.
   */
  private async alreadyAppended(appends: PreparedAppend[]): Promise<AppendResult[] | null> {
    const priors = await Promise.all(appends.map((append) => this.priorAppend(append)));
    if (priors.every((prior) => prior.found.length === 0)) return null;
    const found = priors.flatMap((prior) => prior.found);
    return appends.map((append, index) => {
      const { result } = priors[index]!;
      if (!result) throw new EventIdConflictError(append.stream, found);
      return result;
    });
  }

  /** Which of the append's ids its stream holds, and the original result when it holds all of them, in order. */
  private async priorAppend(append: PreparedAppend): Promise<{ found: string[]; result: AppendResult | null }> {
    if (append.events.length === 0) return { found: [], result: null };
    const ids = append.events.map((event) => event.id);
    const byId = await this.findEvents(append, new Set(ids));
    const located = ids.map((id) => byId.get(id));
    const first = located[0];
    const inOrder = first !== undefined && located.every((event, index) => event?.revision === first.revision + BigInt(index));
    const last = located[located.length - 1];
    return {
      found: [...byId.keys()],
      result: inOrder && last ? { stream: append.stream, nextExpectedRevision: last.revision, position: last.position } : null,
    };
  }

  /** The stream's events whose ids are in `ids`, latest occurrence first found. */
  private async findEvents(append: PreparedAppend, ids: Set<string>): Promise<Map<string, RecordedEvent>> {
    const found = new Map<string, RecordedEvent>();
    const keep = (events: RecordedEvent[]) => {
      for (const event of events) if (ids.has(event.id) && !found.has(event.id)) found.set(event.id, event);
    };
    const expected = append.expectedRevision ?? 'any';
    if (expected === 'no_stream' || typeof expected === 'bigint') {
      // With a definite expectation the original append can only have landed right after it.
      const from = expected === 'no_stream' ? 0n : expected + 1n;
      keep(await this.streamEvents(append.stream, { fromRevision: from, maxCount: ids.size, requiresLeader: true }));
      return found;
    }
    // Otherwise it may be anywhere: scan back from the end until every id is found or the stream is exhausted.
    let from: bigint | typeof END = END;
    for (;;) {
      const page = await this.streamEvents(append.stream, { direction: BACKWARDS, fromRevision: from, maxCount: SCAN_PAGE, requiresLeader: true });
      keep(page);
      const oldest = page[page.length - 1];
      if (found.size === ids.size || page.length < SCAN_PAGE || !oldest || oldest.revision === 0n) return found;
      from = oldest.revision - 1n;
    }
  }

  private async emptyAppend(append: PreparedAppend): Promise<AppendResult> {
    const last = await this.lastEvent(append.stream);
    const actual = last ? last.revision : 'no_stream';
    const expected = append.expectedRevision ?? 'any';
    const holds =
      expected === 'any' ||
      (expected === 'no_stream' && actual === 'no_stream') ||
      (expected === 'stream_exists' && actual !== 'no_stream') ||
      (typeof expected === 'bigint' && actual === expected);
    if (!holds) throw new WrongExpectedRevisionError(append.stream, expected, actual);
    return { stream: append.stream, nextExpectedRevision: last?.revision ?? -1n, position: last?.position ?? formatPosition(0n, 0n) };
  }

  /**
   * The result of an append whose last event got `revision`. Its position is read back rather than taken from the
   * append's answer, which is not always that event's position in $all (and is absent from a multi-stream append's).
   */
  private async resultAt(stream: string, revision: bigint): Promise<AppendResult> {
    const [last] = await this.streamEvents(stream, { fromRevision: revision, maxCount: 1, requiresLeader: true });
    if (!last) throw new Error(`Stream ${stream}: the event appended at revision ${revision} cannot be read back`);
    return { stream, nextExpectedRevision: revision, position: last.position };
  }

  private async currentRevision(stream: string): Promise<bigint | 'no_stream'> {
    return (await this.lastEvent(stream))?.revision ?? 'no_stream';
  }

  private async lastEvent(stream: string): Promise<RecordedEvent | undefined> {
    const [last] = await this.streamEvents(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1, requiresLeader: true });
    return last;
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    if (options.limit !== undefined && options.limit <= 0) return [];
    const backwards = options.direction === 'backwards';
    return this.streamEvents(stream, {
      direction: backwards ? BACKWARDS : FORWARDS,
      fromRevision: options.from ?? (backwards ? END : START),
      maxCount: options.limit,
    });
  }

  /** A stream read; a stream that does not exist reads as empty. */
  private async streamEvents(stream: string, options: ClientReadStreamOptions): Promise<RecordedEvent[]> {
    const events: RecordedEvent[] = [];
    try {
      for await (const { event } of this.client.readStream(stream, options)) if (event) events.push(toRecorded(event));
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
    return events;
  }

  async readAll(options: ReadAllOptions = {}): Promise<ReadAllPage> {
    const limit = options.limit ?? 500;
    const scanned: AllStreamRecordedEvent[] = [];
    const until = options.until ?? null;
    for await (const event of this.visibleEvents(options.after ?? null, limit)) {
      // Positions compare as strings: stop at `until`, where a known page begins.
      if (until !== null && positionOf(event) > until) break;
      scanned.push(event);
    }
    const last = scanned[scanned.length - 1];
    return {
      events: scanned.filter((event) => matches(event, options.filter)).map(toRecorded),
      checkpoint: last ? positionOf(last) : null,
      isEnd: until === null && scanned.length < limit,
    };
  }

  /**
   * Up to `limit` non-system events after `after`, in log order. The server filters out system events, so the
   * count and the checkpoint only ever concern visible ones; the caller's filter is applied on this side, so
   * that a checkpoint still moves past events it does not want.
   */
  private async *visibleEvents(after: Position | null, limit: number): AsyncGenerator<AllStreamRecordedEvent> {
    if (limit <= 0) return;
    const from = after === null ? null : parsePosition(after);
    // A read from a position includes the event there: ask for one more and drop it.
    const events = this.client.readAll({
      fromPosition: from ? { commit: from.major, prepare: from.minor } : START,
      maxCount: from ? limit + 1 : limit,
      filter: excludeSystemEvents(),
    });
    let yielded = 0;
    for await (const { event } of events) {
      if (!event || yielded === limit || positionOf(event) === after) continue;
      yielded++;
      yield event;
    }
  }

  subscribe(options: SubscribeOptions = {}): Subscription {
    return pollingSubscription(
      {
        readAll: (read) => this.readAll(read),
        waitForAppends: (timeoutMs, signal) => this.waitForAppends(timeoutMs, signal),
        appendVersion: () => this.signal.version,
      },
      options,
    );
  }

  appendVersion(): number {
    return this.signal.version;
  }

  /** Resolves when an append in this process may have landed, after at most one poll interval, or on abort. */
  waitForAppends(timeoutMs: number, signal: AbortSignal): Promise<void> {
    return this.signal.wait(Math.min(timeoutMs, POLL_INTERVAL_MS), signal);
  }

  async head(): Promise<{ position: Position; createdAt: Date } | null> {
    let head: { position: Position; createdAt: Date } | null = null;
    const events = this.client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, filter: excludeSystemEvents() });
    for await (const { event } of events) if (event) head = { position: positionOf(event), createdAt: event.created };
    return head;
  }

  /** Counting is a scan of $all: it stops at `cap`. */
  async countAfter(after: Position | null, cap = 100_000): Promise<number> {
    let count = 0;
    for await (const _ of this.visibleEvents(after, cap)) count++;
    return count;
  }

  async countBetween(after: Position | null, until: Position): Promise<number> {
    let count = 0;
    // Exact, unlike countAfter's bounded scan: callers keep the count and only ever add to it.
    for await (const event of this.visibleEvents(after, Number.MAX_SAFE_INTEGER)) {
      // Positions compare as strings (readAll's `until` does the same).
      if (positionOf(event) > until) break;
      count++;
    }
    return count;
  }

  async close(): Promise<void> {
    this.signal.notify();
    await this.client.dispose();
  }
}

function withEventIds(appends: StreamAppend[]): PreparedAppend[] {
  // Lower case, as KurrentDB reports ids, so that the idempotency check finds them again.
  return appends.map((append) => ({
    ...append,
    events: append.events.map((event) => ({ ...event, id: (event.id ? event.id : newEventId()).toLowerCase() })),
  }));
}

function toEventData(event: PreparedEvent): EventData {
  return jsonEvent({
    id: event.id,
    type: event.type,
    // The client JSON-encodes any value; its type only admits objects, arrays and strings.
    data: (event.data ?? null) as JSONType,
    // Through JSON, as the PostgreSQL adapter stores it: undefined entries go (a multi-stream append rejects them).
    metadata: event.metadata === undefined ? undefined : (JSON.parse(JSON.stringify(event.metadata)) as EventMetadata),
  });
}

function toRecorded(event: ClientRecordedEvent): RecordedEvent {
  return {
    id: event.id,
    type: event.type,
    stream: event.streamId,
    revision: event.revision,
    position: positionOf(event),
    data: event.data,
    metadata: metadataOf(event.metadata),
    createdAt: event.created,
  };
}

function positionOf(event: { id: string; position?: LogPosition }): Position {
  if (!event.position) throw new Error(`Event ${event.id} came without its log position (stream reads report it from server 22.6 on)`);
  return formatPosition(event.position.commit, event.position.prepare);
}

/** Keys the server adds to the metadata of events written by a multi-stream append. */
const SERVER_PROPERTY = /^\$(schema|record)\./;

function metadataOf(metadata: unknown): EventMetadata {
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata) || metadata instanceof Uint8Array) return {};
  return Object.fromEntries(Object.entries(metadata).filter(([key]) => !SERVER_PROPERTY.test(key)));
}

function matches(event: ClientRecordedEvent, filter: EventFilter | undefined): boolean {
  return (!filter?.eventTypes || filter.eventTypes.includes(event.type)) && (!filter?.categories || filter.categories.includes(categoryOf(event.streamId)));
}

function wrongExpectedRevision(error: WrongExpectedVersionError, appends: PreparedAppend[]): WrongExpectedRevisionError {
  const append = appends.find((candidate) => candidate.stream === error.streamName);
  const actual = typeof error.actualState === 'bigint' && error.actualState >= 0n ? error.actualState : 'no_stream';
  return new WrongExpectedRevisionError(error.streamName, append ? (append.expectedRevision ?? 'any') : error.expectedState, actual);
}
