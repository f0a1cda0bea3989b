/**
 * The event store port. Adapters: PostgreSQL and KurrentDB. Every adapter passes
 * test/event-store.contract.ts.
 */
import type { AppendGuard } from './append-guard.ts';

export type { AppendGuard } from './append-guard.ts';

/**
 * A totally ordered checkpoint in the global log, opaque to callers: 32 lowercase hex characters, so that
 * comparing two positions as strings compares them in log order. `null` means "before the first event".
 */
export type Position = string;

export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

export interface EventMetadata {
  organisationId?: string;
  causationId?: string;
  correlationId?: string;
  actor?: string;
  occurredAt?: string;
  [key: string]: unknown;
}

export interface NewEvent<Type extends string = string, Data = unknown> {
  /** A UUID; generated when absent. Re-appending the same ids is an idempotent no-op. */
  id?: string;
  type: Type;
  data: Data;
  metadata?: EventMetadata;
}

/** An event as the log records it, without its metadata: what a read model sees. */
export interface LoggedEvent<Type extends string = string, Data = unknown> {
  id: string;
  type: Type;
  stream: string;
  revision: bigint;
  position: Position;
  data: Data;
  createdAt: Date;
}

export interface RecordedEvent<Type extends string = string, Data = unknown> extends LoggedEvent<Type, Data> {
  metadata: EventMetadata;
}

/**
 * `guard`: a condition the append must hold to (append-guard.ts): a request's token taken from the cache
 * without the read that proves the cache exact. The PostgreSQL store checks it in the append's statement; a
 * store that cannot proves it first. Passed with each append, not found in the request's async context: an
 * `AsyncLocalStorage` turns on Node's promise hooks for every promise of the process (infra/database.ts
 * `startedWithoutBackgroundWork`).
 */
export interface AppendOptions {
  guard?: AppendGuard | undefined;
}

export interface StreamAppend {
  stream: string;
  events: NewEvent[];
  expectedRevision?: ExpectedRevision;
}

export interface AppendResult {
  stream: string;
  /** Revision of the stream's last event after the append: the expected revision for the next one. */
  nextExpectedRevision: bigint;
  /** Position of the last appended event. */
  position: Position;
}

export interface ReadStreamOptions {
  /** Revision to start at (inclusive); default: the first event forwards, the last event backwards. */
  from?: bigint;
  direction?: 'forwards' | 'backwards';
  limit?: number;
}

/** Both lists restrict (AND); within a list any entry matches (OR). A category is the stream name up to its first '-'. */
export interface EventFilter {
  eventTypes?: readonly string[];
  categories?: readonly string[];
}

export interface ReadAllOptions {
  after?: Position | null;
  /** Read no further than this position (inclusive): a page that must end where a known page begins. */
  until?: Position | null;
  limit?: number;
  filter?: EventFilter;
  /**
   * false: the events come without their metadata (an empty object in its place), for readers that never
   * look at it (read models): a store that can leaves it unread. Default true.
   */
  metadata?: boolean;
}

export interface ReadAllPage {
  /** Events that match the filter, in log order. */
  events: RecordedEvent[];
  /**
   * Where the read stopped: the position of the last event scanned, matching or not (null when nothing was
   * scanned). A reader resumes after it, so a filter that skips most of the log does not rescan it.
   */
  checkpoint: Position | null;
  /** True when the read reached the end of the visible log. */
  isEnd: boolean;
}

export interface SubscriptionBatch {
  events: RecordedEvent[];
  checkpoint: Position | null;
  /** True when the batch ends at the head of the log (the catch-up phase is over, for now). */
  caughtUp: boolean;
}

export interface SubscribeOptions {
  after?: Position | null;
  filter?: EventFilter;
  batchSize?: number;
}

/**
 * Catch-up then live. Yields batches in log order, each event exactly once; yields an empty batch with
 * `caughtUp: true` whenever it reaches the head, so a consumer knows it is current even when idle.
 */
export interface Subscription extends AsyncIterable<SubscriptionBatch> {
  close(): Promise<void>;
}

export interface EventStore {
  append(stream: string, events: NewEvent[], options?: { expectedRevision?: ExpectedRevision } & AppendOptions): Promise<AppendResult>;
  /** Appends to several streams atomically: all or none. */
  appendMultiple(appends: StreamAppend[], options?: AppendOptions): Promise<AppendResult[]>;
  readStream(stream: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  readAll(options?: ReadAllOptions): Promise<ReadAllPage>;
  subscribe(options?: SubscribeOptions): Subscription;
  /** The last visible position and when it was written, or null for an empty log. */
  head(): Promise<{ position: Position; createdAt: Date } | null>;
  /** Resolves when an append (here or, where the store can tell, elsewhere) may have landed, after `timeoutMs`, or on abort. */
  waitForAppends(timeoutMs: number, signal: AbortSignal): Promise<void>;
  /** Counts wake-ups seen so far: a wake-up that came during a read is not slept through. */
  appendVersion(): number;
  /** How many visible events come after `after` (bounded by `cap` where counting is a scan). */
  countAfter(after: Position | null, cap?: number): Promise<number>;
  /**
   * How many visible events come after `after`, up to and including `until` (a position the store has shown).
   * Such a count never changes: nothing lands at or before a visible position later, so callers may keep it
   * and count only what the log gained since (exact, even where counting is a scan).
   */
  countBetween(after: Position | null, until: Position): Promise<number>;
  close(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  readonly code = 'WRONG_EXPECTED_REVISION';
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly actual: bigint | 'no_stream',
  ) {
    super(`Stream ${stream}: expected revision ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

/** Some, but not all, of an append's event ids were appended before, or to another stream. */
export class EventIdConflictError extends Error {
  readonly code = 'EVENT_ID_CONFLICT';
  constructor(
    readonly stream: string,
    readonly eventIds: string[],
  ) {
    super(`Stream ${stream}: event ids already used by a different append: ${eventIds.join(', ')}`);
    this.name = 'EventIdConflictError';
  }
}

export function categoryOf(stream: string): string {
  const dash = stream.indexOf('-');
  return dash === -1 ? stream : stream.slice(0, dash);
}

export function formatPosition(major: bigint, minor: bigint): Position {
  return major.toString(16).padStart(16, '0') + minor.toString(16).padStart(16, '0');
}

export function parsePosition(position: Position): { major: bigint; minor: bigint } {
  if (!/^[0-9a-f]{32}$/.test(position)) throw new RangeError(`Not an event position: ${position}`);
  return { major: BigInt(`0x${position.slice(0, 16)}`), minor: BigInt(`0x${position.slice(16)}`) };
}

export function isPosition(value: string): boolean {
  return /^[0-9a-f]{32}$/.test(value);
}

/** Positions compare as strings; null (before the first event) comes first. */
export function isAtOrAfter(position: Position | null, target: Position | null): boolean {
  if (target === null) return true;
  return position !== null && position >= target;
}
