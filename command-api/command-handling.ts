import { hash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DomainError, type Decider, type DomainEvent } from '../domain/decider.ts';
import { badRequest, conflict, HttpError } from '../infra/http/errors.ts';
import { inSpan } from '../infra/tracing.ts';
import { AppendGuardError } from '../infra/event-store/append-guard.ts';
import {
  WrongExpectedRevisionError,
  type AppendGuard,
  type AppendResult,
  type EventMetadata,
  type EventStore,
  type NewEvent,
  type Position,
  type StreamAppend,
} from '../infra/event-store/port.ts';
import { streamStatesOf, type LoadedState, type Revision, type StreamStates } from './stream-states.ts';

/** One aggregate's part in a command: its stream, its decider, and the command for it. */
export interface CommandPart<Command = any, Event extends DomainEvent = any, State = any> {
  stream: string;
  decider: Decider<Command, Event, State>;
  command: Command;
  /** The stream is named by an id made for this command: decided on the initial state without a read (a clash is a conflict, then read). */
  newStream?: boolean;
  /** False for a stream written once and not decided on again soon (a custom event's): its state is not kept in the cache, where it would push out states that are. */
  keep?: boolean;
  /** True of a state on which this part's verdict is final (it rests on facts that never change once recorded): a cached one is trusted unread. */
  lasting?: (state: State) => boolean;
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
  /** The same request's fingerprint as records written before `fingerprint` sorted keys hold it: a match too. */
  legacyFingerprint?: string;
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
  response: RecordedResponse;
}

/**
 * A response as its record keeps it: the body as its JSON text (`json`), which `jsonb` keeps as it is, where it
 * reorders an object's keys (shortest first): a replay then answered the first body with its keys, the
 * client's payload's too, in another order. Records written before kept the body itself (`body`).
 */
interface RecordedResponse {
  status: number;
  json?: string;
  body?: unknown;
}

function recordedResponse(response: CommandResponse): RecordedResponse {
  const json = JSON.stringify(response.body) as string | undefined;
  return json === undefined ? { status: response.status } : { status: response.status, json };
}

function replayedResponse(recorded: RecordedResponse): CommandResponse {
  return { status: recorded.status, body: recorded.json === undefined ? recorded.body : JSON.parse(recorded.json) };
}

/**
 * Decisions a command may take before a stream that keeps changing under it is a 409, and the pause before
 * each new one: random up to 2, 4, 8 ... 64 ms (a second in all at most). With five at once, ten users
 * redeeming one multi-use link together were refused 3 times in 10, each one fine alone: every retry of
 * theirs met another's append.
 */
const MAX_ATTEMPTS = 10;
const retryPauseMs = (attempt: number) => Math.random() * Math.min(64, 2 ** attempt);

/** A fingerprint of a request body: of its JSON with keys sorted at every depth, so the same fields in another order are the same request. */
export function fingerprintOf(value: unknown): string {
  return hash('sha256', canonicalJson(value ?? null), 'hex');
}

/** JSON with every object's keys in sorted order (arrays keep theirs). */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item === undefined ? null : item)).join(',')}]`;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The `Idempotency-Key` record of a request: scoped to its method and path as express matches them (case and a
 * trailing slash aside: `POST /Communities/` is `POST /communities`, and a key retried on either finds the one
 * record), fingerprinted by its body in any key order (records written before match by `legacyFingerprint`).
 */
export function headerIdempotencyOf(organisationId: string, request: { method: string; originalUrl: string }, key: string, body: unknown): Idempotency {
  const path = request.originalUrl
    .split('?')[0]!
    .toLowerCase()
    .replace(/\/{2,}/g, '/')
    .replace(/(.)\/+$/, '$1');
  return {
    organisationId,
    scope: `${request.method} ${path}`,
    key,
    ...fingerprintsOf(body),
  };
}

/** A request body's fingerprint, and the one records written before keys were sorted hold for it (its JSON as parsed). */
export function fingerprintsOf(body: unknown): Pick<Idempotency, 'fingerprint' | 'legacyFingerprint'> {
  return { fingerprint: fingerprintOf(body), legacyFingerprint: parsedFingerprintOf(body) };
}

/**
 * The fingerprint of a body as a schema parsed it: the schema's output lists its keys in its own order, so the
 * JSON as it is needs no sorting (a custom event's nonce record, on the hot path).
 */
export function parsedFingerprintOf(value: unknown): string {
  return hash('sha256', JSON.stringify(value ?? null), 'hex');
}

export function idempotencyStream(idempotency: Pick<Idempotency, 'organisationId' | 'scope' | 'key'>): string {
  return `idempotency-${idempotency.organisationId}${hash('sha256', `${idempotency.scope}\n${idempotency.key}`, 'hex').slice(0, 32)}`;
}

/**
 * A stream's state as the domain sees it: its events folded with the decider's `evolve`, from this process's
 * cache of stream states plus the events appended after the cached revision (the whole stream the first
 * time). With `lasting`, a cached state it holds true of is answered without reading at all: for facts that
 * never change once recorded (a user's organisation and external id, a claimed external id). Treat the
 * state as read-only: it is shared with the cache.
 */
export async function aggregateStream<Event, State>(
  store: EventStore,
  stream: string,
  decider: Pick<Decider<unknown, Event, State>, 'initialState' | 'evolve'>,
  options: { lasting?: (state: State) => boolean } = {},
): Promise<State> {
  const states = streamStatesOf(store);
  const cached = await states.load(store, stream, decider);
  if (cached.current || options.lasting?.(cached.state)) return cached.state;
  return (await states.catchUp(store, stream, decider)).state;
}

interface Decided {
  part: CommandPart;
  events: DomainEvent[];
  /** The state the events were decided on, and its revision. */
  state: unknown;
  expectedRevision: Revision;
}

/**
 * Decides one part on the state of its stream, reading as little as the answer allows. A new stream (named
 * by an id made for this command) is decided on the initial state without a read. Otherwise the cached state
 * is used as it is when the part decides events (the append expects its revision: a stream that moved on
 * is a conflict, decided again on caught-up state) or when `lasting` says its verdict is final; a refusal
 * or a decision to append nothing on a cached state is made again on the current state first, since events
 * since may change it (a community created a moment ago). A retry (after a conflict) catches every stream up.
 */
async function decidePart(states: StreamStates, store: EventStore, part: CommandPart, retry: boolean): Promise<Decided> {
  let loaded: LoadedState<unknown> =
    part.newStream && !retry
      ? { state: part.decider.initialState, revision: 'no_stream', current: true }
      : await (retry ? states.catchUp(store, part.stream, part.decider) : states.load(store, part.stream, part.decider));
  const decide = () => part.decider.decide(part.command, loaded.state) as DomainEvent[];
  let events: DomainEvent[];
  try {
    events = decide();
  } catch (error) {
    if (loaded.current) throw error;
    loaded = await states.catchUp(store, part.stream, part.decider);
    events = decide();
  }
  if (events.length === 0 && !loaded.current && !part.lasting?.(loaded.state)) {
    const caughtUp = await states.catchUp(store, part.stream, part.decider);
    if (caughtUp.revision !== loaded.revision) {
      loaded = caughtUp;
      events = decide();
    }
  }
  return { part, events, state: loaded.state, expectedRevision: loaded.revision };
}

function decideAll(states: StreamStates, store: EventStore, parts: CommandPart[], attempt: number): Promise<Decided[]> {
  return inSpan(
    'engage.decide',
    () => Promise.all(parts.map((part) => decidePart(states, store, part, attempt > 1))),
    () => ({ 'engage.streams': parts.map((part) => part.stream), 'engage.attempt': attempt }),
  );
}

/** What the append of a decision writes; the idempotency record, when there is one, last. */
function appendsOf(decided: Decided[], metadata: EventMetadata, eventId: EventIdOf | undefined, record?: StreamAppend): StreamAppend[] {
  const appends: StreamAppend[] = decided
    .filter((d) => d.events.length > 0)
    .map((d) => ({
      stream: d.part.stream,
      expectedRevision: d.expectedRevision,
      events: d.events.map((event, index): NewEvent => ({
        ...(eventId ? { id: eventId(d.part.stream, event, index) } : {}),
        type: event.type,
        data: event.data,
        metadata,
      })),
    }));
  if (record) appends.push(record);
  return appends;
}

/** One statement's worth for a single stream; several streams atomically. */
async function appendAll(store: EventStore, appends: StreamAppend[], guard: AppendGuard | undefined): Promise<AppendResult[]> {
  if (appends.length === 1) {
    const [only] = appends;
    return [await store.append(only!.stream, only!.events, { expectedRevision: only!.expectedRevision ?? 'any', guard })];
  }
  return store.appendMultiple(appends, { guard });
}

/** After a successful append the cache holds each written stream's state with its new events. */
function rememberAppended(states: StreamStates, decided: Decided[], results: AppendResult[]): void {
  const revisions = new Map(results.map((result) => [result.stream, result.nextExpectedRevision]));
  for (const d of decided) {
    const revision = revisions.get(d.part.stream);
    if (d.events.length === 0 || revision === undefined || d.part.keep === false) continue;
    // Only an append right on top of the decided state is known to hold exactly these events (a job's
    // re-append of known ids answers with the first append's revision, decided on another state).
    const base = d.expectedRevision === 'no_stream' ? -1n : d.expectedRevision;
    if (revision === base + BigInt(d.events.length)) {
      states.remember(d.part.stream, d.part.decider.evolve, d.events.reduce(d.part.decider.evolve, d.state), revision);
    } else {
      states.forget(d.part.stream);
    }
  }
}

function recordAppend(idempotency: Idempotency, response: CommandResponse, metadata: EventMetadata): StreamAppend {
  const record: RequestCompleted = {
    scope: idempotency.scope,
    key: idempotency.key,
    fingerprint: idempotency.fingerprint,
    response: recordedResponse(response),
  };
  return { stream: idempotencyStream(idempotency), expectedRevision: 'no_stream', events: [{ type: 'RequestCompleted', data: record, metadata }] };
}

/** The first attempt's answer when the key was used before, else null; a different request under a used key is a 409. */
async function replayOf(store: EventStore, idempotency: Idempotency): Promise<Handled | null> {
  const [record] = await store.readStream(idempotencyStream(idempotency), { limit: 1 });
  if (!record) return null;
  const completed = record.data as RequestCompleted;
  const sameRequest = completed.fingerprint === idempotency.fingerprint || completed.fingerprint === idempotency.legacyFingerprint;
  if (!sameRequest && !idempotency.replayOnMismatch) {
    throw conflict(`This ${idempotency.scope === 'nonce' ? 'nonce' : 'Idempotency-Key'} was already used for a different request`);
  }
  return { events: [], results: [], position: record.position, response: replayedResponse(completed.response), replayed: true };
}

/** A refusal of the request (not a failure of the service): a used key answers with its first result instead. */
function isRefusal(error: unknown): boolean {
  return error instanceof DomainError || (error instanceof HttpError && error.status < 500);
}

/** How a job names the events it appends (derived from the job, so a job that runs again appends nothing new). */
export type EventIdOf = (stream: string, event: DomainEvent, index: number) => string;

export interface CommandOptions {
  eventId?: EventIdOf;
  /** The request's append guard (`Caller.appendGuard`): every append of the command carries it. */
  guard?: AppendGuard | undefined;
}

const stampedNow = (metadata: EventMetadata): EventMetadata => ({ ...metadata, occurredAt: metadata.occurredAt ?? new Date().toISOString() });

/**
 * Load each stream → fold → decide → append every part atomically, each at the revision it was decided
 * on. A concurrent writer makes the append fail; the whole decision is then retried on caught-up state a
 * bounded number of times before the caller gets a 409. States come from the process's cache of stream
 * states (`stream-states.ts`), checked as `decidePart` says, so a command on known streams reads nothing.
 * With an idempotency key, the response is recorded in the same append: the first attempt assumes the key
 * is new (the record's append expects no stream, so a used key fails the append, atomically), and a
 * refusal, a failed append and every retry look the record up and answer from it when it is there.
 * HTTP routes, the CLI and job handlers all come here.
 */
export async function handleCommand(
  store: EventStore,
  parts: CommandPart[],
  metadata: EventMetadata,
  respond: (events: DomainEvent[][]) => CommandResponse = () => ({ status: 200, body: null }),
  idempotency?: Idempotency,
  options: CommandOptions = {},
): Promise<Handled> {
  const states = streamStatesOf(store);
  const stamped = stampedNow(metadata);
  let recordRead = false;
  for (let attempt = 1; ; attempt++) {
    if (idempotency && attempt > 1) {
      const replay = await replayOf(store, idempotency);
      if (replay) return replay;
      recordRead = true;
    }
    let decided: Decided[];
    try {
      decided = await decideAll(states, store, parts, attempt);
    } catch (error) {
      // A used key answers with its first result even when the request would now be refused.
      const replay = idempotency && !recordRead && isRefusal(error) ? await replayOf(store, idempotency) : null;
      if (replay) return replay;
      throw error;
    }
    const events = decided.map((d) => d.events);
    const response = respond(events);
    const appends = appendsOf(decided, stamped, options.eventId, idempotency && recordAppend(idempotency, response, stamped));
    if (appends.length === 0) return { events, results: [], position: null, response, replayed: false };
    try {
      const results = await appendAll(store, appends, options.guard);
      rememberAppended(states, decided, results);
      return { events, results, position: results[results.length - 1]!.position, response, replayed: false };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      if (attempt >= MAX_ATTEMPTS) {
        const replay = idempotency ? await replayOf(store, idempotency) : null;
        if (replay) return replay;
        throw conflict(`${error.stream} kept changing while this request was decided; retry`);
      }
      await sleep(retryPauseMs(attempt));
    }
  }
}

export function idempotencyKeyOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (header.length < 1 || header.length > 255) throw badRequest([{ message: 'Idempotency-Key: 1 to 255 characters', path: ['Idempotency-Key'] }]);
  return header;
}

/** One command of a batch: what `handleCommand` takes, and how to handle it alone when it cannot go with the others. */
export interface BatchCommand {
  parts: CommandPart[];
  respond: (events: DomainEvent[][]) => CommandResponse;
  idempotency?: Idempotency;
  /** The command handled on its own (with its retries), after a conflict in the batch's append or with another command of the batch. */
  alone: () => Promise<Handled>;
}

export type BatchOutcome = { handled: Handled } | { error: unknown };

/**
 * Independent commands (a batch of custom events) decided together and appended in one atomic append: one
 * round trip for the lot in the common case. A command refused is that command's outcome, not the batch's.
 * A command whose key was used before answers from its record. A command that touches a stream another
 * command of the batch writes, one whose decision ran into a conflict, and every command of a batch whose
 * append failed on a concurrent write (after the used keys among them have been answered) are handled alone,
 * in order, each with `handleCommand`'s retries. Outcomes are in the commands' order.
 */
export async function handleCommandBatch(
  store: EventStore,
  commands: BatchCommand[],
  metadata: EventMetadata,
  options: Pick<CommandOptions, 'guard'> = {},
): Promise<BatchOutcome[]> {
  const states = streamStatesOf(store);
  const stamped = stampedNow(metadata);
  const outcomes: (BatchOutcome | undefined)[] = Array.from({ length: commands.length }, () => undefined);
  const decisions = await Promise.all(
    commands.map(async (command) => {
      try {
        return { decided: await decideAll(states, store, command.parts, 1) };
      } catch (error) {
        if (!command.idempotency || !isRefusal(error)) return { error, replay: null };
        return { error, replay: await replayOf(store, command.idempotency).catch((refused: unknown) => ({ refused })) };
      }
    }),
  );
  const deferred: number[] = [];
  const accepted: { index: number; decided: Decided[]; events: DomainEvent[][]; response: CommandResponse; appends: StreamAppend[] }[] = [];
  const written = new Set<string>();
  for (const [index, decision] of decisions.entries()) {
    const command = commands[index]!;
    if ('error' in decision) {
      if (decision.replay && 'refused' in decision.replay) outcomes[index] = { error: decision.replay.refused };
      else if (decision.replay) outcomes[index] = { handled: decision.replay };
      else if (decision.error instanceof DomainError && decision.error.kind === 'conflict') deferred.push(index);
      else outcomes[index] = { error: decision.error };
      continue;
    }
    const events = decision.decided.map((d) => d.events);
    let response: CommandResponse;
    try {
      response = command.respond(events);
    } catch (error) {
      outcomes[index] = { error };
      continue;
    }
    const appends = appendsOf(decision.decided, stamped, undefined, command.idempotency && recordAppend(command.idempotency, response, stamped));
    if (appends.length === 0) {
      outcomes[index] = { handled: { events, results: [], position: null, response, replayed: false } };
      continue;
    }
    // Two commands writing one stream cannot share an append (the second would expect the revision before the first).
    if (appends.some((append) => written.has(append.stream))) {
      deferred.push(index);
      continue;
    }
    for (const append of appends) written.add(append.stream);
    accepted.push({ index, decided: decision.decided, events, response, appends });
  }
  if (accepted.length > 0) {
    try {
      const results = await appendAll(
        store,
        accepted.flatMap((command) => command.appends),
        options.guard,
      );
      let offset = 0;
      for (const command of accepted) {
        const own = results.slice(offset, (offset += command.appends.length));
        rememberAppended(states, command.decided, own);
        outcomes[command.index] = {
          handled: { events: command.events, results: own, position: own[own.length - 1]!.position, response: command.response, replayed: false },
        };
      }
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      // Most often a replayed batch: its keys' records answer at once; the others go alone.
      const replays = await Promise.all(
        accepted.map(({ index }) => {
          const { idempotency } = commands[index]!;
          return idempotency
            ? replayOf(store, idempotency).then(
                (handled) => handled && { handled },
                (refused: unknown) => ({ error: refused }),
              )
            : Promise.resolve(null);
        }),
      );
      for (const [position, { index }] of accepted.entries()) {
        const replay = replays[position];
        if (replay) outcomes[index] = replay;
        else deferred.push(index);
      }
    }
  }
  for (const index of deferred.sort((a, b) => a - b)) {
    try {
      outcomes[index] = { handled: await commands[index]!.alone() };
    } catch (error) {
      // The request's token check refused the append (infra/auth.ts): the whole request is judged again.
      if (error instanceof AppendGuardError) throw error;
      outcomes[index] = { error };
    }
  }
  return outcomes.map((outcome) => outcome!);
}
