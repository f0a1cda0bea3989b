/**
 * A leaderboard window's standings from the facts that happened in it: each user's score for the metric,
 * then the ranking. Pure, so a window can be re-scored from its facts at any time.
 */
import type { MetricType } from './leaderboard.ts';
import { isoWeekOf, localDate } from './windows.ts';

export type MetricFact = { userId: string; occurredAt: string } & (
  | { kind: 'xp'; amount: number; fromLeaderboard: boolean }
  | { kind: 'action-completed'; challengeId: string }
  | { kind: 'challenge-started'; challengeId: string }
  | { kind: 'challenge-completed'; challengeId: string }
);

export interface Score {
  userId: string;
  score: number;
  /** When the user last raised their score: the earlier one ranks first among equal scores. */
  reachedAt: string;
}

export interface Standing extends Score {
  rank: number;
}

/** What one fact adds to a metric: an amount, or a key that adds 1 the first time a user has it. */
type Contribution = { amount: number } | { key: string } | null;

function contribution(metricType: MetricType, fact: MetricFact, timeZone: string): Contribution {
  switch (metricType) {
    case 'total-xp':
      // XP won on a leaderboard does not count, or rank rewards would feed the next window's rankings.
      return fact.kind === 'xp' && !fact.fromLeaderboard ? { amount: fact.amount } : null;
    case 'total-actions-completed':
      return fact.kind === 'action-completed' ? { amount: 1 } : null;
    case 'total-challenges-started':
      return fact.kind === 'challenge-started' ? { amount: 1 } : null;
    case 'total-challenges-completed':
      return fact.kind === 'challenge-completed' ? { amount: 1 } : null;
    case 'unique-challenges-completed':
      return fact.kind === 'challenge-completed' ? { key: fact.challengeId } : null;
    case 'qualifying-active-days':
      return fact.kind === 'action-completed' ? { key: localDate(fact.occurredAt, timeZone) } : null;
    case 'consistent-weeks':
      return fact.kind === 'action-completed' ? { key: isoWeekOf(fact.occurredAt, timeZone) } : null;
  }
}

/** Each user's score over one window's facts, users in order of their first fact; users scoring 0 included. */
export function scoreFacts(metricType: MetricType, facts: MetricFact[], timeZone: string): Score[] {
  const tallies = new Map<string, Score & { keys: Set<string> }>();
  const chronological = [...facts].sort((a, b) => Date.parse(a.occurredAt) - Date.parse(b.occurredAt));
  for (const fact of chronological) {
    let tally = tallies.get(fact.userId);
    if (!tally) {
      tally = { userId: fact.userId, score: 0, reachedAt: fact.occurredAt, keys: new Set() };
      tallies.set(fact.userId, tally);
    }
    const added = contribution(metricType, fact, timeZone);
    if (added === null) continue;
    let amount: number;
    if ('key' in added) {
      amount = tally.keys.has(added.key) ? 0 : 1;
      tally.keys.add(added.key);
    } else {
      amount = added.amount;
    }
    tally.score += amount;
    if (amount > 0) tally.reachedAt = fact.occurredAt;
  }
  return [...tallies.values()].map(({ userId, score, reachedAt }) => ({ userId, score, reachedAt }));
}

/** Ranks 1..n, one user per rank: score descending, then who reached it first, then userId. Scores <= 0 are unranked. */
export function rankStandings(scores: Score[]): Standing[] {
  return scores
    .filter((entry) => entry.score > 0)
    .sort((a, b) => b.score - a.score || Date.parse(a.reachedAt) - Date.parse(b.reachedAt) || (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0))
    .map(({ userId, score, reachedAt }, index) => ({ rank: index + 1, userId, score, reachedAt }));
}
