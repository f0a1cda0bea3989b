import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Database } from '../../infra/database.ts';
import type { Logger } from '../../infra/logging.ts';
import { backoff, sleep } from './transient.ts';

const key = (name: string, generation: number) => `${name}:${generation}`;

/**
 * The leases of one runner's generations, taken and renewed together in one statement every third of the
 * lease time, on the control session: never queued behind the pool, never waiting on a batch (leases have a
 * table of their own). A lease only keeps two runners from doing the same work; exactly-once is the
 * checkpoint's compare-and-set.
 */
export class LeaseKeeper {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly wanted = new Map<string, { name: string; generation: number }>();
  private held = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  /** The renewal running, which tells the leases it asked for (those wanted when it started). */
  private renewing: Promise<ReadonlySet<string>> | null = null;
  private failures = 0;

  constructor(
    private readonly database: Database,
    private readonly logger: Logger,
    private readonly leaseMs: number,
    /** How a worker waits before it asks again for a lease held elsewhere (tests watch it). */
    private readonly pause: (ms: number, signal: AbortSignal) => Promise<void> = sleep,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.renew(), Math.max(50, this.leaseMs / 3));
  }

  want(name: string, generation: number): void {
    this.wanted.set(key(name, generation), { name, generation });
  }

  forget(name: string, generation: number): void {
    this.wanted.delete(key(name, generation));
    this.held.delete(key(name, generation));
  }

  holds(name: string, generation: number): boolean {
    return this.held.has(key(name, generation));
  }

  /** Waits until the lease is held here (renewing at once when it is not), or the signal aborts. */
  async waitFor(name: string, generation: number, signal: AbortSignal): Promise<boolean> {
    const leaseKey = key(name, generation);
    while (!signal.aborted) {
      if (this.held.has(leaseKey)) return true;
      const asked = await this.renew();
      if (this.held.has(leaseKey)) return true;
      // The renewal it joined had started before this lease was wanted (a runner starts its workers one after
      // the other, and the first one's renewal is still running): it asks again at once. Waiting instead held
      // every worker but the first back for a second at each start (19 of the 20 of `rebuild --all`).
      if (this.wanted.has(leaseKey) && !asked.has(leaseKey)) continue;
      await this.pause(Math.min(1000, this.leaseMs / 3), signal);
    }
    return false;
  }

  renew(): Promise<ReadonlySet<string>> {
    this.renewing ??= this.renewOnce().finally(() => (this.renewing = null));
    return this.renewing;
  }

  private async renewOnce(): Promise<ReadonlySet<string>> {
    const wanted = [...this.wanted.values()];
    const asked = new Set(this.wanted.keys());
    if (wanted.length === 0) {
      this.held = new Set();
      return asked;
    }
    const names = wanted.map((lease) => lease.name);
    const generations = wanted.map((lease) => lease.generation);
    const text = `
      insert into projection_leases (name, generation, owner, until)
      select wanted.name, wanted.generation, $3, now() + make_interval(secs => $4::double precision / 1000)
      from unnest($1::text[], $2::int[]) as wanted(name, generation)
      on conflict (name, generation) do update set owner = excluded.owner, until = excluded.until
        where projection_leases.owner = excluded.owner or projection_leases.until < now()
      returning name, generation`;
    try {
      const rows = await this.database.control().query<{ name: string; generation: number }>(text, [names, generations, this.owner, this.leaseMs]);
      this.held = new Set(rows.map((row) => key(row.name, Number(row.generation))));
      this.failures = 0;
    } catch (error) {
      // Keep what is held until the lease would have run out; the checkpoint's compare-and-set protects the rest.
      this.failures++;
      if (this.failures * (this.leaseMs / 3) >= this.leaseMs) this.held = new Set();
      this.logger.warn({ err: error, failures: this.failures }, 'projection lease renewal failed; retrying');
      await sleep(backoff(this.failures, 1000));
    }
    return asked;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.renewing;
    // Whatever this owner still has in the table goes, even where its workers already stopped (and forgot
    // their leases): a runner started right after would otherwise wait for them to run out.
    this.wanted.clear();
    this.held = new Set();
    try {
      await this.database.control().query('delete from projection_leases where owner = $1', [this.owner]);
    } catch {
      // They run out by themselves.
    }
  }
}
