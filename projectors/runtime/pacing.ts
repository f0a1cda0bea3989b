import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/**
 * The periods a live consumer's batches may take under a steady stream of appends (see `GenerationWorker.pace`),
 * shortest first. Each one divides the next, so the ticks of a longer period are ticks of the shorter ones too:
 * workers that read the period a moment apart still meet on the same tick.
 *
 * Up to 240 ms, not 60: role `all` saturated by 16 connections served 15% more requests (three interleaved
 * pairs, known users 3,073 against 2,622 req/s, new users 2,143 against 1,851, 0.36-0.41 ms of CPU a new
 * user's request against 0.40-0.47), and the live-lag bench's write capacity rose by a fifth (three pairs:
 * 697-727 writes/s against 564-646). The lag at the same rate is the same (p99 55-71 ms at 300 writes/s
 * against 61-68); at half the higher capacity it is higher (84-103 ms at 348-364), as any load closer to the
 * machine's limit. 480 ms gained nothing more.
 */
export const LIVE_PERIODS_MS = [15, 30, 60, 120, 240] as const;

/**
 * When the period steps up a level, and when down again, from the event loop's utilisation (the share of the
 * time it was busy) and, in a process serving the API, the mean number of requests in flight, both smoothed
 * over about a second. The gaps between up and down keep a load near a threshold from flapping.
 *
 * The loop alone does not tell a saturated process from a busy one: the live-lag bench at half the write
 * capacity (its writers and every consumer in one process, 15 ms) sampled 0.75-0.99, 0.83 at the median,
 * and role `all` saturated by 16 connections 0.93-0.95 smoothed (the loop waits on PostgreSQL, which shares
 * the cores). Stepping up at 0.93 moved the first's lag p99 from 62-72 ms to 85-89, at 0.92 to 115; at 0.95
 * the second stayed at 15 ms most of the time. Requests in flight do tell them apart: about 1 in the first (a
 * write takes a few ms at 230 a second), 16 in the second, whose requests queue behind its own work.
 */
export const LOOP_ONLY = { up: 0.95, down: 0.85 } as const;
export const WITH_REQUESTS = { up: 0.85, down: 0.8, queuedAt: 4, drainedBelow: 2 } as const;

/** How long one sample of the event loop lasts, and the weight of the newest one in the smoothed utilisation (about a second's worth). */
export const SAMPLE_MS = 250;
const NEWEST_WEIGHT = 0.3;

/** A process's load, smoothed: its event loop's utilisation (0 to 1) and, when it serves requests, their mean number in flight. */
export interface Load {
  utilization: number;
  inFlight?: number;
}

/** Whether a process under `load` is saturated: requests queue in it while its loop is busy, or, serving none, its loop is busy alone. */
function saturated(load: Load): boolean {
  if (load.inFlight === undefined) return load.utilization >= LOOP_ONLY.up;
  return load.utilization >= WITH_REQUESTS.up && load.inFlight >= WITH_REQUESTS.queuedAt;
}

/** Whether a process under `load` has room again: its requests drained or its loop idles more. */
function hasRoom(load: Load): boolean {
  if (load.inFlight === undefined) return load.utilization < LOOP_ONLY.down;
  return load.utilization < WITH_REQUESTS.down || load.inFlight < WITH_REQUESTS.drainedBelow;
}

/**
 * The next level (an index into `LIVE_PERIODS_MS`) for a process at `level` under `load` (smoothed): one step
 * at a time, up when saturated, down when it has room again. In a process serving requests, `latest` (the last
 * sample alone) also steps it up when requests queued deep in that sample, and holds it until both have room:
 * smoothed from an idle start, the load took ten samples (2.5 s) to cross the thresholds, and a 3 s run of the
 * write-path bench spent most of itself at 15 and 30 ms (role `all` at 16 connections, 11-12 requests in
 * flight: 0.21-0.385 of the reference between runs; two samples to 60 ms since). Deep, not merely queued: at 4,
 * the live-lag bench's capacity phase (8 writers) stepped up at once and measured 603-734 writes/s against
 * 390-443, and its lag phase at half of that, 15 ms batches on a machine then near saturation, had a p99 of
 * 101-119 ms (80 at 200 writes/s with 8); deep queues leave that phase to the smoothed load as before. A loop
 * busy alone is judged smoothed only: one long batch is not a saturated process.
 */
export function nextLevel(level: number, load: Load, latest?: Load): number {
  const serving = latest?.inFlight !== undefined;
  if (level > 0 && hasRoom(load) && (!serving || hasRoom(latest))) return level - 1;
  if (level < LIVE_PERIODS_MS.length - 1 && (saturated(load) || (serving && deeplyQueued(latest)))) return level + 1;
  return level;
}

/** A sample in which requests queued deep (twice `queuedAt`) while the loop was busy: a saturated process, at once. */
function deeplyQueued(latest: Load): boolean {
  return latest.utilization >= WITH_REQUESTS.up && (latest.inFlight ?? 0) >= 2 * WITH_REQUESTS.queuedAt;
}

/** A measure smoothed with a new sample (exponentially weighted). */
export function smoothed(previous: number, sample: number): number {
  return previous + NEWEST_WEIGHT * (sample - previous);
}

/**
 * The period of this process's live batches, from how saturated it is (see `LOOP_ONLY`, `WITH_REQUESTS`). Every
 * batch costs a few round trips and statements whatever it holds (begin with the checkpoint's compare-and-set,
 * the writes, commit), so with a period of 15 ms a process whose API is saturated spent most of its time on
 * them: role `all` at 16 connections, custom events, 804-818 req/s (1.07 statements a request) with 15 ms
 * against 1,410-1,471 (0.63) with 40 ms and 1,221-1,428 (0.58) with 80 ms. A quiet process keeps 15 ms, where
 * the lag is shortest (the live-lag target is measured at half the write capacity); a saturated one doubles it,
 * then doubles it again, and steps back as it gets room. The busy loop includes the batches themselves: when a
 * longer period makes them cheap enough to leave room, the period comes back down.
 */
export class LivePacing {
  private level = 0;
  private readonly load: Load;
  private sampledAt: number;
  private readonly sample: () => number;
  private readonly requestsInFlight: (() => number) | undefined;
  private readonly clock: () => number;

  /**
   * `sample` answers the loop's utilisation since its previous call (this process's event loop by default),
   * `requestsInFlight` the mean number of requests in flight since its previous call (when the process serves
   * requests), `clock` the time in ms.
   */
  constructor(options: { sample?: () => number; requestsInFlight?: () => number; clock?: () => number } = {}) {
    this.sample = options.sample ?? eventLoopSampler();
    this.requestsInFlight = options.requestsInFlight;
    this.clock = options.clock ?? Date.now;
    this.sampledAt = this.clock();
    this.load = options.requestsInFlight ? { utilization: 0, inFlight: 0 } : { utilization: 0 };
  }

  /** The period (ms) a live consumer's batches take now; samples the loop when the last sample is `SAMPLE_MS` old. */
  periodMs(): number {
    const now = this.clock();
    if (now - this.sampledAt >= SAMPLE_MS) {
      this.sampledAt = now;
      const latest: Load = { utilization: this.sample() };
      if (this.requestsInFlight) latest.inFlight = this.requestsInFlight();
      this.load.utilization = smoothed(this.load.utilization, latest.utilization);
      if (latest.inFlight !== undefined) this.load.inFlight = smoothed(this.load.inFlight ?? 0, latest.inFlight);
      this.level = nextLevel(this.level, this.load, latest);
    }
    return LIVE_PERIODS_MS[this.level]!;
  }

  /** Whether the period is longer than the shortest (as of the last sample). */
  get busy(): boolean {
    return this.level > 0;
  }
}

/** This process's event-loop utilisation since the previous call. */
function eventLoopSampler(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}
