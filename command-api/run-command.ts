import type { Request, Response } from 'express';
import type { DomainEvent } from '../domain/decider.ts';
import { tenantOf } from '../infra/auth.ts';
import { eventMetadata, setEventPosition } from '../api/routes.ts';
import {
  fingerprintsOf,
  handleCommand,
  headerIdempotencyOf,
  idempotencyKeyOf,
  type CommandPart,
  type CommandResponse,
  type Handled,
  type Idempotency,
} from './command-handling.ts';
import type { Caller, ServiceContext } from '../api/context.ts';
import type { AppendGuard } from '../infra/event-store/port.ts';

/**
 * A write route's whole tail: decide and append (idempotent under an `Idempotency-Key` header, or under
 * the explicit key a route passes, such as a custom event's nonce), then answer with the response and
 * the position it wrote (`x-event-position`). A replayed answer also carries `idempotent-replayed: true`.
 * `reveal` adds to the answer what must not be recorded with it (a secret derived again on each answer):
 * the recorded answer, in the log, never holds it.
 */
export async function runCommand(
  ctx: ServiceContext,
  req: Request,
  res: Response,
  command: {
    parts: CommandPart[];
    respond: (events: DomainEvent[][]) => CommandResponse;
    idempotency?: Pick<Idempotency, 'scope' | 'key' | 'replayOnMismatch'>;
    reveal?: (body: any) => unknown;
  },
): Promise<void> {
  const { organisationId } = tenantOf(res);
  const idempotency: Idempotency | undefined = command.idempotency
    ? { organisationId, ...fingerprintsOf(req.body), ...command.idempotency }
    : headerIdempotency(req, res);
  const handled = await handleCommand(ctx.store, command.parts, eventMetadata(req, res), command.respond, idempotency);
  respondHandled(res, handled, command.reveal);
}

/** Who asks, as the use cases take it. */
export function callerOf(req: Request, res: Response, appendGuard?: AppendGuard): Caller {
  const { organisationId, tokenId } = tenantOf(res);
  return { organisationId, tokenId, metadata: eventMetadata(req, res), appendGuard };
}

/** The request's `Idempotency-Key`, scoped to its route and fingerprinted by its body; undefined without one. */
export function headerIdempotency(req: Request, res: Response): Idempotency | undefined {
  const key = idempotencyKeyOf(req.get('idempotency-key'));
  if (key === undefined) return undefined;
  return headerIdempotencyOf(tenantOf(res).organisationId, req, key, req.body);
}

/** A handled command's answer: its response, where it wrote (`x-event-position`), and `idempotent-replayed: true` for a replay. */
export function respondHandled(res: Response, handled: Handled, reveal?: (body: any) => unknown): void {
  setEventPosition(res, handled.position);
  if (handled.replayed) res.set('idempotent-replayed', 'true');
  sendJson(res, handled.response.status, reveal ? reveal(handled.response.body) : handled.response.body);
}

/**
 * A command's answer, written as `res.json` would less its ETag: express hashes every answer it sends (and
 * copies it into a buffer to do so) for a revalidation no client makes of a write's answer. A 204 has no body.
 */
function sendJson(res: Response, status: number, body: unknown): void {
  res.status(status);
  const text = status === 204 || body === undefined ? undefined : JSON.stringify(body);
  if (text === undefined) {
    res.end();
    return;
  }
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}
