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
  /**
   * How many pages a building generation may run ahead of the slowest other building generation (default 6):
   * a rebuild of many read models then reads each page once and keeps only a few in memory. Live generations
   * never wait, and a building one waits at most `maxWaitMs` for the others (default 2 s), so a stuck one
   * slows the rest without stopping them.
   */
  buildingWindow?: number;
  maxWaitMs?: number;
  /** Whether its consumers need the events' metadata (process managers do; read models never read it). Default true. */
  metadata?: boolean;
}

/** Who asks for a page: the runtime's worker, so that building generations keep together. */
export interface LogReader {
  readonly id: string;
  readonly building: boolean;
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
  /** No page start in the chain is past this one (it may itself have left the chain): a read past it stops nowhere. */
  private lastStart: Position | null = null;
  private readonly cached = new Map<string, LogPage>();
  private cachedEvents = 0;
  private readonly inFlight = new Map<string, Promise<LogPage>>();
  /** Each known page start's place in the chain, counted from this process's first read. */
  private readonly index = new Map<string, number>();
  private nextIndex = 0;
  /** Where each building reader stands in the chain (the index of the page it asked for last). */
  private readonly building = new Map<string, number>();
  private moved: { promise: Promise<void>; resolve: () => void } = settled();
  /** Reads that went to the store, and asks served from memory (shared reads count as served). */
  readonly stats = { reads: 0, eventsRead: 0, served: 0 };

  constructor(
    private readonly store: EventStore,
    private readonly options: SharedLogOptions = {},
  ) {}

  private get pageSize(): number {
    return this.options.pageSize ?? 2000;
  }

  /** The page after `after`; a building reader first waits until the slowest other building reader is close. */
  async page(after: Position | null, reader?: LogReader): Promise<LogPage> {
    const key = after ?? '';
    if (reader) await this.keepTogether(key, reader);
    return this.fetchPage(after);
  }

  /**
   * The page after `after` if it is in memory already (another consumer read it), without reading or
   * waiting: a live consumer that waited for its turn to write takes what arrived meanwhile into the same batch.
   */
  cachedPage(after: Position | null): LogPage | undefined {
    const page = this.cached.get(after ?? '');
    if (page) this.stats.served++;
    return page;
  }

  /**
   * Reads up to `pages` pages after `after` in the background for the only building reader, so that its next
   * batch is in memory when it asks: a rebuild of one read model then reads the log while it writes, not in
   * turn (the bench's standings alone: a fifth less wall time). Building readers together read ahead of the
   * slowest already, within the window; a prefetch there only competed with them (a rebuild of all read
   * models took 10-20% longer), so it is left to a reader alone. A failed read is left to the reader's own
   * ask, which reads again.
   */
  prefetch(after: Position | null, pages: number, reader: LogReader): void {
    if (this.building.size !== 1 || !this.building.has(reader.id)) return;
    void (async () => {
      let from = after;
      for (let read = 0; read < pages; read++) {
        const page = await this.fetchPage(from);
        if (page.isEnd || page.checkpoint === from) return;
        from = page.checkpoint;
      }
    })().catch(() => undefined);
  }

  /** A reader is done (its worker stopped, or its generation went live): nobody waits for it any more. */
  leave(reader: LogReader): void {
    if (this.building.delete(reader.id)) {
      this.dropPassed();
      this.wake();
    }
  }

  private async keepTogether(key: string, reader: LogReader): Promise<void> {
    const at = this.index.get(key);
    if (!reader.building) {
      if (this.building.delete(reader.id)) this.wake();
      return;
    }
    if (at === undefined) return;
    if (this.building.get(reader.id) !== at) {
      this.building.set(reader.id, at);
      this.dropPassed();
      this.wake();
    }
    const window = this.options.buildingWindow ?? 6;
    const deadline = Date.now() + (this.options.maxWaitMs ?? 2000);
    for (;;) {
      let slowest = Infinity;
      for (const [id, index] of this.building) if (id !== reader.id && index < slowest) slowest = index;
      if (slowest === Infinity || at - slowest <= window) return;
      const left = deadline - Date.now();
      if (left <= 0) return;
      const { promise } = this.moved;
      await Promise.race([promise, new Promise((resolve) => setTimeout(resolve, left))]);
    }
  }

  /**
   * While generations build, a page every building reader has passed leaves the cache at once: none of them
   * asks for it again, and live readers read at the head. Kept until the cache's bound instead, it held memory
   * for nothing: a rebuild of one read model peaked 20-45 MB higher (the bench's store, 2026-12-07; its time
   * and its collector's the same within the VM's swings). A reader that does ask again reads it again.
   */
  private dropPassed(): void {
    if (this.building.size === 0) return;
    let slowest = Infinity;
    for (const index of this.building.values()) if (index < slowest) slowest = index;
    for (const [key, page] of this.cached) {
      if ((this.index.get(key) ?? Infinity) >= slowest) continue;
      this.cached.delete(key);
      this.cachedEvents -= page.events.length;
    }
  }

  private wake(): void {
    const { resolve } = this.moved;
    this.moved = settled();
    resolve();
  }

  private fetchPage(after: Position | null): Promise<LogPage> {
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
    const read = await this.store.readAll({ after, limit: this.pageSize, until, metadata: this.options.metadata ?? true });
    this.stats.reads++;
    if (read.checkpoint === null) return { after, events: [], checkpoint: after, isEnd: true, versionAtRead };
    this.stats.eventsRead += read.events.length;
    const page: LogPage = { after, events: read.events, checkpoint: read.checkpoint, isEnd: read.isEnd, versionAtRead };
    this.remember(key, page);
    return page;
  }

  /** The smallest page start in the chain past `after`: where a read from `after` should stop to join it. */
  private nextKnownStart(after: Position | null): Position | undefined {
    // At the head, where live consumers read, the walk over thousands of starts found nothing every time.
    if (after !== null && (this.lastStart === null || after >= this.lastStart)) return undefined;
    let best: Position | undefined;
    for (const start of this.chain.keys()) {
      if (start === '' || (after !== null && start <= after)) continue;
      if (best === undefined || start < best) best = start;
    }
    return best;
  }

  private remember(key: string, page: LogPage): void {
    this.chain.set(key, page.checkpoint!);
    if (key !== '' && (this.lastStart === null || key > this.lastStart)) this.lastStart = key;
    if (!this.index.has(key)) this.index.set(key, this.nextIndex++);
    if (!this.index.has(page.checkpoint!)) this.index.set(page.checkpoint!, this.nextIndex++);
    this.cached.set(key, page);
    this.cachedEvents += page.events.length;
    const limit = this.options.maxCachedEvents ?? 40_000;
    // Pages no building reader still needs go first, then the oldest.
    let slowest = Infinity;
    for (const index of this.building.values()) slowest = Math.min(slowest, index);
    for (const [oldKey, old] of this.cached) {
      if (this.cachedEvents <= limit) break;
      if (oldKey === key || (this.index.get(oldKey) ?? -1) >= slowest) continue;
      this.cached.delete(oldKey);
      this.cachedEvents -= old.events.length;
    }
    for (const [oldKey, old] of this.cached) {
      if (this.cachedEvents <= limit || oldKey === key) break;
      this.cached.delete(oldKey);
      this.cachedEvents -= old.events.length;
    }
    // The chain's skeleton is small (two positions a page); keep the newest few thousand starts.
    if (this.chain.size > 8192) {
      for (const oldKey of this.chain.keys()) {
        if (this.chain.size <= 4096) break;
        if (oldKey !== key) {
          this.chain.delete(oldKey);
          this.index.delete(oldKey);
        }
      }
    }
  }
}

function settled(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
