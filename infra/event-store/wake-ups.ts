/**
 * When this process wakes other processes' subscribers after its appends (a NOTIFY), and how: carried in an
 * append statement's own transaction, or as a statement of its own. At most one NOTIFY per `intervalMs` under a
 * steady stream of commits; a lone commit's goes at once.
 *
 * An append statement sent when a NOTIFY is due carries it (`carry`): it is delivered with that statement's
 * commit, for no round trip or commit of its own. Before, every group commit was followed by a NOTIFY statement
 * (rate-limited): 833 of the command API's 1,895 statements in a run of custom events at 16 connections.
 * PostgreSQL queues a transaction's notifications under one lock held through its commit, so only the
 * statements that carry one wait on each other, and at most one does per interval.
 *
 * Every committed append must be followed by a NOTIFY committed after it. A commit that carried none leaves one
 * pending (`committed(null)`), sent on its own once due (`next`), unless a statement sent after that commit
 * carried one meanwhile: it commits after it, so it covers it. Tokens order the two: each carry and each
 * pending commit takes the next number, and a carried NOTIFY covers what was pending only when its number is
 * the later one.
 */
export class WakeUps {
  private counter = 0;
  /** The number of the latest commit that no NOTIFY covers yet; null when none waits. */
  private pendingSince: number | null = null;
  /** When the last NOTIFY was sent, carried or alone (`now()` of the caller). */
  private sentAt = -Infinity;

  constructor(private readonly intervalMs: number) {}

  /** A token when a statement sent now may carry the NOTIFY (it is due), else null. */
  carry(now: number): number | null {
    if (now - this.sentAt < this.intervalMs) return null;
    this.sentAt = now;
    return ++this.counter;
  }

  /** A commit happened: `carried` is the token of the NOTIFY its statement carried, or null for none. */
  committed(carried: number | null): void {
    if (carried === null) this.pendingSince = ++this.counter;
    else if (this.pendingSince !== null && this.pendingSince < carried) this.pendingSince = null;
  }

  /** Whether a commit waits for a NOTIFY of its own. */
  get pending(): boolean {
    return this.pendingSince !== null;
  }

  /**
   * For the NOTIFY sent alone: 'send' when it is due (it is then taken as sent: everything pending is covered),
   * the milliseconds until it is due, or 'none' when nothing waits.
   */
  next(now: number): 'send' | 'none' | number {
    if (this.pendingSince === null) return 'none';
    const wait = this.sentAt + this.intervalMs - now;
    if (wait > 0) return wait;
    this.sentAt = now;
    this.pendingSince = null;
    return 'send';
  }
}
