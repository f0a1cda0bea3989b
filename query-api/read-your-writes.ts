import type { RequestHandler } from 'express';
import type { Kysely } from 'kysely';
import { isPosition } from '../infra/event-store/port.ts';
import { badRequest, serviceUnavailable } from '../infra/http/errors.ts';
import { waitForProjections, waitForProjectionsAndConsequences } from '../projectors/runtime/index.ts';

/** The `x-min-position` header as the OpenAPI description shows it on every read that honours it. */
export const minPositionHeader = {
  name: 'x-min-position',
  description:
    'An `x-event-position` from a write: the read waits (bounded) until the read model has caught up with it, and with what the engine derived from it (points, XP, completions, standings) where the read shows that',
};

/**
 * Read models that fold what the process managers append because of a write (the engine's attempts,
 * completions, points, XP, streaks, hand-outs and rank pay-outs): a read of one of them waits for those too.
 */
const FOLD_CONSEQUENCES = new Set([
  'user_ledgers',
  'achievements',
  'leaderboard_standings',
  'reward_allocations',
  'reward_entries',
  'reward_assets',
  'challenge_step_analytics',
  'giveaway_analytics',
]);

/**
 * Read-your-writes: with `x-min-position`, the read waits (bounded) until the projections it reads have
 * passed that position, and answers 503 with Retry-After if they do not in time. When one of them folds what
 * the process managers derive from writes, the read waits for that as well (`waitForProjectionsAndConsequences`):
 * a custom event's points and standings, not only the event.
 */
export function readYourWrites(db: Kysely<any>, projections: readonly string[], timeoutMs: number): RequestHandler {
  const consequences = projections.some((name) => FOLD_CONSEQUENCES.has(name));
  return async (req, _res, next) => {
    const wanted = req.get('x-min-position');
    if (wanted === undefined) return next();
    if (!isPosition(wanted)) throw badRequest([{ message: 'x-min-position: not a position returned in x-event-position' }]);
    const caughtUp = consequences
      ? await waitForProjectionsAndConsequences(db, projections, wanted, timeoutMs)
      : await waitForProjections(db, projections, wanted, timeoutMs);
    if (!caughtUp) throw serviceUnavailable('The read model has not caught up with x-min-position yet');
    next();
  };
}
