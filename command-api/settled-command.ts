import type { Request, Response } from 'express';
import { tenantOf } from '../infra/auth.ts';
import { serviceUnavailable } from '../infra/http/errors.ts';
import { eventMetadata, setEventPosition } from '../api/routes.ts';
import { handleCommand, headerIdempotencyOf, idempotencyKeyOf, type CommandPart, type Idempotency } from './command-handling.ts';
import type { CommandContext } from './read-port.ts';

/**
 * A write whose effect must hold from the very next request (a removed domain's tokens, changed settings):
 * decide and append like `runCommand` (honouring `Idempotency-Key`), then wait until the tenancy read model
 * has caught up before answering. Returns where it wrote, for the caller to build its answer from.
 */
export async function runSettledCommand(ctx: CommandContext, req: Request, res: Response, parts: CommandPart[]): Promise<{ replayed: boolean }> {
  const { organisationId } = tenantOf(res);
  const key = idempotencyKeyOf(req.get('idempotency-key'));
  const idempotency: Idempotency | undefined = key ? headerIdempotencyOf(organisationId, req, key, req.body) : undefined;
  const handled = await handleCommand(ctx.store, parts, eventMetadata(req, res), () => ({ status: 200, body: null }), idempotency);
  if (handled.position !== null) {
    const reached = await ctx.reads.caughtUp(['tenancy'], handled.position, Math.max(ctx.config.readYourWritesTimeoutMs, 10_000));
    if (!reached) throw serviceUnavailable('Written, but the tenancy read model has not caught up yet; retry the read');
  }
  setEventPosition(res, handled.position);
  if (handled.replayed) res.set('idempotent-replayed', 'true');
  return { replayed: handled.replayed };
}
