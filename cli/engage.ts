import { Command, Option } from 'commander';
import { API_FAMILIES } from '../domain/organisation.ts';
import type { ConsoleOptions, RunOperation } from './console-client.ts';
import type { CliContext } from './operations.ts';
import { CliError, printRecord, printTable } from './output.ts';

// The service, the database and the operations load when a command runs, not for `--help` or a typo.
type Operations = typeof import('./operations.ts');

const program = new Command('engage')
  .description('Operate the engage service: organisations, tokens, streams and replays, projections, jobs.')
  .showHelpAfterError();

const org = program.command('org').description('organisations');
org
  .command('create')
  .description('create an organisation with its standard domain and an admin token')
  .requiredOption('--name <name>', 'display name')
  .requiredOption('--slug <slug>', 'lowercase letters, digits and hyphens; gives the domain <slug>.<PLATFORM_DOMAIN>')
  .option('--json', 'print {organisationId, domain, token} as JSON')
  .action(async (options: { name: string; slug: string; json?: boolean }) => {
    const created = await run((call) => call('organisation.create', { name: options.name, slug: options.slug }));
    if (options.json) return console.log(JSON.stringify({ organisationId: created.organisationId, domain: created.domain, token: created.token }));
    printRecord({ organisationId: created.organisationId, domain: created.domain, tokenId: created.tokenId, token: created.token });
    console.log('\nKeep the token: it is shown once and stored only as a hash.');
  });

const token = program.command('token').description('API tokens');
token
  .command('issue')
  .description('issue an API token for an organisation')
  .requiredOption('--org <organisationId>', 'organisation id')
  .option('--name <name>', 'a label for the token', 'api')
  .option('--domain <hostname>', "one of the organisation's domains (default: its standard domain)")
  .addOption(new Option('--families <families...>', 'API families the token grants').choices([...API_FAMILIES]).default([...API_FAMILIES]))
  .option('--json', 'print as JSON')
  .action(async (options: { org: string; name: string; domain?: string; families: string[]; json?: boolean }) => {
    const issued = await run((call) =>
      call('token.issue', { organisationId: options.org, name: options.name, domain: options.domain, families: options.families }),
    );
    if (options.json) return console.log(JSON.stringify(issued));
    printRecord({ tokenId: issued.tokenId, domain: issued.domain, families: issued.families.join(', '), token: issued.token });
  });
token
  .command('revoke <tokenId>')
  .description('revoke an API token; the next request with it gets 401')
  .option('--json', 'print as JSON')
  .action(async (tokenId: string, options: { json?: boolean }) => {
    const revoked = await run((call) => call('token.revoke', { tokenId }));
    if (options.json) return console.log(JSON.stringify(revoked));
    console.log(`Token ${tokenId} revoked.`);
  });

program
  .command('migrate')
  .description('apply pending schema migrations (event store, projector runtime, read models); start-up does the same')
  .option('--json', 'print as JSON')
  .action(async (options: { json?: boolean }) => {
    const result = await run((call) => call('migrations.apply', {}), { projectors: false, jobs: false });
    if (options.json) return console.log(JSON.stringify(result));
    console.log(result.applied.length ? `Applied: ${result.applied.join(', ')}` : 'Event store and runtime schemas are up to date.');
    printTable(result.projections, ['name', 'generation', 'version', 'status']);
  });

program
  .command('lookups')
  .description('lookup streams (action → challenge, token → organisation)')
  .command('backfill')
  .description('record the owners of actions and tokens created before the lookups existed; run once after upgrading')
  .option('--json', 'print as JSON')
  .action(async (options: { json?: boolean }) => {
    const result = await run((call) => call('lookups.backfill', {}), { projectors: false, jobs: false });
    if (options.json) return console.log(JSON.stringify(result));
    console.log(`Scanned ${result.scanned} events; recorded ${result.recorded} lookups.`);
  });

const projectionsCommand = program.command('projections').description('read models');
projectionsCommand
  .command('status')
  .description('checkpoint, lag and parked events per projection')
  .option('--json', 'print NDJSON, one projection a line')
  .action((options: { json?: boolean }) => operate((ctx, ops) => ops.projectionsStatus(ctx, options)));
projectionsCommand
  .command('rebuild [names...]')
  .description('blue/green: build new generations from the start of the log, swap each in once caught up; run again to resume')
  .option('--all', 'every projection')
  .option('--detach', 'start (or find) the building generations and return; the projector processes finish them')
  .option('--json', 'print NDJSON, one projection a line')
  .option('--no-progress', 'no progress bar')
  .action((names: string[], options: { all?: boolean; detach?: boolean; json?: boolean; progress: boolean }) => {
    if (Boolean(options.all) === names.length > 0) throw new CliError('name the projections to rebuild, or pass --all');
    return operate(
      async (ctx, ops) => {
        const result = await ops.projectionsRebuild(ctx, { names, all: options.all, detach: options.detach, json: options.json });
        if (result.interrupted) process.exitCode = 130;
        else if (!result.complete && !options.detach) process.exitCode = 1;
      },
      { drive: true, progress: options.progress },
    );
  });
const parked = projectionsCommand.command('parked').description('events a projection parked after repeated failures');
parked
  .command('list')
  .description('parked events of live and building generations, oldest first')
  .option('--projection <name>', 'only this projection')
  .option('--json', 'print NDJSON, one parked event a line')
  .action((options: { projection?: string; json?: boolean }) => operate((ctx, ops) => ops.parkedList(ctx, { name: options.projection, json: options.json })));
parked
  .command('retry <id>')
  .description('apply the parked event again; removed from the list when it succeeds, kept with the new error when not')
  .option('--json', 'print as JSON')
  .action((id: string, options: { json?: boolean }) => operate((ctx, ops) => ops.parkedRetry(ctx, parseId(id), options)));
parked
  .command('skip <id>')
  .description('give up on the parked event: removed from the list, the projection stays past it')
  .option('--json', 'print as JSON')
  .action((id: string, options: { json?: boolean }) => operate((ctx, ops) => ops.parkedSkip(ctx, parseId(id), options)));

const streams = program.command('streams').description('the event log, stream by stream');
streams
  .command('list')
  .description('streams in name order: events, last revision, last event time')
  .option('--category <category>', 'only streams of this category (the name up to its first "-")')
  .option('--limit <n>', 'at most this many streams (0: all)', parseCount, 100)
  .option('--json', 'print NDJSON, one stream a line')
  .action((options: { category?: string; limit: number; json?: boolean }) => operate((ctx, ops) => ops.streamsList(ctx, options)));
streams
  .command('read <stream>')
  .description("a stream's events in revision order")
  .option('--from <revision>', 'first revision', parseCount, 0)
  .option('--limit <n>', 'at most this many events (0: to the end)', parseCount, 0)
  .option('--ndjson', 'print NDJSON, one event a line, payload in full')
  .option('--json', 'same as --ndjson')
  .action((stream: string, options: { from: number; limit: number; ndjson?: boolean; json?: boolean }) =>
    operate((ctx, ops) => ops.streamsRead(ctx, stream, { from: options.from, limit: options.limit, ndjson: options.ndjson || options.json })),
  );

program
  .command('replay')
  .description('every event of the log that matches the filters, in log order, to an NDJSON or CSV file')
  .requiredOption('--out <file>', 'file.ndjson or file.csv (or - for stdout, with --format)')
  .addOption(new Option('--format <format>', 'default: from the file extension').choices(['ndjson', 'csv']))
  .option('--organisation <id>', "only this organisation's events (metadata.organisationId)")
  .option('--category <category>', 'only this stream category (repeatable)', collect, [])
  .option('--type <type>', 'only this event type (repeatable)', collect, [])
  .option('--from <time>', 'recorded at or after this time (ISO 8601)')
  .option('--to <time>', 'recorded before this time (ISO 8601)')
  .option('--after <position>', 'after this position (exclusive)')
  .option('--until <position>', 'up to this position (inclusive)')
  .option('--batch-size <n>', 'events scanned per page', parseCount, 500)
  .option('--no-progress', 'no progress bar')
  .action(
    (options: {
      out: string;
      format?: 'ndjson' | 'csv';
      organisation?: string;
      category: string[];
      type: string[];
      from?: string;
      to?: string;
      after?: string;
      until?: string;
      batchSize: number;
      progress: boolean;
    }) =>
      operate(
        async (ctx, ops) => {
          const result = await ops.replay(ctx, { ...options, categories: options.category, types: options.type });
          ops.printReplayResult(ctx, result);
          if (result.interrupted) process.exitCode = 130;
        },
        { progress: options.progress },
      ),
  );

program
  .command('jobs')
  .description('the job queue')
  .command('status')
  .description('jobs by kind and state, the oldest due job, recent failures')
  .option('--json', 'print as JSON')
  .action((options: { json?: boolean }) => operate((ctx, ops) => ops.jobsStatus(ctx, options)));

async function run<T = any>(work: (call: RunOperation, service: import('../service.ts').ServiceCore) => Promise<T>, options?: ConsoleOptions): Promise<T> {
  const [{ loadConfig }, { withConsole }] = await Promise.all([import('../infra/config.ts'), import('./console-client.ts')]);
  return withConsole(loadConfig(), work, options);
}

/**
 * Runs an analyst or operator command: reads only, so the process runs no projectors or jobs, except the
 * projections a rebuild drives (`drive`). Ctrl-C asks the command to stop cleanly (a second Ctrl-C exits at once).
 */
async function operate(work: (ctx: CliContext, ops: Operations) => Promise<unknown>, options: { drive?: boolean; progress?: boolean } = {}): Promise<void> {
  const ops = await import('./operations.ts');
  const controller = new AbortController();
  const interrupt = () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  process.on('SIGINT', interrupt);
  try {
    await run(
      (call, service) =>
        work(
          {
            run: call,
            out: process.stdout,
            err: process.stderr,
            progress: (options.progress ?? true) && process.stderr.isTTY,
            drive: options.drive ? ops.driveIn(service) : undefined,
            signal: controller.signal,
          },
          ops,
        ),
      { projectors: false, jobs: false },
    );
  } finally {
    process.off('SIGINT', interrupt);
  }
}

function parseCount(value: string): number {
  if (!/^\d+$/.test(value)) throw new CliError(`not a whole number: ${value}`);
  return Number(value);
}

function parseId(value: string): number {
  if (!/^[1-9]\d*$/.test(value)) throw new CliError(`not a parked event id: ${value}`);
  return Number(value);
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

// Exit once the command is done, even if a client library keeps a timer or connection open: a CLI run
// must end when its command has.
program
  .parseAsync()
  .then(() => process.exit(process.exitCode ?? 0))
  .catch(async (error: unknown) => {
    const [{ ConfigError }, { HttpError }, { DomainError }, { ZodError }] = await Promise.all([
      import('../infra/config.ts'),
      import('../infra/http/errors.ts'),
      import('../domain/decider.ts'),
      import('zod'),
    ]);
    if (error instanceof ConfigError) console.error(error.message);
    else if (error instanceof CliError || error instanceof DomainError) console.error(`engage: ${error.message}`);
    else if (error instanceof HttpError) {
      console.error(`engage: ${error.message}`);
      for (const issue of error.issues ?? []) console.error(`  - ${issue.message}`);
    } else if (error instanceof ZodError) console.error(`engage: ${error.issues.map((issue) => issue.message).join('; ')}`);
    else console.error(error);
    process.exit(1);
  });
