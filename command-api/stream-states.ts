import type { Decider } from '../domain/decider.ts';
import type { EventStore } from '../infra/event-store/port.ts';

/** A stream's revision: its last event's, or `no_stream` before its first. */
export type Revision = bigint | 'no_stream';

type Evolve = Decider<any, any, any>['evolve'];
type Folding<State> = Pick<Decider<unknown, any, State>, 'initialState' | 'evolve'>;

/** A stream's state folded up to a revision, and whether it was read from the store just now. */
export interface LoadedState<State> {
  state: State;
  revision: Revision;
  /** False when it came from the cache unchecked: events after `revision` may exist. */
  current: boolean;
}

interface Entry {
  evolve: Evolve;
  state: unknown;
  revision: Revision;
  /** Used since the last sweep (see `sweep`). */
  used: boolean;
}

/** Streams whose state this process keeps (those not used lately dropped first). */
export const STREAM_STATE_CAPACITY = 10_000;

/**
 * The folded state of recently used streams, keyed by stream, with the revision it was folded up to. Events
 * are never changed or removed, so an entry is always a true prefix of its stream: reading only the events
 * after its revision brings it up to date, and a decision made on it is checked by the append's expected
 * revision (a stream that moved on is a conflict, the command is decided again on caught-up state). Every
 * process has its own; nothing here has to be told of writes made elsewhere. A state folded by another
 * decider's `evolve` is a different state: such an entry counts as a miss.
 */
export class StreamStates {
  private readonly entries = new Map<string, Entry>();

  constructor(readonly capacity = STREAM_STATE_CAPACITY) {}

  get size(): number {
    return this.entries.size;
  }

  /** Whether a state of this stream is kept (without counting as a use). */
  has(stream: string): boolean {
    return this.entries.has(stream);
  }

  /** The cached state (unchecked), else the whole stream read and folded. */
  async load<State>(store: EventStore, stream: string, decider: Folding<State>): Promise<LoadedState<State>> {
    const entry = this.entryOf(stream, decider);
    if (entry) return { state: entry.state as State, revision: entry.revision, current: false };
    return this.catchUp(store, stream, decider);
  }

  /** The state with every event appended so far: the cached state plus the events after its revision, or the whole stream. */
  async catchUp<State>(store: EventStore, stream: string, decider: Folding<State>): Promise<LoadedState<State>> {
    const entry = this.entryOf(stream, decider);
    const from = entry && entry.revision !== 'no_stream' ? entry.revision + 1n : undefined;
    const events = await store.readStream(stream, from === undefined ? {} : { from });
    let state = (entry ? entry.state : decider.initialState) as State;
    let revision: Revision = entry ? entry.revision : 'no_stream';
    for (const event of events) {
      state = decider.evolve(state, { type: event.type, data: event.data });
      revision = event.revision;
    }
    // A concurrent catch-up may have stored a later revision meanwhile; the later one stays.
    const now = this.entryOf(stream, decider);
    if (!now || later(revision, now.revision)) this.remember(stream, decider.evolve, state, revision);
    else if (later(now.revision, revision)) return { state: now.state as State, revision: now.revision, current: true };
    return { state, revision, current: true };
  }

  /** Records the state a successful append left: `state` at `revision`. */
  remember(stream: string, evolve: Evolve, state: unknown, revision: Revision): void {
    const entry = this.entries.get(stream);
    if (entry) {
      entry.evolve = evolve;
      entry.state = state;
      entry.revision = revision;
      entry.used = true;
      return;
    }
    this.entries.set(stream, { evolve, state, revision, used: false });
    if (this.entries.size > this.capacity) this.sweep();
  }

  /**
   * Drops entries not used lately, down to nine tenths of the capacity at once (the clock algorithm: the oldest
   * first, each one used since the last sweep spared once, its mark cleared). A use only marks its entry: moving
   * it to the end of the Map (a delete and a set) on every hit left the Map a hole each, rebuilt as they piled
   * up, 3.6% of the command API's time when each custom event creates its user. A Map keeps its deleted entries
   * as holes until it is rebuilt, and finding its oldest key walks them, so a sweep drops a tenth at once: one
   * entry per new stream cost 10 µs an insert once the cache was full.
   */
  private sweep(): void {
    let excess = this.entries.size - (this.capacity - Math.floor(this.capacity / 10));
    // Twice at most: the first pass may spare every entry, clearing their marks, and the second then drops.
    for (let pass = 0; pass < 2 && excess > 0; pass++) {
      for (const [stream, entry] of this.entries) {
        if (excess <= 0) break;
        if (entry.used) entry.used = false;
        else {
          this.entries.delete(stream);
          excess--;
        }
      }
    }
  }

  forget(stream: string): void {
    this.entries.delete(stream);
  }

  private entryOf(stream: string, decider: Folding<unknown>): Entry | undefined {
    const entry = this.entries.get(stream);
    if (!entry || entry.evolve !== decider.evolve) return undefined;
    entry.used = true;
    return entry;
  }
}

function later(a: Revision, b: Revision): boolean {
  if (a === 'no_stream') return false;
  return b === 'no_stream' || a > b;
}

const byStore = new WeakMap<EventStore, StreamStates>();

/** The cache of this store's stream states (one per store object, so each test service has its own). */
export function streamStatesOf(store: EventStore): StreamStates {
  let states = byStore.get(store);
  if (!states) byStore.set(store, (states = new StreamStates()));
  return states;
}
