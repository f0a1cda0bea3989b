import { pino } from 'pino';
import { runConsoleOperation, type ConsoleOperationName, type ConsoleOperationResult } from './console-operations.ts';
import type { Config } from '../infra/config.ts';
import { inBackground } from '../infra/database.ts';
import { openService, type ServiceCore } from '../service.ts';

/** Runs one console operation; its answer is typed by the operation's name. */
export type RunOperation = <Name extends ConsoleOperationName>(name: Name, input: unknown) => Promise<ConsoleOperationResult<Name>>;

export interface ConsoleOptions {
  /** Run the projectors in this process while the work lasts (default true). */
  projectors?: boolean;
  /** Run due jobs in this process likewise (default true). */
  jobs?: boolean;
}

/**
 * Runs console operations in this process, on the database itself: the server at DATABASE_URL, or in
 * embedded mode the PostgreSQL of DATA_DIR (joined when the service or another command runs it, started
 * for the command's duration when nothing does). The projectors run here until done unless told otherwise,
 * so a command that waits for its read model does not wait for a service that may not be running.
 */
export async function withConsole<T>(config: Config, work: (run: RunOperation, service: ServiceCore) => Promise<T>, options: ConsoleOptions = {}): Promise<T> {
  // Logs go to stderr: stdout carries the command's output (NDJSON a script may parse). The command reports
  // what it did itself, so the service's own warnings show only when LOG_LEVEL asks for debugging.
  const logger = pino({ level: ['info', 'warn'].includes(config.logLevel) ? 'error' : config.logLevel }, pino.destination(2));
  // No HTTP app: the command answers on stdout. Redis only when jobs run here (see ServiceOptions.http).
  const service = await openService(config, logger, { projectors: options.projectors ?? true, jobs: options.jobs ?? true, http: 'none' });
  try {
    // An operator's command may rightly read the whole log (a replay, a rebuild): background limits.
    return await inBackground(() => work((name, input) => runConsoleOperation(service, name, input, 'cli'), service));
  } finally {
    await service.close();
  }
}
