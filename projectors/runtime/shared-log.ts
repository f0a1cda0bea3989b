import type { EventStore, Position, RecordedEvent } from '../../infra/event-store/port.ts';

/** A page of the whole log (every event type): the runtime's unit of reading. */
export interface LogPage {
  after: Position | null;
  events: readonly RecordedEvent[];
  /** Where the page ends; equal to `after` for an empty page (nothing new past `after`). */
  checkpoint: Position | null;
  /** The page reached the head of the log when it was read. */
  isEnd: boolean;
  /** The store's append version when the read began: a wake-up after it means there may be more. */
  versionAtRead: number;
}

export interface SharedLogOptions {
  pageSize?: number;
  /** Events kept in memory for consumers that ask for the same page (default 40,000). */
  maxCachedEvents?: number;
}

/**
 * One reader of the log for every consumer of a process (DESIGN §3). Consumers at the same checkpoint ask
 * for the same page and get one read between them (concurrent asks share the read in flight, later ones the
 * cached page). Pages form a chain: the page after P ends at Q, the next one starts at Q. A consumer behind
 * (a new generation, a rebuild) reads pages bounded by the next known start in the chain, so it lands on the
 * chain and joins the others instead of reading the log on its own forever. Cached payloads are bounded;
 * an evicted page is read again with the same bounds, so it comes back identical.
 */
export class SharedLog {
  private readonly chain = new Map<string, Position>();
  private readonly cached = new Map<string, LogPage>();
  private cachedEvents = 0;
  private readonly inFlight = new Map<string, Promise<LogPage>>();
  /** Reads that went to the store, and asks served from memory (shared reads count as served). */
  readonly stats = { reads: 0, eventsRead: 0, served: 0 };

  constructor(
    private readonly store: EventStore,
    private readonly options: SharedLogOptions = {},
  ) {}

  private get pageSize(): number {
    return this.options.pageSize ?? 2000;
  }

  page(after: Position | null): Promise<LogPage> {
    const key = after ?? '';
    const hit = this.cached.get(key);
    if (hit) {
      this.stats.served++;
      return Promise.resolve(hit);
    }
    const flying = this.inFlight.get(key);
    if (flying) {
      this.stats.served++;
      return flying;
    }
    const read = this.read(after).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, read);
    return read;
  }

  private async read(after: Position | null): Promise<LogPage> {
    const key = after ?? '';
    const versionAtRead = this.store.appendVersion();
    const until = this.chain.get(key) ?? this.nextKnownStart(after);
    const read = await this.store.readAll({ after, limit: this.pageSize, until });
    this.stats.reads++;
    if (read.checkpoint === null) return { after, events: [], checkpoint: after, isEnd: true, versionAtRead };
    this.stats.eventsRead += read.events.length;
    const page: LogPage = { after, events: read.events, checkpoint: read.checkpoint, isEnd: read.isEnd, versionAtRead };
    this.remember(key, page);
    return page;
  }

  /** The smallest page start in the chain past `after`: where a read from `after` should stop to join it. */
  private nextKnownStart(after: Position | null): Position | undefined {
    let best: Position | undefined;
    for (const start of this.chain.keys()) {
      if (start === '' || (after !== null && start <= after)) continue;
      if (best === undefined || start < best) best = start;
    }
    return best;
  }

  private remember(key: string, page: LogPage): void {
    this.chain.set(key, page.checkpoint!);
    this.cached.set(key, page);
    this.cachedEvents += page.events.length;
    const limit = this.options.maxCachedEvents ?? 40_000;
    for (const [oldKey, old] of this.cached) {
      if (this.cachedEvents <= limit || oldKey === key) break;
      this.cached.delete(oldKey);
      this.cachedEvents -= old.events.length;
    }
    // The chain's skeleton is small (two positions a page); keep the newest few thousand starts.
    if (this.chain.size > 8192) {
      for (const oldKey of this.chain.keys()) {
        if (this.chain.size <= 4096) break;
        if (oldKey !== key) this.chain.delete(oldKey);
      }
    }
  }
}
