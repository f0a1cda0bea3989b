/**
 * The giveaway draw: winners picked with probability proportional to their entries, without replacement.
 * Deterministic for a seed, so a recorded draw (entrants, count, seed) can be recomputed and audited.
 */
import { createHash, randomBytes } from 'node:crypto';

export interface Entrant {
  userId: string;
  entries: number;
}

/** The counter-th uniform number in [0, 1) of the seed's stream: the first 48 bits of SHA-256(`seed:counter`). */
function uniform(seed: string, counter: number): number {
  return createHash('sha256').update(`${seed}:${counter}`).digest().readUIntBE(0, 6) / 2 ** 48;
}

/** The entrant whose cumulative-entries interval [before, before + entries) contains `target`. */
function entrantAt(pool: Entrant[], target: number): number {
  let cumulative = 0;
  for (const [index, entrant] of pool.entries()) {
    cumulative += entrant.entries;
    if (target < cumulative) return index;
  }
  // Only float rounding on fractional entries can put the target at the very end.
  return pool.length - 1;
}

/** Up to `count` distinct winners, in the order drawn; fewer when fewer entrants hold entries. */
export function drawWinners(entrants: Entrant[], count: number, seed: string): string[] {
  // An entrant listed twice holds the sum of their entries, so nobody can win twice.
  const entriesByUser = new Map<string, number>();
  for (const { userId, entries } of entrants) entriesByUser.set(userId, (entriesByUser.get(userId) ?? 0) + entries);
  // Sorted so the result depends on the seed and the entries, not on the order the entrants were listed in.
  const pool = [...entriesByUser]
    .filter(([, entries]) => entries > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([userId, entries]) => ({ userId, entries }));
  const winners: string[] = [];
  for (let counter = 0; winners.length < count && pool.length > 0; counter++) {
    const remaining = pool.reduce((total, entrant) => total + entrant.entries, 0);
    const [winner] = pool.splice(entrantAt(pool, uniform(seed, counter) * remaining), 1);
    if (winner) winners.push(winner.userId);
  }
  return winners;
}

/** A fresh seed, recorded with the draw it is used for. */
export function newDrawSeed(): string {
  return randomBytes(16).toString('hex');
}
