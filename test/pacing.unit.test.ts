import { describe, expect, it } from 'vitest';
import { LIVE_PERIODS_MS, LOOP_ONLY, LivePacing, SAMPLE_MS, WITH_REQUESTS, nextLevel, smoothed } from '../projectors/runtime/pacing.ts';
import { RequestsInFlight } from '../infra/requests-in-flight.ts';

describe('LivePacing: the period of live batches follows how saturated the process is', () => {
  const top = LIVE_PERIODS_MS.length - 1;

  it('has periods that each divide the next, so workers that read it a moment apart meet on the same tick', () => {
    for (let index = 1; index < LIVE_PERIODS_MS.length; index++) expect(LIVE_PERIODS_MS[index]! % LIVE_PERIODS_MS[index - 1]!).toBe(0);
  });

  it('in a process of projections only, steps up one level at a time on a busy loop, down when it has room', () => {
    expect(nextLevel(0, { utilization: LOOP_ONLY.up })).toBe(1);
    expect(nextLevel(1, { utilization: 0.99 })).toBe(2);
    expect(nextLevel(top, { utilization: 0.99 })).toBe(top);
    expect(nextLevel(0, { utilization: 0.94 })).toBe(0);
    expect(nextLevel(2, { utilization: 0.9 })).toBe(2);
    expect(nextLevel(2, { utilization: 0.5 })).toBe(1);
    expect(nextLevel(1, { utilization: 0.5 })).toBe(0);
    expect(nextLevel(0, { utilization: 0.1 })).toBe(0);
  });

  it('in a process serving requests, steps up only while requests queue in it, and down once they drain', () => {
    // A busy loop with a request or so in flight: a process with room, whatever its loop does.
    expect(nextLevel(0, { utilization: 0.99, inFlight: 1 })).toBe(0);
    expect(nextLevel(0, { utilization: WITH_REQUESTS.up, inFlight: WITH_REQUESTS.queuedAt })).toBe(1);
    expect(nextLevel(1, { utilization: 0.9, inFlight: 16 })).toBe(2);
    // Between the thresholds it holds.
    expect(nextLevel(2, { utilization: 0.82, inFlight: 3 })).toBe(2);
    expect(nextLevel(2, { utilization: 0.9, inFlight: WITH_REQUESTS.drainedBelow - 0.5 })).toBe(1);
    expect(nextLevel(1, { utilization: WITH_REQUESTS.down - 0.05, inFlight: 16 })).toBe(0);
  });

  it('smooths the samples, so one busy sample in a quiet stretch moves nothing', () => {
    expect(smoothed(0.8, 0.8)).toBeCloseTo(0.8);
    expect(smoothed(0.8, 1)).toBeLessThan(LOOP_ONLY.up);
    let utilization = 0;
    for (let sample = 0; sample < 20; sample++) utilization = smoothed(utilization, 1);
    expect(utilization).toBeGreaterThan(0.99);
  });

  it('keeps 15 ms in a quiet process, goes to its longest period in a saturated one and comes back as the load goes', () => {
    let time = 0;
    let busy = 0.3;
    let inFlight = 1;
    const pacing = new LivePacing({ sample: () => busy, requestsInFlight: () => inFlight, clock: () => time });
    const periodsOver = (samples: number) => {
      const periods: number[] = [];
      for (let sample = 0; sample < samples; sample++) {
        time += SAMPLE_MS;
        periods.push(pacing.periodMs());
      }
      return periods;
    };
    expect(new Set(periodsOver(20))).toEqual(new Set([15]));
    expect(pacing.busy).toBe(false);
    // A busy loop alone, with no queue: still 15 ms.
    busy = 0.97;
    expect(new Set(periodsOver(20))).toEqual(new Set([15]));
    inFlight = 16;
    const saturated = periodsOver(20);
    expect(saturated.at(-1)).toBe(LIVE_PERIODS_MS[top]);
    expect(pacing.busy).toBe(true);
    // Up one level at a time: 15, then 30, then 60, and so on.
    expect(saturated.indexOf(30)).toBeGreaterThan(-1);
    for (let level = 2; level <= top; level++) {
      expect(saturated.indexOf(LIVE_PERIODS_MS[level - 1]!)).toBeLessThan(saturated.indexOf(LIVE_PERIODS_MS[level]!));
    }
    inFlight = 1;
    busy = 0.2;
    const quiet = periodsOver(20);
    expect(quiet.at(-1)).toBe(15);
    expect(quiet.indexOf(30)).toBeLessThan(quiet.indexOf(15));
  });

  it('steps up at the first sample where requests queue deep in a busy loop, and holds until the last sample has room too', () => {
    const deep = { utilization: WITH_REQUESTS.up, inFlight: 2 * WITH_REQUESTS.queuedAt };
    const idle = { utilization: 0.05, inFlight: 0.1 };
    // Smoothed from an idle start the load is still quiet; the sample alone steps it up.
    expect(nextLevel(0, idle, deep)).toBe(1);
    expect(nextLevel(1, idle, deep)).toBe(2);
    // Merely queued (below twice queuedAt), or queued in a loop with room: the smoothed load decides.
    expect(nextLevel(0, idle, { utilization: 0.99, inFlight: 2 * WITH_REQUESTS.queuedAt - 1 })).toBe(0);
    expect(nextLevel(0, idle, { utilization: WITH_REQUESTS.up - 0.01, inFlight: 16 })).toBe(0);
    // Down only when both the smoothed load and the last sample have room.
    expect(nextLevel(top, idle, { utilization: 0.9, inFlight: 12 })).toBe(top);
    expect(nextLevel(2, idle, idle)).toBe(1);
    // A process of projections only: one busy sample moves nothing.
    expect(nextLevel(0, { utilization: 0.1 }, { utilization: 1 })).toBe(0);
  });

  it('reaches its longest period, one step a sample, from idle under a saturating load', () => {
    let time = 0;
    let busy = 0.05;
    let inFlight = 0;
    const pacing = new LivePacing({ sample: () => busy, requestsInFlight: () => inFlight, clock: () => time });
    for (let sample = 0; sample < 20; sample++) {
      time += SAMPLE_MS;
      pacing.periodMs();
    }
    busy = 0.9;
    inFlight = 12;
    const periods: number[] = [];
    for (let sample = 0; sample < 6; sample++) {
      time += SAMPLE_MS;
      periods.push(pacing.periodMs());
    }
    expect(periods).toEqual([30, 60, 120, 240, 240, 240]);
    // Room again: back down one step a sample, to the shortest.
    busy = 0.3;
    inFlight = 1;
    const after: number[] = [];
    for (let sample = 0; sample < 12; sample++) {
      time += SAMPLE_MS;
      after.push(pacing.periodMs());
    }
    expect(after.slice(-1)).toEqual([15]);
    for (let index = 1; index < after.length; index++) expect(after[index]! === after[index - 1]! || after[index]! * 2 === after[index - 1]!).toBe(true);
  });

  it('samples no more than once per sample period, however often it is asked', () => {
    let time = 0;
    let sampled = 0;
    const pacing = new LivePacing({
      sample: () => {
        sampled++;
        return 1;
      },
      clock: () => time,
    });
    for (let ask = 0; ask < 100; ask++) pacing.periodMs();
    expect(sampled).toBe(0);
    time += SAMPLE_MS;
    for (let ask = 0; ask < 100; ask++) pacing.periodMs();
    expect(sampled).toBe(1);
  });
});

describe('RequestsInFlight: the mean number of requests served at once', () => {
  it('averages over the time since the previous sample, weighting each count by how long it lasted', () => {
    let time = 0;
    const requests = new RequestsInFlight(() => time);
    requests.enter();
    time = 10;
    requests.enter();
    time = 30;
    requests.leave();
    time = 40;
    // 1 for 10 ms, 2 for 20 ms, 1 for 10 ms: 60 request-ms over 40 ms.
    expect(requests.meanSinceLastSample()).toBeCloseTo(1.5);
    time = 50;
    requests.leave();
    time = 60;
    // 1 for 10 ms, then none for 10 ms.
    expect(requests.meanSinceLastSample()).toBeCloseTo(0.5);
  });

  it('answers the current count when no time has passed since the previous sample', () => {
    let time = 5;
    const requests = new RequestsInFlight(() => time);
    requests.enter();
    requests.enter();
    expect(requests.meanSinceLastSample()).toBe(2);
    time = 6;
    expect(requests.meanSinceLastSample()).toBe(2);
  });
});
