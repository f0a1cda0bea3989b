import { z } from 'zod';
import { notFound } from '../infra/http/errors.ts';
import { parse } from '../api/routes.ts';
import type { EventMetadata } from '../infra/event-store/port.ts';
import { projections } from '../projectors/index.ts';
import { prepareProjections, projectionStatus } from '../projectors/runtime/index.ts';
import { listParked, rebuildProgress, rebuildStatus, requestRebuild, retryParked, skipParked } from '../projectors/maintenance.ts';
import {
  countLog,
  countLogInput,
  listStreams,
  listStreamsInput,
  readLogInput,
  readLogPage,
  readStreamInput,
  readStreamPage,
} from '../infra/event-store/browse.ts';
import { jobsStatus } from '../infra/job-status.ts';
import { underStartupLock } from '../infra/startup-lock.ts';
import { migrate } from '../service.ts';
import type { CommandContext } from '../command-api/read-port.ts';
import { backfillIdLookups } from '../command-api/id-lookups.ts';
import { createOrganisation, createOrganisationInput, issueToken, issueTokenInput, revokeToken, revokeTokenInput } from '../command-api/organisations.ts';

interface ConsoleOperation<Schema extends z.ZodType, Result> {
  input: Schema;
  run(ctx: CommandContext, input: z.infer<Schema>, metadata: EventMetadata): Promise<Result>;
}

const rebuildTargets = z.object({ targets: z.array(z.object({ name: z.string(), generation: z.number().int() })).min(1) });

const operation = <Schema extends z.ZodType, Result>(op: ConsoleOperation<Schema, Result>) => op;

/** What the `engage` CLI can do: it runs them in its own process, against the database. */
export const consoleOperations = {
  'organisation.create': operation({ input: createOrganisationInput, run: createOrganisation }),
  'token.issue': operation({ input: issueTokenInput, run: issueToken }),
  'token.revoke': operation({ input: revokeTokenInput, run: revokeToken }),
  'migrations.apply': operation({
    input: z.object({}),
    async run(ctx) {
      const applied = await underStartupLock(ctx.database, async () => {
        const names = await migrate(ctx.database.db);
        await prepareProjections(ctx.database.db, projections);
        return names;
      });
      const generations = await projectionStatus(ctx.database.db, ctx.store);
      return { applied, projections: generations.map(({ name, generation, version, status }) => ({ name, generation, version, status })) };
    },
  }),
  'projections.status': operation({ input: z.object({}), run: (ctx) => projectionStatus(ctx.database.db, ctx.store) }),
  /** Starts a blue/green rebuild of each projection, or finds the one under way (`resumed: true`). */
  'projections.rebuild': operation({
    input: z
      .object({ names: z.array(z.string()).default([]), all: z.boolean().default(false) })
      .refine((input) => input.all !== input.names.length > 0, 'name the projections to rebuild, or ask for all of them'),
    async run(ctx, input) {
      // `--all` rebuilds the read models; a process manager (no read model) is rebuilt only when named.
      const chosen = input.all
        ? projections.filter((consumer) => consumer.kind === 'projection')
        : [...new Set(input.names)].map((name) => projections.find((p) => p.name === name) ?? notFoundProjection(name));
      // All at once: each creates its generation's schema and tables in transactions of its own (about 0.1 s
      // each), and 20 read models one after the other kept `rebuild --all` from starting for 2 s (1.5 s together,
      // 2026-12-07). A name given twice is asked for once (two requests at once would race to create the same
      // generation). Every request is waited for before the first failure is answered.
      const requests = await Promise.allSettled(chosen.map((projection) => requestRebuild(ctx.database.db, projection)));
      const failed = requests.find((request) => request.status === 'rejected');
      if (failed) throw failed.reason;
      return requests.flatMap((request) => (request.status === 'fulfilled' ? [request.value] : []));
    },
  }),
  'projections.progress': operation({
    input: rebuildTargets,
    run: (ctx, input) => rebuildProgress(ctx.database.db, ctx.store, input.targets),
  }),
  /** `projections.progress` without counting the log: whether each generation is live yet. */
  'projections.rebuild-status': operation({ input: rebuildTargets, run: (ctx, input) => rebuildStatus(ctx.database.db, input.targets) }),
  'projections.parked.list': operation({
    input: z.object({ name: z.string().optional(), limit: z.number().int().min(1).max(10_000).default(1000) }),
    run: (ctx, input) => listParked(ctx.database.db, input),
  }),
  'projections.parked.retry': operation({
    input: z.object({ id: z.number().int().min(1) }),
    run: (ctx, input) => retryParked(ctx.database.db, ctx.store, projections, input.id, ctx.logger),
  }),
  'projections.parked.skip': operation({
    input: z.object({ id: z.number().int().min(1) }),
    run: (ctx, input) => skipParked(ctx.database.db, input.id, ctx.logger),
  }),
  'streams.list': operation({ input: listStreamsInput, run: (ctx, input) => listStreams(ctx.database, ctx.store, input) }),
  'streams.read': operation({ input: readStreamInput, run: (ctx, input) => readStreamPage(ctx.store, input) }),
  /** One page of the whole log for `engage replay`; the CLI asks page after page. */
  'events.read': operation({ input: readLogInput, run: (ctx, input) => readLogPage(ctx.store, input) }),
  'events.count': operation({ input: countLogInput, run: (ctx, input) => countLog(ctx.store, input) }),
  /** Records the owners of actions and tokens created before those lookups were written (see id-lookups.ts). */
  'lookups.backfill': operation({ input: z.object({}), run: (ctx) => backfillIdLookups(ctx.store) }),
  'jobs.status': operation({ input: z.object({}), run: (ctx) => jobsStatus(ctx.database.db, ctx.clock.now()) }),
};

export type ConsoleOperationName = keyof typeof consoleOperations;

/** What an operation answers, by name. */
export type ConsoleOperationResult<Name extends ConsoleOperationName> = Awaited<ReturnType<(typeof consoleOperations)[Name]['run']>>;

function notFoundProjection(name: string): never {
  throw notFound(`No projection named ${name}; known: ${projections.map((p) => p.name).join(', ')}`);
}

export async function runConsoleOperation<Name extends ConsoleOperationName>(
  ctx: CommandContext,
  name: Name,
  input: unknown,
  actor: string,
): Promise<ConsoleOperationResult<Name>> {
  // Looked up by a name that may come from outside the type system (a script): unknown names are a 404.
  const op = consoleOperations[name] as ConsoleOperation<z.ZodType, unknown> | undefined;
  if (!op) throw notFound(`No console operation ${name}`);
  const metadata: EventMetadata = { actor, occurredAt: new Date().toISOString() };
  // The operation of that name answers that operation's result (the map above pairs them).
  return (await op.run(ctx, parse(op.input, input), metadata)) as ConsoleOperationResult<Name>;
}
