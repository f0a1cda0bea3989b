#!/usr/bin/env -S npx tsx
import { Command, Option } from 'commander';
import { ZodError } from 'zod';
import { API_FAMILIES } from '../domain/organisation.ts';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { HttpError } from '../infra/http/errors.ts';
import { ConsoleFailure, withConsole } from './console-client.ts';
import { printRecord, printTable } from './output.ts';

const program = new Command('engage').description('Operate the engage service: organisations, tokens, projections.').showHelpAfterError();

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
    const result = await run((call) => call('migrations.apply', {}));
    if (options.json) return console.log(JSON.stringify(result));
    console.log(result.applied.length ? `Applied: ${result.applied.join(', ')}` : 'Event store and runtime schemas are up to date.');
    printTable(result.projections, ['name', 'generation', 'version', 'status']);
  });

const projectionsCommand = program.command('projections').description('read models');
projectionsCommand
  .command('status')
  .description('checkpoint, lag and parked events per projection')
  .option('--json', 'print NDJSON, one projection a line')
  .action(async (options: { json?: boolean }) => {
    const rows = await run((call) => call('projections.status', {}));
    if (options.json) return rows.forEach((row: unknown) => console.log(JSON.stringify(row)));
    printTable(rows, ['name', 'generation', 'status', 'checkpoint', 'eventsBehind', 'secondsBehind', 'parked', 'lastError']);
  });

async function run<T = any>(work: Parameters<typeof withConsole<T>>[1]): Promise<T> {
  return withConsole(loadConfig(), work);
}

program.parseAsync().catch((error: unknown) => {
  if (error instanceof ConfigError) console.error(error.message);
  else if (error instanceof ConsoleFailure || error instanceof HttpError) {
    console.error(`engage: ${error.message}`);
    for (const issue of (error as ConsoleFailure).issues ?? []) console.error(`  - ${issue.message}`);
  } else if (error instanceof ZodError) console.error(`engage: ${error.issues.map((issue) => issue.message).join('; ')}`);
  else console.error(error);
  process.exit(1);
});
