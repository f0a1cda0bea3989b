import { describe, expect, it } from 'vitest';
import { LIVE_PERIODS_MS, LivePacing, SAMPLE_MS, nextLevel, smoothed } from '../projectors/runtime/pacing.ts';

describe('LivePacing: the period of live batches follows how busy the process is', () => {
  it('has periods that each divide the next, so workers that read it a moment apart meet on the same tick', () => {
    for (let index = 1; index < LIVE_PERIODS_MS.length; index++) expect(LIVE_PERIODS_MS[index]! % LIVE_PERIODS_MS[index - 1]!).toBe(0);
  });

  it('steps up one level at a time when busy, down when there is room, and holds in between', () => {
    expect(nextLevel(0, 0.97)).toBe(1);
    expect(nextLevel(0, 0.94)).toBe(0);
    expect(nextLevel(1, 0.97)).toBe(2);
    expect(nextLevel(2, 0.99)).toBe(2);
    expect(nextLevel(2, 0.9)).toBe(2);
    expect(nextLevel(2, 0.5)).toBe(1);
    expect(nextLevel(1, 0.5)).toBe(0);
    expect(nextLevel(0, 0.1)).toBe(0);
    expect(nextLevel(0, 0.9)).toBe(0);
  });

  it('smooths the samples, so one busy sample in a quiet stretch moves nothing', () => {
    expect(smoothed(0.8, 0.8)).toBeCloseTo(0.8);
    expect(smoothed(0.8, 1)).toBeLessThan(0.93);
    let utilization = 0;
    for (let sample = 0; sample < 20; sample++) utilization = smoothed(utilization, 1);
    expect(utilization).toBeGreaterThan(0.99);
  });

  it('keeps 15 ms in a quiet process, goes to 60 in a saturated one and comes back as the load goes', () => {
    let time = 0;
    let busy = 0.3;
    const pacing = new LivePacing(
      () => busy,
      () => time,
    );
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
    busy = 1;
    const saturated = periodsOver(20);
    expect(saturated.at(-1)).toBe(60);
    expect(pacing.busy).toBe(true);
    // Up one level at a time: 15, then 30, then 60.
    expect(saturated.indexOf(30)).toBeGreaterThan(-1);
    expect(saturated.indexOf(30)).toBeLessThan(saturated.indexOf(60));
    busy = 0.2;
    const quiet = periodsOver(20);
    expect(quiet.at(-1)).toBe(15);
    expect(quiet.indexOf(30)).toBeLessThan(quiet.indexOf(15));
  });

  it('samples no more than once per sample period, however often it is asked', () => {
    let time = 0;
    let sampled = 0;
    const pacing = new LivePacing(
      () => {
        sampled++;
        return 1;
      },
      () => time,
    );
    for (let ask = 0; ask < 100; ask++) pacing.periodMs();
    expect(sampled).toBe(0);
    time += SAMPLE_MS;
    for (let ask = 0; ask < 100; ask++) pacing.periodMs();
    expect(sampled).toBe(1);
  });
});
