import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/**
 * The periods a live consumer's batches may take under a steady stream of appends (see `GenerationWorker.pace`),
 * shortest first. Each one divides the next, so the ticks of a longer period are ticks of the shorter ones too:
 * workers that read the period a moment apart still meet on the same tick.
 */
export const LIVE_PERIODS_MS = [15, 30, 60] as const;

/**
 * The smoothed event-loop utilisation (the share of the time the loop was busy) at or above which the period
 * steps up a level, and below which it steps down again. The live-lag bench at half the write capacity (its
 * writers and every consumer in one process, 15 ms) sampled 0.75-0.99, 0.83 at the median; role `all`
 * saturated by 16 connections 0.96-1.00 with 15 ms and 0.93-0.99 with 60 ms: smoothed over a second, the
 * thresholds keep the first at 15 ms most of the time and the second at 60. (Stepping up at 0.93, the first
 * went up often enough to move its lag p99 from 62-72 ms to 85-89.)
 */
const STEP_UP_AT = 0.95;
const STEP_DOWN_BELOW = 0.85;

/** How long one sample of the event loop lasts, and the weight of the newest one in the smoothed utilisation (about a second's worth). */
export const SAMPLE_MS = 250;
const NEWEST_WEIGHT = 0.3;

/**
 * The next level (an index into `LIVE_PERIODS_MS`) for a process at `level` whose event loop was busy
 * `utilization` (0 to 1, smoothed) of the time: one step at a time, up when busy, down when it has room again.
 */
export function nextLevel(level: number, utilization: number): number {
  if (level < LIVE_PERIODS_MS.length - 1 && utilization >= STEP_UP_AT) return level + 1;
  if (level > 0 && utilization < STEP_DOWN_BELOW) return level - 1;
  return level;
}

/** The utilisation smoothed with a new sample (exponentially weighted). */
export function smoothed(previous: number, sample: number): number {
  return previous + NEWEST_WEIGHT * (sample - previous);
}

/**
 * The period of this process's live batches, from how busy its event loop is. Every batch costs a few round
 * trips and statements whatever it holds (begin with the checkpoint's compare-and-set, the writes, commit), so
 * with a period of 15 ms a process whose API is saturated spent most of its time on them: role `all` at 16
 * connections, custom events, 804-818 req/s (1.07 statements a request) with 15 ms against 1,410-1,471 (0.63)
 * with 40 ms and 1,221-1,428 (0.58) with 80 ms. A quiet process keeps 15 ms, where the lag is shortest (the
 * live-lag target is measured at half the write capacity); one whose loop stays busy doubles it, then doubles it
 * again, and steps back as it gets room. The busy loop includes the batches themselves: when a longer period
 * makes them cheap enough to leave room, the period comes back down.
 */
export class LivePacing {
  private level = 0;
  private utilization = 0;
  private sampledAt: number;

  /**
   * `sample` answers the loop's utilisation since its previous call (this process's event loop by default);
   * `clock` the time in ms.
   */
  constructor(
    private readonly sample: () => number = eventLoopSampler(),
    private readonly clock: () => number = Date.now,
  ) {
    this.sampledAt = clock();
  }

  /** The period (ms) a live consumer's batches take now; samples the loop when the last sample is `SAMPLE_MS` old. */
  periodMs(): number {
    const now = this.clock();
    if (now - this.sampledAt >= SAMPLE_MS) {
      this.sampledAt = now;
      this.utilization = smoothed(this.utilization, this.sample());
      this.level = nextLevel(this.level, this.utilization);
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
