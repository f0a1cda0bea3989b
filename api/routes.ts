import type { Request, Response } from 'express';
import type { z } from 'zod';
import { tenantOf } from '../infra/auth.ts';
import { clockOf } from '../infra/clock.ts';
import type { EventMetadata, Position } from '../infra/event-store/port.ts';
import { clientTraceId } from '../infra/http/accepted-input.ts';
import { badRequest, notFound, zodIssues } from '../infra/http/errors.ts';
import { ID_PATTERN } from '../infra/ids.ts';

/** Route helpers both APIs share: request metadata, parsing, path ids and the headers they document. */

/** Metadata every event written on behalf of a request carries. */
export function eventMetadata(req: Request, res: Response): EventMetadata {
  const tenant = tenantOf(res);
  // createHttpApp's genReqId always makes a string.
  const requestId = typeof req.id === 'string' ? req.id : JSON.stringify(req.id);
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

/** The `Idempotency-Key` header as the OpenAPI description shows it on every write that honours it. */
export const idempotencyKeyHeader = {
  name: 'Idempotency-Key',
  description: 'Retrying with the same key returns the first answer and changes nothing; reusing it for a different body is a 409',
};

/** A path id that cannot be an id names nothing: 404, like an unknown one. */
export function pathId(value: string | string[] | undefined, what: string): string {
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) throw notFound(`${what} not found`);
  return value.toLowerCase();
}
