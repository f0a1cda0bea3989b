import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newEventId } from '../infra/ids.ts';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('event ids', () => {
  it('are UUIDv7: the milliseconds of their moment first, then the version, the variant and random bits', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 48 - 1 }), (now) => {
        const id = newEventId(now);
        expect(id).toMatch(UUID_V7);
        expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(now);
      }),
    );
  });

  it('sort by their moment, and differ within one', () => {
    const earlier = Array.from({ length: 5000 }, () => newEventId(1_733_400_000_000));
    const later = Array.from({ length: 5000 }, () => newEventId(1_733_400_000_001));
    expect(new Set([...earlier, ...later]).size).toBe(10_000);
    const latestEarlier = earlier.reduce((a, b) => (a > b ? a : b));
    const earliestLater = later.reduce((a, b) => (a < b ? a : b));
    expect(latestEarlier < earliestLater).toBe(true);
  });
});
