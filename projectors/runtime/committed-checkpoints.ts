import type { UntypedDb } from '../../infra/database.ts';
import type { Position } from '../../infra/event-store/port.ts';

interface Waiter {
  names: readonly string[];
  position: Position;
  wake: () => void;
}

/**
 * The checkpoints this process's runners have committed, per read model (the furthest any of its generations
 * reached). A read-your-writes wait in the same process (`ROLE=all`, the embedded default) sleeps between its
 * reads of the checkpoint rows; it is woken as soon as every read model it waits for has been reported past
 * its position, instead of at its next read, up to 50 ms later. The rows stay the truth: a wake-up only makes
 * the wait read them now, and a process whose runners hold none of those read models waits as before.
 */
export class CommittedCheckpoints {
  private readonly furthest = new Map<string, Position>();
  /** When a runner of this process last committed a checkpoint of each read model (the clock's milliseconds). */
  private readonly reportedAt = new Map<string, number>();
  private readonly waiters = new Set<Waiter>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A generation of `name` committed its checkpoint at `checkpoint`. */
  report(name: string, checkpoint: Position | null): void {
    if (checkpoint === null) return;
    this.reportedAt.set(name, this.now());
    const known = this.furthest.get(name);
    if (known !== undefined && known >= checkpoint) return;
    this.furthest.set(name, checkpoint);
    for (const waiter of this.waiters) if (this.passed(waiter.names, waiter.position)) waiter.wake();
  }

  /** Whether every one of `names` has been reported at or past `position`. */
  passed(names: readonly string[], position: Position): boolean {
    return names.every((name) => {
      const checkpoint = this.furthest.get(name);
      return checkpoint !== undefined && checkpoint >= position;
    });
  }

  /**
   * Whether runners of this process committed a checkpoint of every one of `names` in the last `withinMs`: they
   * run those read models now, so their next commit will be reported here and a wait may sleep until it.
   */
  reporting(names: readonly string[], withinMs: number): boolean {
    const since = this.now() - withinMs;
    return names.every((name) => (this.reportedAt.get(name) ?? -Infinity) >= since);
  }

  /**
   * Resolves after `ms`, or as soon as a report takes every one of `names` past `position`. When the reports
   * already say so (and the rows did not), it just sleeps: a wake-up on every later report would have the
   * caller read the rows at the pace of the commits.
   */
  pause(names: readonly string[], position: Position, ms: number): Promise<void> {
    const alreadyPassed = this.passed(names, position);
    return new Promise((resolve) => {
      const waiter: Waiter = { names, position, wake: () => done() };
      const timer = setTimeout(() => done(), ms);
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve();
      };
      if (!alreadyPassed) this.waiters.add(waiter);
    });
  }
}

/** One per database handle: the runners and the reads of one process that share it meet here. */
const registry = new WeakMap<UntypedDb, CommittedCheckpoints>();

export function committedCheckpointsOf(db: UntypedDb): CommittedCheckpoints {
  let checkpoints = registry.get(db);
  if (!checkpoints) registry.set(db, (checkpoints = new CommittedCheckpoints()));
  return checkpoints;
}
