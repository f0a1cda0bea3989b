import { setMaxListeners } from 'node:events';
import { inBackground, type Database } from '../../infra/database.ts';
import { Slots } from '../../infra/slots.ts';
import type { EventStore, Position, SubscriptionBatch } from '../../infra/event-store/port.ts';
import type { Logger } from '../../infra/logging.ts';
import type { Consumer } from './consumer.ts';
import { activeGenerations } from './generations.ts';
import { LeaseKeeper } from './leases.ts';
import { LivePacing } from './pacing.ts';
import { SharedLog } from './shared-log.ts';
import { CheckpointMoves, GenerationWorker } from './worker.ts';

export interface RuntimeOptions {
  /** Events per page of the shared log. */
  batchSize?: number;
  leaseMs?: number;
  /** How often the runner looks for generations to work on (a rebuild requested elsewhere, a swap). */
  scanIntervalMs?: number;
  /** Batches applied at once in this process (default: half the pool, at least one). */
  concurrency?: number;
  /** Events kept in memory for consumers reading the same pages. */
  maxCachedEvents?: number;
  /** How many pages a building generation may run ahead of the slowest other one (see SharedLog). */
  buildingWindow?: number;
  /** A building generation's batch: at most this many pages (default 4) and this many of its events (default 20,000). */
  buildingBatchPages?: number;
  buildingBatchEvents?: number;
  idlePollMs?: number;
  /** The period of a live consumer's batches under a steady stream of appends (see WorkerOptions; default: `LivePacing`'s). */
  liveBatchIntervalMs?: number;
  /** Events a process manager handles in one transaction (see WorkerOptions). */
  processManagerBatch?: number;
  /**
   * In a process that serves requests: the mean number in flight since the previous call, which tells the
   * live period (`LivePacing`) whether the API is saturated.
   */
  requestsInFlight?: () => number;
  /** Called inside a batch's transaction after its events were applied and before its checkpoint commits. */
  onBatchApplied?: (name: string, generation: number, batch: SubscriptionBatch) => Promise<void> | void;
  /** Called once a generation's checkpoint has committed (see WorkerOptions). */
  onCheckpoint?: (name: string, generation: number, checkpoint: Position | null) => void;
}

/** How often a runner deletes the `projection_heads` rows whose claims no longer count (and at its start and stop). */
const TIDY_HEADS_EVERY_MS = 60_000;

/**
 * Runs a worker for every generation of the given consumers that this code can drive (live or building,
 * at the code's version), all fed by one shared reader of the log. Two runners, in one process or many,
 * never both apply a batch: the checkpoint moves by compare-and-set in the batch's own transaction, and a
 * lease keeps them from trying. The process uses its pool plus the LISTEN and control connections, whatever
 * the number of consumers.
 */
export class ProjectionRunner {
  private readonly workers = new Map<string, GenerationWorker>();
  private readonly stopped = new AbortController();
  private readonly leases: LeaseKeeper;
  readonly log: SharedLog;
  private readonly moves: CheckpointMoves;
  private readonly limiter: Slots;
  private readonly pacing: LivePacing;
  private scanning: Promise<void> | null = null;
  private tidiedAt = Date.now();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly database: Database,
    private readonly store: EventStore,
    private readonly consumers: readonly Consumer[],
    private readonly logger: Logger,
    private readonly options: RuntimeOptions = {},
  ) {
    this.leases = new LeaseKeeper(database, logger, options.leaseMs ?? 15_000);
    this.log = new SharedLog(store, {
      pageSize: options.batchSize ?? 5000,
      maxCachedEvents: options.maxCachedEvents,
      buildingWindow: options.buildingWindow,
      // A runner of read models only (a rebuild) leaves the metadata unread: they never see it.
      metadata: consumers.some((consumer) => consumer.kind !== 'projection'),
    });
    this.moves = new CheckpointMoves(database.db, this.leases.owner);
    this.limiter = new Slots(options.concurrency ?? 4);
    this.pacing = new LivePacing({ requestsInFlight: options.requestsInFlight });
  }

  get owner(): string {
    return this.leases.owner;
  }

  async start(): Promise<void> {
    // Every worker's sleeps listen for the stop: more than Node's default ten.
    setMaxListeners(0, this.stopped.signal);
    this.leases.start();
    await this.tidyHeads();
    await this.scan();
    this.timer = setInterval(() => void this.scan(), this.options.scanIntervalMs ?? 1000);
  }

  /** Looks for generations without a worker here (a rebuild requested by the CLI, a swap) and starts them. */
  scan(): Promise<void> {
    this.scanning ??= this.scanOnce().finally(() => (this.scanning = null));
    return this.scanning;
  }

  private async scanOnce(): Promise<void> {
    if (this.stopped.signal.aborted) return;
    // Claims of processes that died stop counting once their consumers' rows move on; their rows go here too.
    if (Date.now() - this.tidiedAt >= TIDY_HEADS_EVERY_MS) {
      this.tidiedAt = Date.now();
      await this.tidyHeads();
    }
    let rows;
    try {
      rows = await activeGenerations(this.database.db);
    } catch (error) {
      this.logger.warn({ err: error }, 'projection scan failed');
      return;
    }
    for (const row of rows) {
      if (this.stopped.signal.aborted) return;
      const consumer = this.consumers.find((candidate) => candidate.name === row.name);
      const key = `${row.name}:${row.generation}`;
      if (!consumer || consumer.version !== row.version || this.workers.has(key)) continue;
      const worker = new GenerationWorker(
        {
          database: this.database,
          store: this.store,
          log: this.log,
          leases: this.leases,
          moves: this.moves,
          limiter: this.limiter,
          pacing: this.pacing,
          logger: this.logger,
          options: {
            idlePollMs: this.options.idlePollMs,
            liveBatchIntervalMs: this.options.liveBatchIntervalMs,
            processManagerBatch: this.options.processManagerBatch,
            onBatchApplied: this.options.onBatchApplied,
            onCheckpoint: this.options.onCheckpoint,
            buildingBatchPages: this.options.buildingBatchPages,
            buildingBatchEvents: this.options.buildingBatchEvents,
          },
        },
        consumer,
        row.generation,
      );
      this.workers.set(key, worker);
      this.leases.want(row.name, row.generation);
      void inBackground(() => worker.run(this.stopped.signal)).finally(() => {
        this.workers.delete(key);
        this.leases.forget(row.name, row.generation);
      });
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.stopped.abort();
    await this.scanning;
    await Promise.all([...this.workers.values()].map((worker) => worker.finished));
    await this.tidyHeads();
    await this.leases.stop();
  }

  /** Announcements no longer counted go (`CheckpointMoves.tidy`); a failure only leaves them for the next time. */
  private async tidyHeads(): Promise<void> {
    await this.moves.tidy().catch((error: unknown) => this.logger.warn({ err: error }, 'projection heads: tidying failed'));
  }
}
