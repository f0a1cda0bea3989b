import { describe, expect, it } from 'vitest';
import { drawWinners, newDrawSeed } from '../domain/draw.ts';

const weighted = [
  { userId: 'a', entries: 1 },
  { userId: 'b', entries: 2 },
  { userId: 'c', entries: 3 },
  { userId: 'd', entries: 4 },
];
const seeds = (n: number) => Array.from({ length: n }, (_, i) => `seed-${i}`);

/** How often each user comes out at `position`, as a share of the draws. */
function shares(draws: string[][], position: number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const winners of draws) {
    const winner = winners[position];
    if (winner !== undefined) counts[winner] = (counts[winner] ?? 0) + 1;
  }
  return Object.fromEntries(Object.entries(counts).map(([userId, count]) => [userId, count / draws.length]));
}

function expectShares(actual: Record<string, number>, expected: Record<string, number>, tolerance: number) {
  expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  for (const [userId, share] of Object.entries(expected)) expect(Math.abs((actual[userId] ?? 0) - share)).toBeLessThanOrEqual(tolerance);
}

describe('drawWinners', () => {
  it('follows the seed: with seed "audit", u0 = 0x362758260a78 / 2^48 = 0.2115 and u1 = 0x8828993b27ad / 2^48 = 0.5319', () => {
    // sha256("audit:0") starts 362758260a78: 0.2115 * 10 = 2.12 falls in b's [1, 3) of a[0,1) b[1,3) c[3,6) d[6,10).
    // sha256("audit:1") starts 8828993b27ad: 0.5319 * 8 = 4.26 falls in d's [4, 8) of a[0,1) c[1,4) d[4,8).
    expect(drawWinners(weighted, 2, 'audit')).toEqual(['b', 'd']);
  });

  it('draws the same winners for the same seed, whatever the order of the entrants', () => {
    const first = drawWinners(weighted, 3, 'same-seed');
    expect(drawWinners(weighted, 3, 'same-seed')).toEqual(first);
    expect(drawWinners([...weighted].reverse(), 3, 'same-seed')).toEqual(first);
  });

  it('draws differently for most other seeds', () => {
    const entrants = Array.from({ length: 10 }, (_, i) => ({ userId: `user-${i}`, entries: 1 }));
    const reference = drawWinners(entrants, 3, 'seed-0').join();
    const differing = seeds(100).filter((seed) => drawWinners(entrants, 3, seed).join() !== reference);
    expect(differing.length).toBeGreaterThanOrEqual(90);
  });

  it('never draws a winner twice, even one listed twice', () => {
    const entrants = [...weighted, { userId: 'a', entries: 5 }, { userId: 'e', entries: 1 }];
    for (const seed of seeds(500)) {
      const winners = drawWinners(entrants, 4, seed);
      expect(winners).toHaveLength(4);
      expect(new Set(winners).size).toBe(4);
    }
  });

  it('draws every entrant with entries when asked for more winners than there are', () => {
    const entrants = [...weighted, { userId: 'z', entries: 0 }];
    const winners = drawWinners(entrants, 10, 'seed-1');
    expect(winners).toHaveLength(4);
    expect([...winners].sort()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('never draws an entrant without entries', () => {
    const entrants = [
      { userId: 'a', entries: 0 },
      { userId: 'b', entries: 1 },
      { userId: 'c', entries: 0 },
      { userId: 'd', entries: 1 },
    ];
    for (const seed of seeds(500)) expect([...drawWinners(entrants, 3, seed)].sort()).toEqual(['b', 'd']);
    expect(drawWinners([{ userId: 'a', entries: 0 }], 1, 'seed-0')).toEqual([]);
    expect(drawWinners([], 1, 'seed-0')).toEqual([]);
  });

  it('draws one winner in proportion to entries 1:2:3:4 over 20,000 seeds, each share within 0.02 of entries/10', () => {
    const draws = seeds(20_000).map((seed) => drawWinners(weighted, 1, seed));
    expectShares(shares(draws, 0), { a: 0.1, b: 0.2, c: 0.3, d: 0.4 }, 0.02);
  });

  it('draws two without replacement over 20,000 seeds: first pick within 0.02 of entries/10, second within 0.02 of the conditional shares', () => {
    const draws = seeds(20_000).map((seed) => drawWinners(weighted, 2, seed));
    expectShares(shares(draws, 0), { a: 0.1, b: 0.2, c: 0.3, d: 0.4 }, 0.02);
    // P(second = x) = sum over first picks y != x of P(y) * entries(x) / (10 - entries(y)); a: 0.2/8 + 0.3/7 + 0.4/6.
    expectShares(shares(draws, 1), { a: 0.1345, b: 0.2413, c: 0.3083, d: 0.3159 }, 0.02);
  });
});

describe('newDrawSeed', () => {
  it('is 32 hex characters, fresh each time', () => {
    const seed = newDrawSeed();
    expect(seed).toMatch(/^[0-9a-f]{32}$/);
    expect(newDrawSeed()).not.toBe(seed);
  });
});
