import type { Request, RequestHandler, Response } from 'express';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import { tenantOf } from '../auth.ts';
import { clockOf } from '../clock.ts';
import type { EventMetadata, Position } from '../event-store/port.ts';
import { isPosition } from '../event-store/port.ts';
import { waitForProjections } from '../../projectors/runtime/index.ts';
import { clientTraceId } from './accepted-input.ts';
import { badRequest, serviceUnavailable, zodIssues } from './errors.ts';

/** Metadata every event written on behalf of a request carries. */
export function eventMetadata(req: Request, res: Response): EventMetadata {
  const tenant = tenantOf(res);
  const requestId = String(req.id);
  return {
    organisationId: tenant.organisationId,
    actor: tenant.tokenId,
    causationId: requestId,
    correlationId: clientTraceId(req.get('x-correlation-id')) ?? requestId,
    occurredAt: clockOf(req).now().toISOString(),
  };
}

/** Parses with a zod schema; failure is the contract's 400 with `issues`. */
export function parse<Schema extends z.ZodType>(schema: Schema, input: unknown): z.infer<Schema> {
  const result = schema.safeParse(input);
  if (!result.success) throw badRequest(zodIssues(result.error));
  return result.data;
}

/** Tells the client where its write landed, for `x-min-position` on its next read. */
export function setEventPosition(res: Response, position: Position | null): void {
  if (position) res.set('x-event-position', position);
}

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
