import type { EventFilter, Position, ReadAllPage, Subscription, SubscriptionBatch } from './port.ts';

export interface PollingSource {
  readAll(options: { after: Position | null; limit: number; filter?: EventFilter }): Promise<ReadAllPage>;
  /** Resolves when new events may have been appended, or after `timeoutMs`, or when `signal` aborts. */
  waitForAppends(timeoutMs: number, signal: AbortSignal): Promise<void>;
  /** Counts wake-ups seen so far, where the source has them: a wake-up during a read is not slept through. */
  appendVersion?(): number;
}

/**
 * The subscription loop shared by adapters whose source of truth is a read in batches: read until the
 * head, say so once, then sleep until an append wakes it (a wake-up is only a hint; polling stays the truth).
 */
export function pollingSubscription(
  source: PollingSource,
  options: { after?: Position | null; filter?: EventFilter; batchSize?: number; idlePollMs?: number },
): Subscription {
  const controller = new AbortController();
  const batchSize = options.batchSize ?? 500;
  const idlePollMs = options.idlePollMs ?? 1000;
  let checkpoint = options.after ?? null;

  async function* batches(): AsyncGenerator<SubscriptionBatch> {
    let announcedCaughtUp = false;
    while (!controller.signal.aborted) {
      const versionBeforeRead = source.appendVersion?.();
      const page = await source.readAll({ after: checkpoint, limit: batchSize, filter: options.filter });
      if (controller.signal.aborted) return;
      if (page.checkpoint !== null) {
        checkpoint = page.checkpoint;
        announcedCaughtUp = page.isEnd;
        yield { events: page.events, checkpoint, caughtUp: page.isEnd };
        if (!page.isEnd) continue;
      } else if (!announcedCaughtUp) {
        announcedCaughtUp = true;
        yield { events: [], checkpoint, caughtUp: true };
      }
      if (versionBeforeRead === undefined || versionBeforeRead === source.appendVersion?.()) {
        await source.waitForAppends(idlePollMs, controller.signal);
      }
    }
  }

  const iterator = batches();
  return {
    [Symbol.asyncIterator]: () => iterator,
    async close() {
      controller.abort();
      await iterator.return(undefined);
    },
  };
}

/** Wakes sleepers when an append may have happened: many waiters, one signal. */
export class AppendSignal {
  private waiters = new Set<() => void>();
  version = 0;

  notify(): void {
    this.version++;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  wait(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }
}
