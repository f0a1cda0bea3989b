import type { RequestHandler } from 'express';
import type { Kysely } from 'kysely';
import { isPosition } from '../infra/event-store/port.ts';
import { badRequest, serviceUnavailable } from '../infra/http/errors.ts';
import { waitForProjections } from '../projectors/runtime/index.ts';

/** The `x-min-position` header as the OpenAPI description shows it on every read that honours it. */
export const minPositionHeader = {
  name: 'x-min-position',
  description: 'An `x-event-position` from a write: the read waits (bounded) until the read model has caught up with it',
};

/**
 * Read-your-writes: with `x-min-position`, the read waits (bounded) until the projections it reads have
 * passed that position, and answers 503 with Retry-After if they do not in time.
 */
export function readYourWrites(db: Kysely<any>, projections: readonly string[], timeoutMs: number): RequestHandler {
  return async (req, _res, next) => {
    const wanted = req.get('x-min-position');
    if (wanted === undefined) return next();
    if (!isPosition(wanted)) throw badRequest([{ message: 'x-min-position: not a position returned in x-event-position' }]);
    if (!(await waitForProjections(db, projections, wanted, timeoutMs))) {
      throw serviceUnavailable('The read model has not caught up with x-min-position yet');
    }
    next();
  };
}
