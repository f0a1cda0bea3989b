import { timingSafeEqual } from 'node:crypto';
import { Router } from 'express';
import { z } from 'zod';
import { forbidden, notFound } from '../infra/http/errors.ts';
import { parse } from '../infra/http/request-context.ts';
import type { EventMetadata } from '../infra/event-store/port.ts';
import { projections } from '../projectors/index.ts';
import { prepareProjections, projectionStatus, startRebuild } from '../projectors/runtime.ts';
import { migrate } from '../service.ts';
import type { ServiceContext } from './context.ts';
import { createOrganisation, createOrganisationInput, issueToken, issueTokenInput, revokeToken, revokeTokenInput } from './organisations.ts';

interface ConsoleOperation<Schema extends z.ZodType> {
  input: Schema;
  run(ctx: ServiceContext, input: z.infer<Schema>, metadata: EventMetadata): Promise<unknown>;
}

const operation = <Schema extends z.ZodType>(op: ConsoleOperation<Schema>) => op;

/**
 * What the `engage` CLI can do. It runs them in its own process against the database, or, when an
 * embedded server owns the PGlite files, asks that server through the console endpoint: same code either way.
 */
export const consoleOperations = {
  'organisation.create': operation({ input: createOrganisationInput, run: createOrganisation }),
  'token.issue': operation({ input: issueTokenInput, run: issueToken }),
  'token.revoke': operation({ input: revokeTokenInput, run: revokeToken }),
  'migrations.apply': operation({
    input: z.object({}),
    async run(ctx) {
      const applied = await migrate(ctx.database.db);
      await prepareProjections(ctx.database.db, projections);
      const generations = await projectionStatus(ctx.database.db, ctx.store);
      return { applied, projections: generations.map(({ name, generation, version, status }) => ({ name, generation, version, status })) };
    },
  }),
  'projections.status': operation({ input: z.object({}), run: (ctx) => projectionStatus(ctx.database.db, ctx.store) }),
  'projections.rebuild': operation({
    input: z.object({ names: z.array(z.string()).min(1) }),
    async run(ctx, input) {
      const chosen = input.names.map((name) => projections.find((p) => p.name === name) ?? notFoundProjection(name));
      return Promise.all(
        chosen.map(async (projection) => ({ name: projection.name, generation: (await startRebuild(ctx.database.db, projection)).generation })),
      );
    },
  }),
};

export type ConsoleOperationName = keyof typeof consoleOperations;

function notFoundProjection(name: string): never {
  throw notFound(`No projection named ${name}; known: ${projections.map((p) => p.name).join(', ')}`);
}

export async function runConsoleOperation(ctx: ServiceContext, name: string, input: unknown, actor: string): Promise<unknown> {
  const op = consoleOperations[name as ConsoleOperationName] as ConsoleOperation<z.ZodType> | undefined;
  if (!op) throw notFound(`No console operation ${name}`);
  const metadata: EventMetadata = { actor, occurredAt: new Date().toISOString() };
  return op.run(ctx, parse(op.input, input), metadata);
}

/** Loopback only, and only with the secret the server wrote into its data directory at start-up. */
export function consoleRouter(ctx: ServiceContext, secret: string): Router {
  const router = Router();
  const expected = Buffer.from(secret);
  router.post('/_console/:operation', async (req, res) => {
    const remote = req.socket.remoteAddress ?? '';
    const loopback = remote === '127.0.0.1' || remote === '::1' || remote === '::ffff:127.0.0.1';
    const given = Buffer.from(req.get('x-console-secret') ?? '');
    if (!loopback || given.length !== expected.length || !timingSafeEqual(given, expected))
      throw forbidden('Console access is local and needs the console secret');
    res.json(await runConsoleOperation(ctx, String(req.params.operation), req.body ?? {}, 'console'));
  });
  return router;
}
